"""Rebuild agent runs and their ordered tool calls from the spans of one trace. Pure, no I/O.

Understands agenttrail's own spans, third-party OpenTelemetry GenAI spans (`invoke_agent` /
`execute_tool`, and tool calls that only appear as `tool_call` parts of a chat span's
`gen_ai.output.messages`) and OpenInference spans (`openinference.span.kind` AGENT / TOOL).

Rules (spec/telemetry.md, spec/metrics.md):
- a run is a top-level agent span (no agent span above it); nested agents' calls belong to
  the run that contains them, each call tagged with the agent that made it;
- a trace with tool calls but no agent span is one run rooted at the trace's root span;
- calls are ordered by start time, then end time, then span id.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agenttrail.instrumentation import attributes as attr

STATUS_ERROR = "Error"

# The span attributes trajectory building reads; assembly fetches only these from storage.
TRAJECTORY_ATTRIBUTES = [
    attr.GEN_AI_OPERATION_NAME,
    attr.GEN_AI_AGENT_NAME,
    attr.GEN_AI_AGENT_ID,
    attr.GEN_AI_AGENT_VERSION,
    attr.GEN_AI_CONVERSATION_ID,
    attr.GEN_AI_TOOL_NAME,
    attr.GEN_AI_TOOL_CALL_ID,
    attr.GEN_AI_TOOL_CALL_ARGUMENTS,
    attr.GEN_AI_TOOL_CALL_RESULT,
    attr.GEN_AI_USAGE_INPUT_TOKENS,
    attr.GEN_AI_USAGE_OUTPUT_TOKENS,
    attr.GEN_AI_REQUEST_MODEL,
    attr.GEN_AI_RESPONSE_MODEL,
    attr.GEN_AI_INPUT_MESSAGES,
    attr.GEN_AI_OUTPUT_MESSAGES,
    attr.ERROR_TYPE,
    attr.OPENINFERENCE_SPAN_KIND,
    attr.TOOL_NAME,
    attr.INPUT_VALUE,
    attr.OUTPUT_VALUE,
    attr.SESSION_ID,
    attr.AGENTTRAIL_TASK,
    attr.AGENTTRAIL_JUDGE,
]


@dataclass(frozen=True, slots=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One stored span, as read back from `otel_traces`."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    service_name: str
    start_ns: int
    duration_ns: int
    status_code: str
    status_message: str
    attributes: Mapping[str, str]
    events: Sequence[SpanEvent] = ()

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.duration_ns


@dataclass(slots=True)
class ToolCall:
    name: str
    input: Any
    output: Any
    status: str  # "ok" | "error"
    error_type: str
    latency_ms: float
    span_id: str
    agent: str
    start_ns: int
    end_ns: int
    call_id: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "input": self.input,
            "output": self.output,
            "status": self.status,
            "error_type": self.error_type,
            "latency_ms": self.latency_ms,
            "span_id": self.span_id,
            "agent": self.agent,
        }


@dataclass(slots=True)
class AgentRun:
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
    model: str = ""  # the model of the run's first chat span (requested, else responding)


def parse_json_value(text: str | None) -> Any:
    """Attribute text -> JSON value when it is JSON, else the text itself (None when absent)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return text


def _is_agent(span: SpanRecord) -> bool:
    attrs = span.attributes
    return (
        attrs.get(attr.GEN_AI_OPERATION_NAME) == attr.OPERATION_INVOKE_AGENT
        or attrs.get(attr.OPENINFERENCE_SPAN_KIND) == "AGENT"
    )


def _is_tool(span: SpanRecord) -> bool:
    attrs = span.attributes
    return (
        attrs.get(attr.GEN_AI_OPERATION_NAME) == attr.OPERATION_EXECUTE_TOOL
        or attrs.get(attr.OPENINFERENCE_SPAN_KIND) == "TOOL"
    )


def _is_chat(span: SpanRecord) -> bool:
    attrs = span.attributes
    return attrs.get(attr.GEN_AI_OPERATION_NAME) in (attr.OPERATION_CHAT, "text_completion") or (
        attrs.get(attr.OPENINFERENCE_SPAN_KIND) == "LLM"
    )


def _failed(span: SpanRecord) -> bool:
    return span.status_code == STATUS_ERROR or any(event.name == "exception" for event in span.events)


