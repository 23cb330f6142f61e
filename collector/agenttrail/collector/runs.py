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
call, and both the online scorer (through ``from_json``) and offline evaluation use it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field, fields
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
        missing input or output is ABSENT. Times are not stored (0)."""
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
        NOT_CAPTURED stays; a failed call, or one whose result was not recorded, has no output."""
        arguments = self.input if self.input is NOT_CAPTURED or isinstance(self.input, dict) else ABSENT
        no_output = self.status == "error" or isinstance(self.output, Absent)
        return ToolCall(self.name, arguments, ABSENT if no_output else self.output)


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
