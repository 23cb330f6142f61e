"""Rows as the store's inserts take them: one NamedTuple per table, whose field names are the
table's column names. `Store.insert` reads the columns from the row's type, so a row cannot
reach the wrong columns, and builders name each value (`TrajectoryRow(Agent=...)`) instead of
counting positions in a 28-field tuple. The evaluators' `ScoreRow` lives with their tables
(`evaluators/scoring/schema.py`).
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