def _error_type(span: SpanRecord) -> str:
    if not _failed(span):
        return ""
    found = span.attributes.get(attr.ERROR_TYPE)
    if found:
        return found
    for event in span.events:
        if event.name == "exception":
            return event.attributes.get("exception.type", "_OTHER")
    return "_OTHER"


def _agent_name(span: SpanRecord) -> str:
    attrs = span.attributes
    name = attrs.get(attr.GEN_AI_AGENT_NAME)
    if name:
        return name
    prefix = "invoke_agent "
    return span.name[len(prefix) :] if span.name.startswith(prefix) else span.name


def _tool_name(span: SpanRecord) -> str:
    attrs = span.attributes
    name = attrs.get(attr.GEN_AI_TOOL_NAME) or attrs.get(attr.TOOL_NAME)
    if name:
        return name
    prefix = "execute_tool "
    return span.name[len(prefix) :] if span.name.startswith(prefix) else span.name


def _int_attr(attrs: Mapping[str, str], key: str) -> int:
    try:
        return int(attrs.get(key, "0") or 0)
    except ValueError:
        return 0


def _tool_call_from_span(span: SpanRecord, agent: str) -> ToolCall:
    attrs = span.attributes
    arguments = attrs.get(attr.GEN_AI_TOOL_CALL_ARGUMENTS, attrs.get(attr.INPUT_VALUE))
    failed = _failed(span)
    result = None if failed else attrs.get(attr.GEN_AI_TOOL_CALL_RESULT, attrs.get(attr.OUTPUT_VALUE))
    return ToolCall(
        name=_tool_name(span),
        input=parse_json_value(arguments),
        output=parse_json_value(result),
        status="error" if failed else "ok",
        error_type=_error_type(span),
        latency_ms=span.duration_ns / 1e6,
        span_id=span.span_id,
        agent=agent,
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        call_id=attrs.get(attr.GEN_AI_TOOL_CALL_ID, ""),
    )


def _message_tool_calls(span: SpanRecord, agent: str, known_call_ids: set[str]) -> list[ToolCall]:
    """Tool calls a chat span requested in `gen_ai.output.messages`, when no tool span recorded them."""
    messages = parse_json_value(span.attributes.get(attr.GEN_AI_OUTPUT_MESSAGES))
    if not isinstance(messages, list):
        return []
    calls: list[ToolCall] = []
    for message in messages:
        parts = message.get("parts") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list) else []:
            if not isinstance(part, dict) or part.get("type") != "tool_call":
                continue
            call_id = str(part.get("id") or "")
            if call_id and call_id in known_call_ids:
                continue
            arguments = part.get("arguments")
            if isinstance(arguments, str):
                arguments = parse_json_value(arguments)
            calls.append(
                ToolCall(
                    name=str(part.get("name") or ""),
                    input=arguments,
                    output=None,
                    status="ok",
                    error_type="",
                    latency_ms=0.0,
                    span_id=span.span_id,
                    agent=agent,
                    # After the chat span that asked for it, in the order it was asked.
                    start_ns=span.end_ns,
                    end_ns=span.end_ns,
                    call_id=call_id,
                )
            )
    return calls


def _message_tool_results(spans: Sequence[SpanRecord]) -> dict[str, Any]:
    """call id -> result, from `tool_call_response` parts of chat spans' input messages."""
    results: dict[str, Any] = {}
    for span in spans:
        messages = parse_json_value(span.attributes.get(attr.GEN_AI_INPUT_MESSAGES))
        if not isinstance(messages, list):
            continue
        for message in messages:
            parts = message.get("parts") if isinstance(message, dict) else None
            for part in parts if isinstance(parts, list) else []:
                if isinstance(part, dict) and part.get("type") == "tool_call_response" and part.get("id"):
                    results[str(part["id"])] = part.get("response")
    return results


