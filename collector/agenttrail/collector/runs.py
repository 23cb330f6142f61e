"""The agent run and its tool calls: one model for assembly, the stored form, the metrics and
offline evaluation (spec/metrics.md, "Vocabulary"). Pure, imports nothing of agenttrail.

A call's ``input`` and ``output`` are a JSON value, or one of two markers that are not JSON null:

- ``NOT_CAPTURED``: the trace did not record it (capture off, or an instrumentation that records
  no arguments). Not ``{}``: a metric that would have to compare such arguments is not computable
  for the run.
- ``ABSENT``: the data did not carry the field (a dataset or reference call without one). Kept
  apart from null because a reference input that is null is a wildcard, while a tool that
  returned null has an output.

``build_runs`` fills the trace fields (status, latency, span id, agent, times, call id); a call
read from a dataset or a reference has only name, input and output, the rest at their defaults.
The metrics compare name, input and output; ``as_predicted`` is what they compare of a traced
call. Every path that scores a traced run reads its calls through it: the online scorer and a
dataset of runs from the stored form (``predicted_calls``), runnable offline evaluation from
``build_runs``, so one run gives one predicted trajectory whichever way it arrives.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import KW_ONLY, dataclass, field, fields
from datetime import datetime
from typing import Any, Final


class Absent(enum.Enum):
    """The type of ``ABSENT`` (a field the data did not carry) and ``NOT_CAPTURED`` (a value the
    trace did not record)."""

    ABSENT = "ABSENT"
    NOT_CAPTURED = "NOT_CAPTURED"

    def __repr__(self) -> str:
        return self.value


ABSENT: Final = Absent.ABSENT
NOT_CAPTURED: Final = Absent.NOT_CAPTURED


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call; the fields after ``output`` are what a trace adds (keyword-only)."""

    name: str
    input: Any = ABSENT  # a JSON value (the metrics read a JSON object or null), or a marker
    output: Any = ABSENT  # a JSON value (None for a failed traced call), or a marker
    _: KW_ONLY
    status: str = "ok"  # "ok" | "error"
    error_type: str = ""
    latency_ms: float = 0.0
    span_id: str = ""
    agent: str = ""
    start_ns: int = 0
    end_ns: int = 0
    call_id: str = ""

    def __repr__(self) -> str:
        """Name, input and output, then only the trace fields that are set."""
        shown = [f"name={self.name!r}", f"input={self.input!r}", f"output={self.output!r}"]
        shown += [
            f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)[3:]
            if getattr(self, f.name) != f.default
        ]
        return f"ToolCall({', '.join(shown)})"

    def to_json(self) -> dict[str, Any]:
        """The stored form; `input_captured: false` says the arguments were not recorded, which
        is not the same as `input: {}` (called with no arguments)."""
        return {
            "name": self.name,
            "input": None if isinstance(self.input, Absent) else self.input,
            "output": None if isinstance(self.output, Absent) else self.output,
            "input_captured": self.input is not NOT_CAPTURED,
            "output_captured": self.output is not NOT_CAPTURED,
            "status": self.status,
            "error_type": self.error_type,
            "latency_ms": self.latency_ms,
            "span_id": self.span_id,
            "agent": self.agent,
            "call_id": self.call_id,
        }

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> ToolCall:
        """A stored call (``to_json``'s form) read back; a missing field takes its default, a
        missing input or output is ABSENT. Times are not stored (0). A call that is not an object
        with a name is a ValueError saying so (rows another writer stored can look like that)."""
        if not isinstance(stored, Mapping) or "name" not in stored:
            raise ValueError(f"a stored tool call must be an object with a name, got {_shown(stored)}")
        latency = stored.get("latency_ms")
        return cls(
            str(stored["name"]),
            NOT_CAPTURED if stored.get("input_captured") is False else stored.get("input", ABSENT),
            NOT_CAPTURED if stored.get("output_captured") is False else stored.get("output", ABSENT),
            status=str(stored.get("status") or "ok"),
            error_type=str(stored.get("error_type") or ""),
            latency_ms=float(latency) if isinstance(latency, int | float) else 0.0,
            span_id=str(stored.get("span_id") or ""),
            agent=str(stored.get("agent") or ""),
            call_id=str(stored.get("call_id") or ""),
        )

    def as_predicted(self) -> ToolCall:
        """The call as the metrics compare it on the predicted side: arguments that are not a JSON
        object (cut to a string by the size limit, a lossy framework copy, null) are ABSENT,
        NOT_CAPTURED stays; a failed call, one whose result was not recorded, and one whose result
        is null (the stored form cannot tell a tool that returned None from a call without an
        output) have no output."""
        arguments = self.input if self.input is NOT_CAPTURED or isinstance(self.input, dict) else ABSENT
        no_output = self.status == "error" or self.output is None or isinstance(self.output, Absent)
        return ToolCall(self.name, arguments, ABSENT if no_output else self.output)


