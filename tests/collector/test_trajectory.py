"""Rebuilding runs and ordered tool calls from the spans of one trace."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from otlp_builders import BASE_NS, SpanSpec, new_span_id, new_trace_id

from agenttrail.collector.trajectory import NOT_CAPTURED, SpanEvent, SpanRecord, build_runs


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
        ("time", {"tz": "CET"}, NOT_CAPTURED),  # no response recorded for it
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


# -- each convention, with hand-built spans shaped as the frameworks send them ----------------


def span(
    trace: str,
    name: str,
    start: float,
    end: float,
    parent: str = "",
    *,
    span_id: str | None = None,
    status: str = "Unset",
    events: tuple[SpanEvent, ...] = (),
    **attrs: Any,
) -> SpanRecord:
    """A stored span with the given attributes (dots in keys written as `__`)."""
    return SpanRecord(
        trace_id=trace,
        span_id=span_id or new_span_id(),
        parent_span_id=parent,
        name=name,
        service_name="svc",
        start_ns=BASE_NS + int(start * 1e6),
        duration_ns=int((end - start) * 1e6),
        status_code=status,
        status_message="",
        attributes={key.replace("__", "."): str(value) for key, value in attrs.items()},
        events=events,
    )


def oi_requests(*calls: tuple[str, str, str]) -> dict[str, str]:
    """OpenInference's flattened tool-call requests on an LLM span: (id, name, arguments JSON)."""
    attrs: dict[str, str] = {}
    for j, (call_id, name, arguments) in enumerate(calls):
        prefix = f"llm__output_messages__0__message__tool_calls__{j}__tool_call__"
        attrs[prefix + "id"] = call_id
        attrs[prefix + "function__name"] = name
        attrs[prefix + "function__arguments"] = arguments
    return attrs


def test_openinference_workflow_wrapper_named_and_failed_by_the_agent_inside() -> None:
    """OpenAI Agents SDK shape: an unnamed `Agent workflow` AGENT wraps the named agent; the run
    takes the inner agent.name, fails when that agent ends in error although the wrapper stays OK,
    and counts OpenInference token attributes."""
    trace, root, chain, inner, turn = (
        new_trace_id(),
        new_span_id(),
        new_span_id(),
        new_span_id(),
        new_span_id(),
    )
    spans = [
        span(trace, "Agent workflow", 0, 100, span_id=root, status="Ok", openinference__span__kind="AGENT"),
        span(trace, "Agent workflow", 0, 100, root, span_id=chain, openinference__span__kind="CHAIN"),
        span(
            trace,
            "refund_agent",
            1,
            99,
            chain,
            span_id=inner,
            status="Error",
            openinference__span__kind="AGENT",
            agent__name="refund_agent",
        ),
        span(trace, "turn", 2, 50, inner, span_id=turn, openinference__span__kind="CHAIN"),
        span(
            trace,
            "generation",
            3,
            10,
            turn,
            openinference__span__kind="LLM",
            llm__token_count__prompt=29,
            llm__token_count__completion=6,
            **oi_requests(("call_c1", "search_books", '{"query": "lamps"}')),
        ),
        span(
            trace,
            "search_books",
            11,
            12,
            turn,
            openinference__span__kind="TOOL",
            tool__name="search_books",
            input__value='{"query": "lamps"}',
        ),
        span(trace, "generation", 60, 98, inner, status="Error", openinference__span__kind="LLM"),
    ]
    [run] = build_runs(spans)
    assert (run.agent, run.failure, run.root_span_id) == ("refund_agent", True, root)
    assert (run.input_tokens, run.output_tokens) == (29, 6)
    assert [(c.name, c.input, c.agent, c.call_id) for c in run.tool_calls] == [
        ("search_books", {"query": "lamps"}, "refund_agent", "call_c1")
    ]


