"""Stored `trajectories` rows for tests, made by the assembler's own row builder.

Tests that need runs in the store without sending spans build an `AgentRun` here and store it
with `assembler.trajectory_row` (or `assembler.deletion_row`), exactly as assembly does: when the
row changes, these rows change with it, and no test keeps a hand-written copy of the columns.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from otlp_builders import new_span_id, new_trace_id

from agenttrail.collector.assembler import deletion_row, trajectory_row
from agenttrail.collector.conventions import ToolDefinition
from agenttrail.collector.rows import TrajectoryRow
from agenttrail.collector.store import Store
from agenttrail.collector.trajectory import NOT_CAPTURED, AgentRun, ToolCall

# A tool call as tests write it: a name, (name, status), or a mapping with any of
# name, input, output, status, error_type, latency_ms, agent.
ToolSpec = str | tuple[str, str] | Mapping[str, Any]


def tool_call(spec: ToolSpec, *, agent: str, start_ns: int, index: int) -> ToolCall:
    """One stored tool call; calls of a run follow each other 1 ms apart."""
    if isinstance(spec, str):
        fields: Mapping[str, Any] = {"name": spec}
    elif isinstance(spec, tuple):
        fields = {"name": spec[0], "status": spec[1]}
    else:
        fields = spec
    status = fields.get("status", "ok")
    begin = start_ns + index * 1_000_000
    return ToolCall(
        name=fields["name"],
        input=fields.get("input", NOT_CAPTURED),
        output=fields.get("output", NOT_CAPTURED),
        status=status,
        error_type=fields.get("error_type", "" if status == "ok" else "ToolError"),
        latency_ms=fields.get("latency_ms", 1.0),
        span_id=new_span_id(),
        agent=fields.get("agent", agent),
        start_ns=begin,
        end_ns=begin + int(fields.get("latency_ms", 1.0) * 1_000_000),
    )


def agent_run(
    *,
    start: float,
    trace_id: str | None = None,
    root_span_id: str | None = None,
    agent: str = "bot",
    task: str = "",
    latency_s: float = 1.0,
    failure: bool = False,
    error_type: str | None = None,
    tools: Sequence[ToolSpec] = (),
    model: str = "",
    agent_version: str = "",
    conversation_id: str = "",
    service_name: str = "svc",
    input: Any = None,
    output: Any = None,
    input_tokens: int = 0,
    output_tokens: int = 0,
    available_tools: Sequence[ToolDefinition] = (),
) -> AgentRun:
    """An assembled run as `trajectory.build_runs` returns it; `start` in epoch seconds."""
    start_ns = round(start * 1e6) * 1000
    calls = [tool_call(spec, agent=agent, start_ns=start_ns, index=i) for i, spec in enumerate(tools)]
    return AgentRun(
        trace_id=trace_id or new_trace_id(),
        root_span_id=root_span_id or new_span_id(),
        agent=agent,
        agent_id="",
        agent_version=agent_version,
        task=task,
        conversation_id=conversation_id,
        service_name=service_name,
        start_ns=start_ns,
        latency_s=latency_s,
        failure=failure,
        error_type=("RuntimeError" if failure else "") if error_type is None else error_type,
        input=input,
        output=output,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        span_count=len(calls) + 1,
        tool_calls=calls,
        model=model,
        available_tools=list(available_tools),
    )


def run_row(
    run: AgentRun, *, revision: int = 1, version: int | None = None, assembled_at: float | None = None
) -> TrajectoryRow:
    """The row assembly stores for `run` (version defaults to the revision)."""
    return trajectory_row(
        run,
        revision=revision,
        assembled_at=time.time() if assembled_at is None else assembled_at,
        version=revision if version is None else version,
    )


def deleted_row(run: AgentRun, *, version: int) -> TrajectoryRow:
    """The row assembly stores when re-assembly drops `run`."""
    return deletion_row(run.trace_id, run.root_span_id, time.time(), version)


def insert_trajectories(store: Store, rows: Iterable[TrajectoryRow]) -> None:
    store.insert("trajectories", list(rows))


def store_runs(store: Store, runs: Iterable[AgentRun], **row_options: Any) -> list[AgentRun]:
    """Store each run as assembly would (first revision unless told otherwise); returns the runs."""
    stored = list(runs)
    insert_trajectories(store, [run_row(run, **row_options) for run in stored])
    return stored
