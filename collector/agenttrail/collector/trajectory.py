"""Rebuild agent runs and their ordered tool calls from the spans of one trace. Pure, no I/O.

What each span means, whatever convention wrote it, is `conventions.read_span`'s business; this
module joins those facts into runs (spec/telemetry.md, "Spans the collector understands";
spec/metrics.md):
- a run is a top-level agent span (no agent span above it); nested agents' calls belong to
  the run that contains them, each call tagged with the agent that made it;
- the run is named by its root when the root names an agent by attribute, else by the agent spans
  that root wraps (a framework's `Agent workflow` around `refund_agent`); it failed when the root
  or one of those naming agents ended in error or recorded an exception; a nested sub-agent's
  error that its parent recovered from does not fail it;
- a trace with tool calls but no agent span is one run rooted at the trace's root span;
- spans under no run are attached to the run they overlap in time, else they form an orphan run
  keyed by the span they hang from; a run whose root span never arrived (its agent span never
  ended) is marked `incomplete`;
- a tool span is joined to the model's request for it by tool call id (placeholder ids such as
  `<not specified>` do not count), else by name in request order; the request's arguments win
  where the tool span's copy is lossy or missing; requests with no tool span become calls only in
  runs that have no tool spans at all (frameworks that trace only the model);
- calls are ordered by start time, then end time, then span id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agenttrail.collector.conventions import (
    SPAN_ATTRIBUTE_PREFIXES,
    SPAN_ATTRIBUTES,
    Requested,
    SpanFacts,
    merge_tools,
    parse_json_value,
    read_span,
    unwrap_arguments,
)
from agenttrail.collector.runs import NOT_CAPTURED, AgentRun, ToolCall, ToolDefinition
from agenttrail.instrumentation import attributes as attr

# The run model (NOT_CAPTURED, AgentRun, ToolCall, ToolDefinition) lives in runs.py; it is
# re-exported here, beside build_runs that makes it, for the tests that import it from here.
__all__ = [
    "NOT_CAPTURED",
    "STATUS_ERROR",
    "TRAJECTORY_ATTRIBUTES",
    "TRAJECTORY_ATTRIBUTE_PREFIXES",
    "AgentRun",
    "SpanEvent",
    "SpanRecord",
    "ToolCall",
    "ToolDefinition",
    "build_runs",
    "parse_json_value",
]

STATUS_ERROR = "Error"

# The span attributes trajectory building reads; assembly fetches only these (and keys that start
# with one of the prefixes) from storage.
TRAJECTORY_ATTRIBUTES = list(SPAN_ATTRIBUTES)
TRAJECTORY_ATTRIBUTE_PREFIXES = list(SPAN_ATTRIBUTE_PREFIXES)


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


def _order(span: SpanRecord) -> tuple[int, int, str]:
    return (span.start_ns, span.end_ns, span.span_id)


class _Trace:
    """One trace's spans with their facts and the parent links that arrived."""

    def __init__(self, spans: Sequence[SpanRecord]) -> None:
        self.by_id: dict[str, SpanRecord] = {}
        for span in spans:
            self.by_id.setdefault(span.span_id, span)  # replays may store a span twice
        self.spans = sorted(self.by_id.values(), key=_order)
        self.facts = {s.span_id: read_span(s.name, s.attributes, s.events) for s in self.spans}
        self.children: dict[str, list[SpanRecord]] = {}
        for span in self.spans:
            self.children.setdefault(span.parent_span_id, []).append(span)

    def role(self, span: SpanRecord) -> str:
        return self.facts[span.span_id].role

    def parent(self, span: SpanRecord) -> SpanRecord | None:
        return self.by_id.get(span.parent_span_id) if span.parent_span_id else None

    def ancestors(self, span: SpanRecord) -> list[SpanRecord]:
        """Parents that arrived, nearest first (cycles in bad data are cut)."""
        found: list[SpanRecord] = []
        seen = {span.span_id}
        current = self.parent(span)
        while current is not None and current.span_id not in seen:
            found.append(current)
            seen.add(current.span_id)
            current = self.parent(current)
        return found

    def nearest_agent(self, span: SpanRecord) -> SpanRecord | None:
        """The closest agent span at or above `span`."""
        for candidate in [span, *self.ancestors(span)]:
            if self.role(candidate) == "agent":
                return candidate
        return None

    def top_agent(self, span: SpanRecord) -> SpanRecord | None:
        agents = [s for s in [span, *self.ancestors(span)] if self.role(s) == "agent"]
        return agents[-1] if agents else None

    def hang_point(self, span: SpanRecord) -> tuple[str, bool]:
        """(key, dangling): the topmost arrived ancestor's id, or the missing parent it hangs from."""
        top = ([span, *self.ancestors(span)])[-1]
        if top.parent_span_id and top.parent_span_id not in self.by_id:
            return top.parent_span_id, True
        return top.span_id, False

    def naming_agents(self, root: SpanRecord) -> list[SpanRecord]:
        """The agent spans that name the run: the root if an attribute names it, else the agent
        spans below it that an attribute names (the nearest ones, through unnamed wrappers), else
        the root (named by its span name)."""
        if self.facts[root.span_id].named_by_attribute:
            return [root]
        found: list[SpanRecord] = []
        stack = list(self.children.get(root.span_id, ()))
        while stack:
            span = stack.pop()
            if self.role(span) == "agent" and self.facts[span.span_id].named_by_attribute:
                found.append(span)
            else:
                stack.extend(self.children.get(span.span_id, ()))
        return sorted(found, key=_order) or [root]