def test_sub_agent_error_recovered_by_its_parent_does_not_fail_the_run() -> None:
    """A nested named agent that ended in error, inside a parent that finished OK: run not failed."""
    trace, root, sub = new_trace_id(), new_span_id(), new_span_id()
    spans = [
        agent(trace, root, 0, 100, name="planner"),
        record(
            SpanSpec(
                trace,
                sub,
                "invoke_agent worker",
                5,
                20,
                parent=root,
                attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "worker"},
                error="TimeoutError",
            )
        ),
        tool(trace, new_span_id(), root, "fallback", 30, 31),
    ]
    [run] = build_runs(spans)
    assert (run.agent, run.failure, run.error_type) == ("planner", False, "")


def test_lossy_tool_input_takes_the_models_request_by_call_id_or_name() -> None:
    """LangGraph shape: OpenInference unwraps a one-argument input to `books`; the LLM span's request
    (linked by call id, else by name in order) gives the real arguments; tokens are read too."""
    trace, root, tools = new_trace_id(), new_span_id(), new_span_id()
    spans = [
        span(trace, "refund_agent", 0, 100, span_id=root, openinference__span__kind="AGENT"),
        span(trace, "agent", 1, 10, root, openinference__span__kind="AGENT"),
        span(
            trace,
            "ChatOpenAI",
            2,
            9,
            root,
            openinference__span__kind="LLM",
            llm__token_count__prompt=11,
            llm__token_count__completion=3,
            **oi_requests(
                ("call_a1", "search_books", '{"query": "books"}'), ("call_a2", "lookup", '{"id": 7}')
            ),
        ),
        span(trace, "tools", 11, 30, root, span_id=tools, openinference__span__kind="CHAIN"),
        span(
            trace,
            "search_books",
            12,
            13,
            tools,
            openinference__span__kind="TOOL",
            tool__name="search_books",
            input__value="books",
            tool_call__id="call_a1",
        ),
        span(
            trace,
            "lookup",
            14,
            15,
            tools,
            openinference__span__kind="TOOL",
            tool__name="lookup",
            input__value="7",
        ),
    ]
    [run] = build_runs(spans)
    assert run.agent == "refund_agent"  # unnamed nested AGENT nodes do not rename the run
    assert [(c.name, c.input, c.call_id) for c in run.tool_calls] == [
        ("search_books", {"query": "books"}, "call_a1"),
        ("lookup", {"id": 7}, "call_a2"),
    ]
    assert (run.input_tokens, run.output_tokens) == (11, 3)


def test_arguments_and_result_from_earlier_semconv_events() -> None:
    """Strands' default shape: arguments in a `gen_ai.tool.message` event, the result in `gen_ai.choice`,
    parameters schema in `gen_ai.tool.json_schema`, description in `gen_ai.tool.description`."""
    trace, root = new_trace_id(), new_span_id()
    events = (
        SpanEvent(
            "gen_ai.tool.message", 0, {"role": "tool", "content": '{"query": "books"}', "id": "call_a1"}
        ),
        SpanEvent("gen_ai.choice", 0, {"message": '[{"text": "3 books"}]', "id": "call_a1"}),
    )
    schema = {"type": "object", "properties": {"query": {"type": "string"}}}
    spans = [
        agent(trace, root, 0, 100, name="refund_agent"),
        span(
            trace,
            "execute_tool search_books",
            5,
            6,
            root,
            events=events,
            gen_ai__operation__name="execute_tool",
            gen_ai__tool__name="search_books",
            gen_ai__tool__call__id="call_a1",
            gen_ai__tool__description="Search the book catalogue.",
            gen_ai__tool__json_schema=json.dumps(schema),
        ),
    ]
    [run] = build_runs(spans)
    [call] = run.tool_calls
    assert (call.input, call.output, call.call_id) == ({"query": "books"}, [{"text": "3 books"}], "call_a1")
    assert [t.to_json() for t in run.available_tools] == [
        {"name": "search_books", "description": "Search the book catalogue.", "parameters": schema}
    ]


