"""Rebuilding runs and ordered tool calls from the spans of one trace."""

from __future__ import annotations

import json
from typing import Any

from otlp_builders import BASE_NS, SpanSpec, new_span_id, new_trace_id

from agenttrail.collector.trajectory import SpanEvent, SpanRecord, build_runs


def record(spec: SpanSpec, service: str = "svc") -> SpanRecord:
    attrs = {
        key: value if isinstance(value, str) else json.dumps(value) for key, value in spec.attributes.items()
    }
    events: tuple[SpanEvent, ...] = ()
    if spec.error:
        attrs["error.type"] = spec.error
        events = (SpanEvent("exception", 0, {"exception.type": spec.error}),)
    return SpanRecord(
        trace_id=spec.trace_id,
        span_id=spec.span_id,
        parent_span_id=spec.parent,
        name=spec.name,
        service_name=service,
        start_ns=BASE_NS + int(spec.start_ms * 1e6),
        duration_ns=int((spec.end_ms - spec.start_ms) * 1e6),
        status_code="Error" if spec.error else "Unset",
        status_message="",
        attributes=attrs,
        events=events,
    )


def agent(
    trace: str, span: str, start: float, end: float, name: str = "bot", parent: str = "", **attrs: Any
) -> SpanRecord:
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name, **attrs}
    return record(
        SpanSpec(trace, span, f"invoke_agent {name}", start, end, parent=parent, attributes=attributes)
    )


def tool(
    trace: str,
    span: str,
    parent: str,
    name: str,
    start: float,
    end: float,
    error: str | None = None,
    **args: Any,
) -> SpanRecord:
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.arguments": json.dumps(args),
        "gen_ai.tool.call.result": json.dumps({"ok": name}),
    }
    return record(
        SpanSpec(
            trace, span, f"execute_tool {name}", start, end, parent=parent, attributes=attributes, error=error
        )
    )


def test_calls_ordered_by_start_then_end_then_span_id() -> None:
    """Tool calls are ordered by start time; ties go to the earlier end, then the smaller span id."""
    trace, root = new_trace_id(), new_span_id()
    spans = [
        agent(trace, root, 0, 100),
        tool(trace, "00000000000000c2", root, "late", 50, 60),
        tool(trace, "00000000000000b2", root, "tie_long", 10, 30),
        tool(trace, "00000000000000b1", root, "tie_short", 10, 20),
        tool(trace, "00000000000000a2", root, "same_b", 5, 8),
        tool(trace, "00000000000000a1", root, "same_a", 5, 8),
    ]
    [run] = build_runs(list(reversed(spans)))
    assert [c.name for c in run.tool_calls] == ["same_a", "same_b", "tie_short", "tie_long", "late"]
    assert run.tool_calls[0].input == {}
    assert run.tool_calls[0].output == {"ok": "same_a"}


def test_nested_agent_calls_belong_to_top_run_and_are_tagged() -> None:
    """A sub-agent's calls are part of the containing run, tagged with the sub-agent's name."""
    trace, root, sub, middle = new_trace_id(), new_span_id(), new_span_id(), new_span_id()
    spans = [
        agent(trace, root, 0, 100, name="planner", **{"agenttrail.task": "refund"}),
        tool(trace, new_span_id(), root, "plan", 1, 2),
        record(SpanSpec(trace, middle, "some step", 3, 50, parent=root)),
        agent(trace, sub, 4, 40, name="worker", parent=middle),
        tool(trace, new_span_id(), sub, "work", 5, 6, x=1),
        tool(trace, new_span_id(), root, "finish", 60, 61),
    ]
    runs = build_runs(spans)
    assert len(runs) == 1
    run = runs[0]
    assert run.agent == "planner"
    assert run.task == "refund"
    assert [(c.name, c.agent) for c in run.tool_calls] == [
        ("plan", "planner"),
        ("work", "worker"),
        ("finish", "planner"),
    ]
    assert run.span_count == 6


def test_failed_tool_and_failed_run() -> None:
    """Errors set status/error type on the call and failure/error type on the run."""
    trace, root = new_trace_id(), new_span_id()
    spans = [
        record(
            SpanSpec(
                trace,
                root,
                "invoke_agent bot",
                0,
                10,
                attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "bot"},
                error="RuntimeError",
            )
        ),
        tool(trace, new_span_id(), root, "pay", 1, 2, error="PaymentError"),
    ]
    [run] = build_runs(spans)
    assert run.failure is True
    assert run.error_type == "RuntimeError"
    call = run.tool_calls[0]
    assert (call.status, call.error_type, call.output) == ("error", "PaymentError", None)


def test_trace_without_agent_span_is_one_run_from_its_root() -> None:
    """Tool calls with no agent span form one run rooted at the trace root, named by service."""
    trace, root = new_trace_id(), new_span_id()
    spans = [
        record(SpanSpec(trace, root, "POST /chat", 0, 20)),
        tool(trace, new_span_id(), root, "a", 1, 2),
        tool(trace, new_span_id(), root, "b", 3, 4),
    ]
    [run] = build_runs(spans)
    assert run.root_span_id == root
    assert run.agent == "svc"
    assert [c.name for c in run.tool_calls] == ["a", "b"]


def test_trace_without_tools_or_agents_has_no_run() -> None:
    """Plain HTTP spans make no trajectory."""
    trace = new_trace_id()
    assert build_runs([record(SpanSpec(trace, new_span_id(), "GET /", 0, 1))]) == []