def build_runs(spans: Sequence[SpanRecord]) -> list[AgentRun]:
    """All top-level agent runs of one trace, each with its ordered tool calls."""
    trace = _Trace(spans)
    if not trace.spans or any(s.attributes.get(attr.AGENTTRAIL_JUDGE) == "true" for s in trace.spans):
        return []
    content = [s for s in trace.spans if trace.role(s) in ("tool", "model")]
    roots = [s for s in trace.spans if trace.role(s) == "agent" and trace.top_agent(s) is s]
    members: dict[str, list[SpanRecord]] = {}
    runs: dict[str, AgentRun] = {}
    if not roots:
        if not any(trace.role(s) == "tool" or trace.facts[s.span_id].requested for s in content):
            return []
        root = _trace_root(trace.spans)
        key, dangling = trace.hang_point(root)
        run = _new_run(trace, root, [root], is_agent=False)
        if dangling:
            _make_orphan(run, key, trace.spans)
        runs[run.root_span_id] = run
        members[run.root_span_id] = list(trace.spans)
    else:
        for root in roots:
            runs[root.span_id] = _new_run(trace, root, trace.naming_agents(root), is_agent=True)
            members[root.span_id] = []
        unowned: list[SpanRecord] = []
        for span in trace.spans:
            owner = trace.top_agent(span)
            if owner is not None:
                members[owner.span_id].append(span)
            else:
                unowned.append(span)
        _place_unowned(trace, unowned, runs, members)

    for key, run in runs.items():
        _fill_run(trace, run, members[key])
    return sorted(runs.values(), key=lambda r: (r.start_ns, r.root_span_id))


def _overlap(span: SpanRecord, run: AgentRun) -> int:
    run_end = run.start_ns + int(run.latency_s * 1e9)
    return min(span.end_ns, run_end) - max(span.start_ns, run.start_ns)