def adk_spans(trace: str, root: str, *, content: bool) -> list[SpanRecord]:
    """Google ADK's shape: `generate_content` model spans; a failed tool span whose call id is the
    placeholder `<not specified>` while the model asked for `call_b1`."""
    output = [{"role": "assistant", "parts": [{"type": "tool_call", "id": "call_b1", "name": "charge_card"}]}]
    if content:
        output[0]["parts"][0]["arguments"] = {"card": "4242"}  # type: ignore[index]
    model_attrs: dict[str, Any] = {
        "gen_ai__operation__name": "generate_content",
        "gen_ai__usage__input_tokens": 19,
        "gen_ai__usage__output_tokens": 2,
    }
    if content:
        model_attrs["gen_ai__output__messages"] = json.dumps(output)
    tool_attrs: dict[str, Any] = {
        "gen_ai__operation__name": "execute_tool",
        "gen_ai__tool__name": "charge_card",
        "gen_ai__tool__call__id": "<not specified>",
    }
    return [
        span(
            trace,
            "invoke_agent refund_agent",
            0,
            100,
            span_id=root,
            gen_ai__operation__name="invoke_agent",
            gen_ai__agent__name="refund_agent",
        ),
        span(trace, "generate_content agent-model", 1, 10, root, **model_attrs),
        span(trace, "execute_tool charge_card", 11, 12, root, status="Error", **tool_attrs),
        span(
            trace,
            "generate_content agent-model",
            13,
            20,
            root,
            gen_ai__operation__name="generate_content",
            gen_ai__usage__input_tokens=23,
            gen_ai__usage__output_tokens=4,
        ),
    ]


def test_placeholder_call_id_never_counts_a_call_twice() -> None:
    """ADK with content capture: the tool span with `<not specified>` joins the request by name, so the
    call appears once, with the model's arguments and id; `generate_content` spans give the tokens."""
    trace, root = new_trace_id(), new_span_id()
    [run] = build_runs(adk_spans(trace, root, content=True))
    assert [(c.name, c.input, c.status, c.call_id) for c in run.tool_calls] == [
        ("charge_card", {"card": "4242"}, "error", "call_b1")
    ]
    assert (run.input_tokens, run.output_tokens) == (42, 6)


def test_arguments_not_captured_are_said_so() -> None:
    """ADK without content capture: the call's arguments are NOT_CAPTURED, stored as
    `input_captured: false`, never as `{}`."""
    trace, root = new_trace_id(), new_span_id()
    [run] = build_runs(adk_spans(trace, root, content=False))
    [call] = run.tool_calls
    assert call.input is NOT_CAPTURED
    stored = call.to_json()
    assert (stored["input"], stored["input_captured"]) == (None, False)
    [empty] = build_runs([agent(trace, root, 0, 10), tool(trace, new_span_id(), root, "noargs", 1, 2)])
    assert (empty.tool_calls[0].input, empty.tool_calls[0].to_json()["input_captured"]) == ({}, True)


def smol_tool(trace: str, parent: str, name: str, start: float, end: float, **kwargs: Any) -> SpanRecord:
    wrapped = {"args": [], "sanitize_inputs_outputs": True, "kwargs": kwargs}
    return span(
        trace,
        name,
        start,
        end,
        parent,
        openinference__span__kind="TOOL",
        tool__name=name,
        input__value=json.dumps(wrapped),
    )


def test_wrapped_arguments_unwrapped_and_unended_agent_span_kept_as_incomplete_run() -> None:
    """smolagents' shape: arguments wrapped in args/kwargs are unwrapped; a run that raised never ended
    its AGENT span, so its spans hang from a span that never arrives and the next run in the same
    trace is that span's child: the failed run is kept as an incomplete, failed orphan run."""
    trace, lost, second = new_trace_id(), new_span_id(), new_span_id()
    spans = [
        span(
            trace,
            "LLM",
            1,
            5,
            lost,
            openinference__span__kind="LLM",
            llm__token_count__prompt=29,
            llm__token_count__completion=6,
        ),
        smol_tool(trace, lost, "search_books", 6, 7, query="lamps"),
        span(trace, "LLM", 8, 9, lost, status="Error", openinference__span__kind="LLM"),
        span(
            trace,
            "refund_agent.run",
            20,
            40,
            lost,
            span_id=second,
            openinference__span__kind="AGENT",
            agent__name="refund_agent",
        ),
        smol_tool(trace, second, "refund", 21, 22, order_id="A1", amount=12.5),
    ]
    failed, ok = build_runs(spans)
    assert (failed.root_span_id, failed.incomplete, failed.failure) == (lost, True, True)
    assert [(c.name, c.input) for c in failed.tool_calls] == [("search_books", {"query": "lamps"})]
    assert (failed.input_tokens, failed.output_tokens, failed.span_count) == (29, 6, 3)
    assert (ok.agent, ok.incomplete, ok.failure) == ("refund_agent", False, False)
    assert [(c.name, c.input) for c in ok.tool_calls] == [("refund", {"order_id": "A1", "amount": 12.5})]


