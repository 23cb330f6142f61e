"""Rows as the store's inserts take them: one NamedTuple per table, whose field names are the
table's column names. `Store.insert` reads the columns from the row's type, so a row cannot
reach the wrong columns, and builders name each value (`TrajectoryRow(Agent=...)`) instead of
counting positions in a 28-field tuple. The evaluators' row types live with their tables
(`evaluators/scoring/schema.py` `ScoreRow` ...).

`otel_traces` has none: its Nested columns (`Events.Timestamp` ...) are not identifiers, and
its rows are ClickHouse's own (`INSERT ... SELECT` over the spool) or the decoder's positional
tuples in `otlp_decode.OTEL_TRACES_COLUMNS` order, built in the hot loop and inserted with
`Store.insert_rows`.
"""

from __future__ import annotations

from typing import NamedTuple


class TrajectoryRow(NamedTuple):
    """A `trajectories` row: one assembled agent run at one revision (schema.TRAJECTORIES,
    migrations 2-3 for Model, AvailableTools and Incomplete)."""

    TraceId: str
    RootSpanId: str
    Agent: str
    AgentId: str
    AgentVersion: str
    Task: str
    ConversationId: str
    ServiceName: str
    Model: str
    Start: str  # `seconds.fraction` text (otlp_decode.ns_to_clickhouse)
    LatencyS: float
    Failure: int
    ErrorType: str
    Input: str  # JSON, or "" when not captured
    Output: str
    InputTokens: int
    OutputTokens: int
    ToolCount: int
    ToolNames: list[str]
    ToolStatuses: list[str]
    ToolCalls: str  # JSON list of the calls
    SpanCount: int
    Revision: int
    AssembledAt: str
    Version: int
    IsDeleted: int
    AvailableTools: str
    Incomplete: int


class ArrivalRow(NamedTuple):
    """A `trace_arrivals` row: a trace had spans in one stored batch (what assembly resumes from)."""

    TraceId: str
    ArrivedAt: str  # `seconds.fraction` text, strictly increasing per sidecar
    HasAgent: int


class AssemblyStateRow(NamedTuple):
    """An `assembled_traces` row (migration 8; `assembly_state` before, without the range): how
    far a trace is assembled, which runs it left and where its spans lie."""

    TraceId: str
    AssembledThrough: str  # `seconds.fraction` text: arrivals up to here are assembled
    RunKeys: list[str]  # the root span ids of the runs stored for the trace
    Revision: int
    Version: int
    SpansFrom: str  # `seconds.fraction` text: every span assembled starts in [SpansFrom, SpansUntil)
    SpansUntil: str


class MigrationRow(NamedTuple):
    """A `schema_migrations` row: one applied migration (schema.migrate)."""

    Version: int
    Name: str
    AppliedAt: str  # `seconds.fraction` text
    Checksum: str