def test_two_top_level_agents_make_two_runs() -> None:
    """Sibling agent spans under a server span are separate runs, each with its own calls."""
    trace, server, first, second = new_trace_id(), new_span_id(), new_span_id(), new_span_id()
    spans = [
        record(SpanSpec(trace, server, "POST /batch", 0, 100)),
        agent(trace, first, 1, 10, name="a", parent=server),
        tool(trace, new_span_id(), first, "x", 2, 3),
        agent(trace, second, 20, 30, name="b", parent=server),
        tool(trace, new_span_id(), second, "y", 21, 22),
    ]
    runs = build_runs(spans)
    assert [(r.agent, [c.name for c in r.tool_calls]) for r in runs] == [("a", ["x"]), ("b", ["y"])]


def test_openinference_spans() -> None:
    """OpenInference AGENT/TOOL spans with input.value/output.value and session.id are understood."""
    trace, root = new_trace_id(), new_span_id()
    spans = [
        record(
            SpanSpec(
                trace,
                root,
                "Agent",
                0,
                10,
                attributes={
                    "openinference.span.kind": "AGENT",
                    "session.id": "conv-1",
                    "input.value": '{"q": "hi"}',
                },
            )
        ),
        record(
            SpanSpec(
                trace,
                new_span_id(),
                "search",
                1,
                2,
                parent=root,
                attributes={
                    "openinference.span.kind": "TOOL",
                    "tool.name": "search",
                    "input.value": '{"query": "hi"}',
                    "output.value": "found",
                },
            )
        ),
    ]
    [run] = build_runs(spans)
    assert run.conversation_id == "conv-1"
    assert run.input == {"q": "hi"}
    assert [(c.name, c.input, c.output) for c in run.tool_calls] == [("search", {"query": "hi"}, "found")]


def test_tool_calls_from_chat_output_messages() -> None:
    """Tool calls that only appear as chat `tool_call` parts are included, with responses matched by id."""
    trace, root = new_trace_id(), new_span_id()
    output = [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "call_1", "name": "weather", "arguments": {"city": "Paris"}},
                {"type": "tool_call", "id": "call_2", "name": "time", "arguments": '{"tz": "CET"}'},
            ],
        }
    ]
    followup = [
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "sunny"}]}
    ]
    spans = [
        agent(trace, root, 0, 100),
        record(
            SpanSpec(
                trace,
                new_span_id(),
                "chat gpt",
                1,
                5,
                parent=root,
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.output.messages": json.dumps(output),
                    "gen_ai.usage.input_tokens": "10",
                    "gen_ai.usage.output_tokens": "3",
                },
            )
        ),
        record(
            SpanSpec(
                trace,
                new_span_id(),
                "chat gpt",
                10,
                15,
                parent=root,
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.input.messages": json.dumps(followup),
                    "gen_ai.usage.input_tokens": "20",
                    "gen_ai.usage.output_tokens": "4",
                },
            )
        ),
    ]
    [run] = build_runs(spans)
    assert [(c.name, c.input, c.output) for c in run.tool_calls] == [
        ("weather", {"city": "Paris"}, "sunny"),
        ("time", {"tz": "CET"}, None),
    ]
    assert (run.input_tokens, run.output_tokens) == (30, 7)


def test_chat_tool_call_with_matching_tool_span_is_not_counted_twice() -> None:
    """A chat tool_call part whose id has an execute_tool span is represented once."""
    trace, root = new_trace_id(), new_span_id()
    output = [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "search"}]}]
    tool_record = tool(trace, new_span_id(), root, "search", 6, 7)
    tool_record.attributes["gen_ai.tool.call.id"] = "c1"  # type: ignore[index]
    spans = [
        agent(trace, root, 0, 10),
        record(
            SpanSpec(
                trace,
                new_span_id(),
                "chat m",
                1,
                5,
                parent=root,
                attributes={"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps(output)},
            )
        ),
        tool_record,
    ]
    [run] = build_runs(spans)
    assert [c.name for c in run.tool_calls] == ["search"]


def test_duplicate_spans_and_judge_traces() -> None:
    """A span stored twice counts once; traces marked as agenttrail judge traffic make no run."""
    trace, root = new_trace_id(), new_span_id()
    call = tool(trace, new_span_id(), root, "a", 1, 2)
    [run] = build_runs([agent(trace, root, 0, 5), call, call])
    assert len(run.tool_calls) == 1
    judge = agent(new_trace_id(), new_span_id(), 0, 5, **{"agenttrail.judge": "true"})
    assert build_runs([judge]) == []


def test_orphan_tool_joins_the_only_run() -> None:
    """A tool whose parent never arrived is attached to the trace's single run."""
    trace, root = new_trace_id(), new_span_id()
    spans = [agent(trace, root, 0, 10), tool(trace, new_span_id(), new_span_id(), "lost", 1, 2)]
    [run] = build_runs(spans)
    assert [c.name for c in run.tool_calls] == ["lost"]


def chat(trace: str, span: str, parent: str, start: float, end: float, **attrs: Any) -> SpanRecord:
    attributes = {"gen_ai.operation.name": "chat", **attrs}
    return record(SpanSpec(trace, span, "chat", start, end, parent=parent, attributes=attributes))


def test_run_model_is_the_first_chat_spans_model() -> None:
    """The run's model is the earliest chat span's requested model, else its response model."""
    trace, root = new_trace_id(), new_span_id()
    spans = [
        agent(trace, root, 0, 100),
        chat(trace, new_span_id(), root, 30, 40, **{"gen_ai.request.model": "later-model"}),
        chat(trace, new_span_id(), root, 5, 10),
        chat(trace, new_span_id(), root, 10, 20, **{"gen_ai.response.model": "gpt-x-2026"}),
    ]
    [run] = build_runs(spans)
    assert run.model == "gpt-x-2026"
    [no_chat] = build_runs([agent(trace, root, 0, 100), tool(trace, new_span_id(), root, "a", 1, 2)])
    assert no_chat.model == ""