def predicted_calls(stored: Iterable[Mapping[str, Any]]) -> list[ToolCall]:
    """Calls in the stored form (`to_json`: a `trajectories` row, `agenttrail trajectories --format
    json`, a dataset of such runs) as the metrics compare them; anything but a list of calls is
    a ValueError."""
    if not isinstance(stored, list | tuple):
        raise ValueError(f"stored tool calls must be a list of calls, got {_shown(stored)}")
    return [ToolCall.from_json(call).as_predicted() for call in stored]


def _shown(value: object) -> str:
    """`value` in an error message, cut short: a stored row can be large."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool the agent could call: name, description, JSON schema of its parameters (or None)."""

    name: str
    description: str = ""
    parameters: Any = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(slots=True)
class AgentRun:
    """One agent run as ``build_runs`` assembles it (filled in place while building)."""

    trace_id: str
    root_span_id: str
    agent: str
    agent_id: str
    agent_version: str
    task: str
    conversation_id: str
    service_name: str
    start_ns: int
    latency_s: float
    failure: bool
    error_type: str
    input: Any
    output: Any
    input_tokens: int
    output_tokens: int
    span_count: int
    tool_calls: list[ToolCall] = field(default_factory=list)
    model: str = ""  # the model of the run's first model span (requested, else responding)
    incomplete: bool = False  # the run's root span never arrived (its agent span never ended)
    available_tools: list[ToolDefinition] = field(default_factory=list)

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> AgentRun:
        """A run as `agenttrail trajectories --format json` prints it (`queries.trajectory_to_json`)
        read back. That form does not carry the agent id, the service, the model or the
        span count (left empty), the start below the microsecond, or the calls' start and end."""
        start = document.get("start")
        start_ns = 0
        if isinstance(start, str) and start:
            moment = datetime.fromisoformat(start.replace("Z", "+00:00"))
            start_ns = (
                int(moment.replace(microsecond=0).timestamp()) * 1_000_000 + moment.microsecond
            ) * 1000
        return cls(
            trace_id=str(document.get("trace_id") or ""),
            root_span_id=str(document.get("root_span_id") or ""),
            agent=str(document.get("agent") or ""),
            agent_id="",
            agent_version=str(document.get("agent_version") or ""),
            task=str(document.get("task") or ""),
            conversation_id=str(document.get("conversation_id") or ""),
            service_name="",
            start_ns=start_ns,
            latency_s=float(document.get("latency_s") or 0.0),
            failure=bool(document.get("failure")),
            error_type=str(document.get("error_type") or ""),
            input=document.get("input"),
            output=document.get("output"),
            input_tokens=int(document.get("input_tokens") or 0),
            output_tokens=int(document.get("output_tokens") or 0),
            span_count=0,
            tool_calls=[ToolCall.from_json(call) for call in document.get("tool_calls") or []],
            incomplete=bool(document.get("incomplete")),
            available_tools=[
                ToolDefinition(str(tool["name"]), str(tool.get("description") or ""), tool.get("parameters"))
                for tool in document.get("available_tools") or []
            ],
        )