def build_runs(spans: Sequence[SpanRecord]) -> list[AgentRun]:
    """All top-level agent runs of one trace, each with its ordered tool calls."""
    by_id: dict[str, SpanRecord] = {}
    for span in spans:
        by_id.setdefault(span.span_id, span)  # replays may store a span twice
    unique = list(by_id.values())
    if not unique or any(span.attributes.get(attr.AGENTTRAIL_JUDGE) == "true" for span in unique):
        return []

    def nearest_agent(span: SpanRecord) -> SpanRecord | None:
        """The closest agent span at or above `span`, following parents that arrived."""
        seen: set[str] = set()
        current: SpanRecord | None = span
        while current is not None and current.span_id not in seen:
            if _is_agent(current):
                return current
            seen.add(current.span_id)
            current = by_id.get(current.parent_span_id)
        return None

    def top_agent(span: SpanRecord) -> SpanRecord | None:
        top = None
        found = nearest_agent(span)
        while found is not None:
            top = found
            parent = by_id.get(found.parent_span_id)
            found = nearest_agent(parent) if parent is not None else None
        return top

    tool_spans = [span for span in unique if _is_tool(span)]
    chat_spans = [span for span in unique if _is_chat(span)]
    roots = [span for span in unique if _is_agent(span) and top_agent(span) is span]
    if not roots:
        if not tool_spans and not any(_message_tool_calls(s, "", set()) for s in chat_spans):
            return []
        roots = [_trace_root(unique)]

    runs = {root.span_id: _new_run(root, is_agent=_is_agent(root)) for root in roots}
    members: dict[str, list[SpanRecord]] = {root.span_id: [] for root in roots}
    single_root = roots[0].span_id if len(roots) == 1 else None
    for span in unique:
        owner = top_agent(span)
        key = owner.span_id if owner is not None and owner.span_id in runs else single_root
        if key is not None:
            members[key].append(span)

    for root_id, run in runs.items():
        run_spans = members[root_id]
        run.span_count = len(run_spans)
        known_ids: set[str] = set()
        calls: list[ToolCall] = []
        for span in run_spans:
            agent_span = nearest_agent(span)
            agent = _agent_name(agent_span) if agent_span is not None else run.agent
            if _is_tool(span):
                call = _tool_call_from_span(span, agent)
                known_ids.add(call.call_id)
                calls.append(call)
            if _is_chat(span):
                run.input_tokens += _int_attr(span.attributes, attr.GEN_AI_USAGE_INPUT_TOKENS)
                run.output_tokens += _int_attr(span.attributes, attr.GEN_AI_USAGE_OUTPUT_TOKENS)
        run.model = _first_model(run_spans)
        results = _message_tool_results(run_spans)
        for span in run_spans:
            if _is_chat(span):
                agent_span = nearest_agent(span)
                agent = _agent_name(agent_span) if agent_span is not None else run.agent
                for call in _message_tool_calls(span, agent, known_ids):
                    call.output = results.get(call.call_id)
                    calls.append(call)
        calls.sort(key=lambda c: (c.start_ns, c.end_ns, c.span_id))
        run.tool_calls = calls
    return sorted(runs.values(), key=lambda r: (r.start_ns, r.root_span_id))


def _first_model(spans: Sequence[SpanRecord]) -> str:
    """The model the run talked to: its earliest chat span that names one."""
    for span in sorted(filter(_is_chat, spans), key=lambda s: (s.start_ns, s.end_ns, s.span_id)):
        model = span.attributes.get(attr.GEN_AI_REQUEST_MODEL) or span.attributes.get(
            attr.GEN_AI_RESPONSE_MODEL
        )
        if model:
            return model
    return ""


def _trace_root(spans: Sequence[SpanRecord]) -> SpanRecord:
    ids = {span.span_id for span in spans}
    parentless = [span for span in spans if not span.parent_span_id or span.parent_span_id not in ids]
    return min(parentless or spans, key=lambda s: (s.start_ns, -s.duration_ns, s.span_id))


def _new_run(root: SpanRecord, *, is_agent: bool) -> AgentRun:
    attrs = root.attributes
    return AgentRun(
        trace_id=root.trace_id,
        root_span_id=root.span_id,
        agent=_agent_name(root) if is_agent else (root.service_name or root.name),
        agent_id=attrs.get(attr.GEN_AI_AGENT_ID, ""),
        agent_version=attrs.get(attr.GEN_AI_AGENT_VERSION, ""),
        task=attrs.get(attr.AGENTTRAIL_TASK, ""),
        conversation_id=attrs.get(attr.GEN_AI_CONVERSATION_ID) or attrs.get(attr.SESSION_ID, ""),
        service_name=root.service_name,
        start_ns=root.start_ns,
        latency_s=root.duration_ns / 1e9,
        failure=_failed(root),
        error_type=_error_type(root),
        input=parse_json_value(attrs.get(attr.INPUT_VALUE)),
        output=parse_json_value(attrs.get(attr.OUTPUT_VALUE)),
        input_tokens=0,
        output_tokens=0,
        span_count=0,
    )