def _place_unowned(
    trace: _Trace, unowned: list[SpanRecord], runs: dict[str, AgentRun], members: dict[str, list[SpanRecord]]
) -> None:
    """Spans under no agent: into the run they overlap most in time; else, when their group
    (the span they hang from) holds tool or model spans, into an orphan run of that group."""
    single = next(iter(runs)) if len(runs) == 1 else None
    groups: dict[str, list[SpanRecord]] = {}
    dangling: dict[str, bool] = {}
    for span in unowned:
        overlap, best = max((_overlap(span, run), key) for key, run in runs.items())
        # A span that wraps several runs (a server span) overlaps them all; it goes to one.
        if overlap >= 0:
            members[best].append(span)
            continue
        key, hanging = trace.hang_point(span)
        groups.setdefault(key, []).append(span)
        dangling[key] = hanging
    for key, group in groups.items():
        if single is not None and not dangling[key]:
            members[single].extend(group)  # under a root of its own: the trace's only run
            continue
        if not any(trace.role(s) != "other" for s in group):
            if single is not None:
                members[single].extend(group)
            continue  # nothing of a trajectory in it: stored, but no run of its own
        first = min(group, key=_order)
        run = _new_run(trace, first, [first], is_agent=False)
        _make_orphan(run, key, group)
        runs[key] = run
        members[key] = group


def _make_orphan(run: AgentRun, key: str, group: Sequence[SpanRecord]) -> None:
    """A run whose root never arrived: keyed by the missing span, spanning its spans' times, and
    failed when the last of its top-level spans to end failed (the error left the run)."""
    start = min(s.start_ns for s in group)
    end = max(s.end_ns for s in group)
    tops = [s for s in group if s.parent_span_id == key] or list(group)
    last = max(tops, key=lambda s: (s.end_ns, s.start_ns, s.span_id))
    run.root_span_id = key
    run.start_ns = start
    run.latency_s = (end - start) / 1e9
    run.incomplete = True
    run.failure = _failed(last)
    run.error_type = _error_type(last)


def _fill_run(trace: _Trace, run: AgentRun, run_spans: list[SpanRecord]) -> None:
    run.span_count = len(run_spans)
    run_spans = sorted(run_spans, key=_order)
    in_run = {s.span_id for s in run_spans}
    tools: list[ToolDefinition] = []
    model_spans: list[SpanRecord] = []
    for span in run_spans:
        facts = trace.facts[span.span_id]
        tools.extend(facts.tools)
        if facts.role != "model":
            continue
        model_spans.append(span)
        if any(a.span_id in in_run and trace.role(a) == "model" for a in trace.ancestors(span)):
            continue  # a model span inside another (a framework's and a client library's): count once
        run.input_tokens += facts.input_tokens
        run.output_tokens += facts.output_tokens
        if not run.model and facts.model:
            run.model = facts.model
    run.available_tools = merge_tools(tools)

    requests = [
        (span, request)
        for span in sorted(model_spans, key=lambda s: (s.end_ns, s.start_ns, s.span_id))
        for request in trace.facts[span.span_id].requested
    ]
    results: dict[str, Any] = {}
    for span in model_spans:
        results.update(trace.facts[span.span_id].results_by_id)
    claimed: set[int] = set()
    calls: list[ToolCall] = []
    tool_spans = [s for s in run_spans if trace.role(s) == "tool"]
    for span in tool_spans:
        facts = trace.facts[span.span_id]
        index = _find_request(span, facts, requests, claimed)
        request = requests[index][1] if index is not None else None
        calls.append(_tool_call(trace, run, span, facts, request, results))
    if not tool_spans:
        for span, request in requests:
            calls.append(_requested_call(trace, run, span, request, results))
    calls.sort(key=lambda c: (c.start_ns, c.end_ns, c.span_id))
    run.tool_calls = calls


def _find_request(
    span: SpanRecord,
    facts: SpanFacts,
    requests: list[tuple[SpanRecord, Requested]],
    claimed: set[int],
) -> int | None:
    """The model request this tool span executed: same call id, else the earliest unclaimed
    request of the same tool that the model made before the tool started."""
    found = None
    if facts.call_id:
        found = next(
            (i for i, (_, r) in enumerate(requests) if i not in claimed and r.call_id == facts.call_id), None
        )
    if found is None:
        found = next(
            (
                i
                for i, (model, r) in enumerate(requests)
                if i not in claimed
                and r.name == facts.tool_name
                and model.start_ns <= span.start_ns
                and (not facts.call_id or not r.call_id)
            ),
            None,
        )
    if found is not None:
        claimed.add(found)
    return found