def test_span_under_no_run_joins_the_run_it_overlaps() -> None:
    """A tool span hanging from a server span (not from an agent) joins the run it overlaps in time."""
    trace, server, first, second = new_trace_id(), new_span_id(), new_span_id(), new_span_id()
    spans = [
        record(SpanSpec(trace, server, "POST /batch", 0, 100)),
        agent(trace, first, 1, 10, name="a", parent=server),
        agent(trace, second, 20, 30, name="b", parent=server),
        tool(trace, new_span_id(), server, "stray", 25, 26),
    ]
    runs = build_runs(spans)
    assert [(r.agent, [c.name for c in r.tool_calls]) for r in runs] == [("a", []), ("b", ["stray"])]
    assert sum(r.span_count for r in runs) == 4  # the server span is counted in one run too


def test_traceloop_spans() -> None:
    """OpenLLMetry: workflow/agent/tool kinds, entity names, `{"args", "kwargs"}` inputs unwrapped,
    model spans marked by `llm.request.type` with the earlier token attribute names."""
    trace, root, inner = new_trace_id(), new_span_id(), new_span_id()
    spans = [
        span(
            trace,
            "shop.workflow",
            0,
            100,
            span_id=root,
            traceloop__span__kind="workflow",
            traceloop__entity__name="shop",
        ),
        span(
            trace,
            "refund_agent.agent",
            1,
            99,
            root,
            span_id=inner,
            traceloop__span__kind="agent",
            traceloop__entity__name="refund_agent",
        ),
        span(
            trace,
            "openai.chat",
            2,
            5,
            inner,
            llm__request__type="chat",
            gen_ai__usage__prompt_tokens=11,
            gen_ai__usage__completion_tokens=3,
            gen_ai__request__model="agent-model",
        ),
        span(
            trace,
            "refund.tool",
            6,
            7,
            inner,
            traceloop__span__kind="tool",
            traceloop__entity__name="refund",
            traceloop__entity__input=json.dumps({"args": [], "kwargs": {"order_id": "A1", "amount": 12.5}}),
            traceloop__entity__output=json.dumps("refunded"),
        ),
    ]
    [run] = build_runs(spans)
    assert (run.agent, run.model, run.input_tokens, run.output_tokens) == (
        "refund_agent",
        "agent-model",
        11,
        3,
    )
    assert [(c.name, c.input, c.output, c.agent) for c in run.tool_calls] == [
        ("refund", {"order_id": "A1", "amount": 12.5}, "refunded", "refund_agent")
    ]


def test_available_tools_from_definitions_descriptions_and_openinference() -> None:
    """Tool definitions on agent/model spans (`gen_ai.tool.definitions`, `llm.tools.*`) and
    descriptions on tool spans merge into one entry per tool."""
    trace, root = new_trace_id(), new_span_id()
    definitions = [
        {
            "type": "function",
            "name": "search",
            "description": "Find things.",
            "parameters": {"type": "object"},
        }
    ]
    oi_tool = {
        "type": "function",
        "function": {
            "name": "refund",
            "description": "Give money back.",
            "parameters": {"type": "object", "required": ["id"]},
        },
    }
    spans = [
        agent(trace, root, 0, 100, **{"gen_ai.tool.definitions": json.dumps(definitions)}),
        span(
            trace,
            "llm",
            1,
            2,
            root,
            openinference__span__kind="LLM",
            llm__tools__0__tool__json_schema=json.dumps(oi_tool),
        ),
        span(
            trace,
            "execute_tool notify",
            3,
            4,
            root,
            gen_ai__operation__name="execute_tool",
            gen_ai__tool__name="notify",
            gen_ai__tool__description="Tell the user.",
        ),
    ]
    [run] = build_runs(spans)
    assert [t.to_json() for t in run.available_tools] == [
        {"name": "search", "description": "Find things.", "parameters": {"type": "object"}},
        {
            "name": "refund",
            "description": "Give money back.",
            "parameters": {"type": "object", "required": ["id"]},
        },
        {"name": "notify", "description": "Tell the user.", "parameters": None},
    ]