def _agent_of(trace: _Trace, run: AgentRun, span: SpanRecord) -> str:
    agent = trace.nearest_agent(span)
    if agent is None or not trace.facts[agent.span_id].named_by_attribute:
        return run.agent
    return trace.facts[agent.span_id].agent_name


def _tool_call(
    trace: _Trace,
    run: AgentRun,
    span: SpanRecord,
    facts: SpanFacts,
    request: Requested | None,
    results: dict[str, Any],
) -> ToolCall:
    arguments = facts.arguments
    if facts.arguments_lossy and request is not None and request.arguments is not NOT_CAPTURED:
        arguments = unwrap_arguments(request.arguments)[0]
    call_id = facts.call_id or (request.call_id if request is not None else "")
    failed = _failed(span)
    output: Any = facts.result
    if failed:
        output = None
    elif output is NOT_CAPTURED and call_id in results:
        output = results[call_id]
    return ToolCall(
        name=facts.tool_name,
        input=arguments,
        output=output,
        status="error" if failed else "ok",
        error_type=_error_type(span),
        latency_ms=span.duration_ns / 1e6,
        span_id=span.span_id,
        agent=_agent_of(trace, run, span),
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        call_id=call_id,
    )


def _requested_call(
    trace: _Trace, run: AgentRun, span: SpanRecord, request: Requested, results: dict[str, Any]
) -> ToolCall:
    """A call known only from the model's request (no tool span in the run)."""
    return ToolCall(
        name=request.name,
        input=request.arguments,
        output=results.get(request.call_id, NOT_CAPTURED) if request.call_id else NOT_CAPTURED,
        status="ok",
        error_type="",
        latency_ms=0.0,
        span_id=span.span_id,
        agent=_agent_of(trace, run, span),
        # After the model span that asked for it, in the order it was asked.
        start_ns=span.end_ns,
        end_ns=span.end_ns,
        call_id=request.call_id,
    )


def _trace_root(spans: Sequence[SpanRecord]) -> SpanRecord:
    ids = {span.span_id for span in spans}
    parentless = [span for span in spans if not span.parent_span_id or span.parent_span_id not in ids]
    return min(parentless or spans, key=lambda s: (s.start_ns, -s.duration_ns, s.span_id))


def _new_run(trace: _Trace, root: SpanRecord, naming: list[SpanRecord], *, is_agent: bool) -> AgentRun:
    attrs = root.attributes
    root_facts = trace.facts[root.span_id]
    named = trace.facts[naming[0].span_id]
    failed = [s for s in [root, *naming] if _failed(s)] if is_agent else ([root] if _failed(root) else [])
    return AgentRun(
        trace_id=root.trace_id,
        root_span_id=root.span_id,
        agent=named.agent_name if is_agent else (root.service_name or root.name),
        agent_id=attrs.get(attr.GEN_AI_AGENT_ID) or naming[0].attributes.get(attr.GEN_AI_AGENT_ID, ""),
        agent_version=attrs.get(attr.GEN_AI_AGENT_VERSION, ""),
        task=attrs.get(attr.AGENTTRAIL_TASK) or naming[0].attributes.get(attr.AGENTTRAIL_TASK, ""),
        conversation_id=root_facts.conversation_id or named.conversation_id,
        service_name=root.service_name,
        start_ns=root.start_ns,
        latency_s=root.duration_ns / 1e9,
        failure=bool(failed),
        error_type=_error_type(failed[0]) if failed else "",
        input=root_facts.input if root_facts.input is not None else named.input,
        output=root_facts.output if root_facts.output is not None else named.output,
        input_tokens=0,
        output_tokens=0,
        span_count=0,
    )