def test_nested_model_spans_count_tokens_once() -> None:
    """A framework's model span around a client library's model span: tokens counted once."""
    trace, root, outer = new_trace_id(), new_span_id(), new_span_id()
    usage = {"gen_ai__usage__input_tokens": 10, "gen_ai__usage__output_tokens": 2}
    spans = [
        agent(trace, root, 0, 100),
        span(trace, "chat m", 1, 10, root, span_id=outer, gen_ai__operation__name="chat", **usage),
        span(trace, "openai.chat", 2, 9, outer, llm__request__type="chat", **usage),
        tool(trace, new_span_id(), root, "a", 11, 12),
    ]
    [run] = build_runs(spans)
    assert (run.input_tokens, run.output_tokens) == (10, 2)


def test_openinference_agent_named_after_the_wrapped_method() -> None:
    """An OpenInference AGENT span without agent.name, named `refund_agent.run`: run `refund_agent`."""
    trace, root = new_trace_id(), new_span_id()
    spans = [
        span(trace, "refund_agent.run", 0, 10, span_id=root, openinference__span__kind="AGENT"),
        span(
            trace,
            "lookup",
            1,
            2,
            root,
            openinference__span__kind="TOOL",
            tool__name="lookup",
            input__value="{}",
        ),
    ]
    [run] = build_runs(spans)
    assert run.agent == "refund_agent"


# -- properties -----------------------------------------------------------------------------


@st.composite
def trace_spans(draw: st.DrawFn) -> list[SpanRecord]:
    """One trace's spans: agents (top-level, nested, or under a span that never arrived), tools and
    model calls under any of them or under nothing, on a coarse clock so that ties are common."""
    trace = "ab" * 16
    parents = ["", "ffffffffffffffff"]  # none, and one that never arrived
    spans = []
    for i in range(draw(st.integers(min_value=0, max_value=3))):
        span_id = f"{i + 1:016x}"
        start = draw(st.integers(min_value=0, max_value=10))
        end = start + draw(st.integers(min_value=0, max_value=20))
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": draw(st.sampled_from("PW")),
        }
        spans.append(
            record(
                SpanSpec(
                    trace, span_id, "invoke_agent", start, end,
                    parent=draw(st.sampled_from(parents)), attributes=attributes,
                    error=draw(st.sampled_from([None, None, "AgentError"])),
                )
            )
        )  # fmt: skip
        parents.append(span_id)
    for j in range(draw(st.integers(min_value=0, max_value=6))):
        span_id = f"{0x100 + j:016x}"
        start = draw(st.integers(min_value=0, max_value=10))
        end = start + draw(st.integers(min_value=0, max_value=5))
        parent = draw(st.sampled_from(parents))
        if draw(st.booleans()):
            name = draw(st.sampled_from(["lookup", "refund"]))
            error = draw(st.sampled_from([None, None, "ToolError"]))
            spans.append(tool(trace, span_id, parent, name, start, end, error=error, n=j))
        else:
            spans.append(chat(trace, span_id, parent, start, end, **{"gen_ai.request.model": f"m{j}"}))
    return spans


@settings(max_examples=150)
@given(spans=trace_spans(), data=st.data())
def test_the_order_spans_arrive_in_does_not_change_the_runs(
    spans: list[SpanRecord], data: st.DataObject
) -> None:
    """build_runs gives the same runs, calls and call order for any order of the same spans."""
    shuffled = data.draw(st.permutations(spans))
    assert build_runs(shuffled) == build_runs(spans)
