"""@agent and @tool: the spans they emit, how they nest, fail, and never break the function."""

import asyncio
import json
import logging
import traceback
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind, StatusCode

from agenttrail.instrumentation import _decorators, agent, set_conversation_id, set_output, set_task, tool
from agenttrail.instrumentation import attributes as attr
from agenttrail.instrumentation._state import STATE
from agenttrail.instrumentation.testing import CapturedSpans, capture_spans


class RefundDeclinedError(Exception):
    """A user exception that must come back out of the wrappers unchanged."""


@tool
def search(query: str, limit: int = 3) -> list[str]:
    """Search the knowledge base.

    Longer explanation that is not part of the description.
    """
    return [query] * min(limit, 2)


@tool(name="kb_fetch", description="Fetch one article", capture=True)
async def fetch(article_id: int) -> dict[str, Any]:
    await asyncio.sleep(0)
    return {"id": article_id, "title": "Refunds"}


@tool
def refund(order_id: int) -> None:
    raise RefundDeclinedError(f"order {order_id} declined")


@agent(task="refund", version="1.2", agent_id="agent-7", description="Handles refunds")
def support(question: str) -> str:
    search(question)
    return "done"


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id_hex(span: ReadableSpan) -> str:
    return format(span_id(span), "016x")


def test_tool_span_has_exactly_the_spec_attributes(captured: CapturedSpans) -> None:
    """A sync @tool call emits `execute_tool {name}` INTERNAL with the GenAI + OpenInference attributes."""
    assert search("refund policy") == ["refund policy", "refund policy"]
    span = captured.one("execute_tool search")
    args = '{"query":"refund policy"}'
    result = '["refund policy","refund policy"]'
    assert span.kind is SpanKind.INTERNAL
    assert dict(span.attributes or {}) == {
        attr.GEN_AI_OPERATION_NAME: "execute_tool",
        attr.GEN_AI_TOOL_NAME: "search",
        attr.GEN_AI_TOOL_TYPE: "function",
        attr.GEN_AI_TOOL_DESCRIPTION: "Search the knowledge base.",
        attr.GEN_AI_TOOL_CALL_ID: span_id_hex(span),
        attr.GEN_AI_TOOL_CALL_ARGUMENTS: args,
        attr.GEN_AI_TOOL_CALL_RESULT: result,
        attr.OPENINFERENCE_SPAN_KIND: "TOOL",
        attr.TOOL_NAME: "search",
        attr.INPUT_VALUE: args,
        attr.OUTPUT_VALUE: result,
    }
    assert span.status.status_code is StatusCode.UNSET


def test_async_tool_with_name_and_description(captured: CapturedSpans) -> None:
    """An async @tool(name=, description=) is awaited inside its span and records its result."""
    assert asyncio.run(fetch(7)) == {"id": 7, "title": "Refunds"}
    attributes = captured.one("execute_tool kb_fetch").attributes or {}
    assert attributes[attr.GEN_AI_TOOL_NAME] == attributes[attr.TOOL_NAME] == "kb_fetch"
    assert attributes[attr.GEN_AI_TOOL_DESCRIPTION] == "Fetch one article"
    assert attributes[attr.GEN_AI_TOOL_CALL_ARGUMENTS] == '{"article_id":7}'
    assert json.loads(str(attributes[attr.GEN_AI_TOOL_CALL_RESULT])) == {"id": 7, "title": "Refunds"}


def test_agent_span_has_exactly_the_spec_attributes(captured: CapturedSpans) -> None:
    """@agent(...) emits `invoke_agent {name}` with its static attributes, JSON input and output."""
    assert support("where is my refund?") == "done"
    span = captured.one("invoke_agent support")
    assert span.kind is SpanKind.INTERNAL
    assert dict(span.attributes or {}) == {
        attr.GEN_AI_OPERATION_NAME: "invoke_agent",
        attr.GEN_AI_AGENT_NAME: "support",
        attr.GEN_AI_AGENT_ID: "agent-7",
        attr.GEN_AI_AGENT_VERSION: "1.2",
        attr.GEN_AI_AGENT_DESCRIPTION: "Handles refunds",
        attr.AGENTTRAIL_TASK: "refund",
        attr.OPENINFERENCE_SPAN_KIND: "AGENT",
        attr.INPUT_VALUE: '{"question":"where is my refund?"}',
        attr.INPUT_MIME_TYPE: "application/json",
        attr.OUTPUT_VALUE: '"done"',
        attr.OUTPUT_MIME_TYPE: "application/json",
    }


def test_bare_agent_defaults_to_function_name(captured: CapturedSpans) -> None:
    """Bare @agent names the agent after the function and sets no optional attributes."""

    @agent
    def planner() -> None:
        return None

    planner()
    attributes = captured.one("invoke_agent planner").attributes or {}
    assert attributes[attr.GEN_AI_AGENT_NAME] == "planner"
    assert attributes[attr.OUTPUT_VALUE] == "null"
    for absent in (attr.GEN_AI_AGENT_ID, attr.GEN_AI_CONVERSATION_ID, attr.SESSION_ID, attr.AGENTTRAIL_TASK):
        assert absent not in attributes


def test_tool_nests_under_agent_and_agent_under_agent(captured: CapturedSpans) -> None:
    """Spans are parented as the calls nest: tool under its agent, sub-agent under its caller."""

    @agent
    def outer() -> str:
        return support("q")

    outer()
    outer_span = captured.one("invoke_agent outer")
    inner_span = captured.one("invoke_agent support")
    tool_span = captured.one("execute_tool search")
    assert outer_span.parent is None
    assert parent_id(inner_span) == span_id(outer_span)
    assert parent_id(tool_span) == span_id(inner_span)
    assert len({s.context.trace_id for s in captured.spans if s.context}) == 1


def test_async_agent_nests_concurrent_tools(captured: CapturedSpans) -> None:
    """Concurrent async tool calls each get their own span under the async agent."""

    @agent
    async def gatherer() -> list[dict[str, Any]]:
        return list(await asyncio.gather(fetch(1), fetch(2)))

    asyncio.run(gatherer())
    root = captured.one("invoke_agent gatherer")
    tools = captured.by_name("execute_tool kb_fetch")
    assert len(tools) == 2
    assert [parent_id(t) for t in tools] == [span_id(root)] * 2


def test_exception_is_reraised_unchanged_and_recorded(captured: CapturedSpans) -> None:
    """A raising tool re-raises the same exception object; the span has ERROR, error.type and an event."""
    with pytest.raises(RefundDeclinedError) as info:
        refund(42)
    assert str(info.value) == "order 42 declined"
    assert traceback.extract_tb(info.value.__traceback__)[-1].name == "refund"
    span = captured.one("execute_tool refund")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "order 42 declined"
    attributes = span.attributes or {}
    assert attributes[attr.ERROR_TYPE] == "RefundDeclinedError"
    assert attr.GEN_AI_TOOL_CALL_RESULT not in attributes
    assert attributes[attr.GEN_AI_TOOL_CALL_ARGUMENTS] == '{"order_id":42}'
    (event,) = span.events
    assert event.name == "exception"
    assert (event.attributes or {})["exception.message"] == "order 42 declined"


def test_same_exception_object_through_agent_and_async_tool(captured: CapturedSpans) -> None:
    """The identical exception object crosses nested sync and async wrappers; each span is ERROR."""
    boom = RefundDeclinedError("nope")

    @tool
    async def failing() -> None:
        raise boom

    @agent
    async def runner() -> None:
        await failing()

    with pytest.raises(RefundDeclinedError) as info:
        asyncio.run(runner())
    assert info.value is boom
    for name in ("execute_tool failing", "invoke_agent runner"):
        span = captured.one(name)
        assert span.status.status_code is StatusCode.ERROR
        assert (span.attributes or {})[attr.ERROR_TYPE] == "RefundDeclinedError"


def test_nested_exception_class_uses_qualname(captured: CapturedSpans) -> None:
    """error.type is the exception class __qualname__."""

    class Outer:
        class InnerError(Exception):
            pass

    @tool
    def fails() -> None:
        raise Outer.InnerError

    with pytest.raises(Outer.InnerError):
        fails()
    attributes = captured.one("execute_tool fails").attributes or {}
    assert str(attributes[attr.ERROR_TYPE]).endswith("Outer.InnerError")


def test_success_has_no_error_type(captured: CapturedSpans) -> None:
    """A successful call leaves the status UNSET and sets no error.type."""
    support("fine")
    for span in captured.spans:
        assert span.status.status_code is StatusCode.UNSET
        assert attr.ERROR_TYPE not in (span.attributes or {})


class Desk:
    """Methods, class methods and static methods decorated in every stacking order."""

    prefix = "desk"

    @tool
    def lookup(self, order_id: int) -> str:
        return f"{self.prefix}-{order_id}"

    @tool
    async def alookup(self, order_id: int) -> str:
        return f"{self.prefix}-{order_id}"

    @classmethod
    @tool
    def make(cls, size: int) -> str:
        return f"{cls.prefix}-{size}"

    @tool
    @classmethod
    def make_outer(cls, size: int) -> str:
        return f"{cls.prefix}-{size}"

    @tool
    @staticmethod
    def static(value: int) -> int:
        return value + 1


def test_methods_skip_self_and_cls(captured: CapturedSpans) -> None:
    """self/cls are not captured, and class/static methods work whichever decorator is outermost."""
    desk = Desk()
    assert desk.lookup(5) == "desk-5"
    assert asyncio.run(desk.alookup(order_id=6)) == "desk-6"
    assert Desk.make(1) == "desk-1"
    assert Desk.make_outer(2) == "desk-2"
    assert Desk.static(3) == 4
    arguments = {s.name: (s.attributes or {})[attr.GEN_AI_TOOL_CALL_ARGUMENTS] for s in captured.spans}
    assert arguments == {
        "execute_tool lookup": '{"order_id":5}',
        "execute_tool alookup": '{"order_id":6}',
        "execute_tool make": '{"size":1}',
        "execute_tool make_outer": '{"size":2}',
        "execute_tool static": '{"value":3}',
    }


def test_arguments_bound_by_name_without_defaults(captured: CapturedSpans) -> None:
    """Positional, keyword, *args and **kwargs are captured under their parameter names, no defaults."""

    @tool
    def flexible(a: int, /, b: int, *rest: int, c: int = 9, **extra: str) -> None:
        return None

    flexible(1, 2, 3, 4, c=5, tag="x")
    flexible(1, b=2)
    first, second = (json.loads(str((s.attributes or {})[attr.INPUT_VALUE])) for s in captured.spans)
    assert first == {"a": 1, "b": 2, "rest": [3, 4], "c": 5, "extra": {"tag": "x"}}
    assert second == {"a": 1, "b": 2}


def test_non_json_arguments_are_captured_by_repr(captured: CapturedSpans) -> None:
    """Arguments JSON cannot hold (objects, bytes, sets) appear as their repr() in valid JSON."""

    class Order:
        def __repr__(self) -> str:
            return "Order(42)"

    @tool
    def ship(order: Order, payload: bytes, tags: set[str]) -> Order:
        return order

    ship(Order(), b"\x01", {"a"})
    attributes = captured.one("execute_tool ship").attributes or {}
    assert json.loads(str(attributes[attr.INPUT_VALUE])) == {
        "order": "Order(42)",
        "payload": "b'\\x01'",
        "tags": "{'a'}",
    }
    assert attributes[attr.OUTPUT_VALUE] == '"Order(42)"'


def test_bad_call_still_shows_what_was_passed(captured: CapturedSpans) -> None:
    """A call that does not match the signature fails as usual; the span shows the raw arguments."""
    with pytest.raises(TypeError):
        search("a", 1, 2)  # type: ignore[call-arg]
    attributes = captured.one("execute_tool search").attributes or {}
    assert json.loads(str(attributes[attr.INPUT_VALUE])) == {"args": ["a", 1, 2], "kwargs": {}}
    assert attributes[attr.ERROR_TYPE] == "TypeError"


def test_wraps_preserves_metadata() -> None:
    """The wrapper keeps the function's name, docstring and __wrapped__."""
    assert search.__name__ == "search"
    assert (search.__doc__ or "").startswith("Search the knowledge base.")
    assert search.__wrapped__.__name__ == "search"  # type: ignore[attr-defined]
    assert asyncio.iscoroutinefunction(fetch)


def test_generators_are_refused_at_decoration() -> None:
    """Generator and async-generator functions raise TypeError explaining what to do instead."""

    def gen() -> Any:
        yield 1

    async def agen() -> Any:
        yield 1

    with pytest.raises(TypeError, match=r"generator function .*gen.*tool_call\(\.\.\.\)"):
        tool(gen)
    with pytest.raises(TypeError, match=r"generator function .*agen.*agent_run\(\.\.\.\)"):
        agent(agen)


def test_set_task_output_conversation_from_nested_tool(captured: CapturedSpans) -> None:
    """set_* called inside a tool reach the enclosing agent span, not the tool span."""

    @tool
    def classify() -> str:
        set_task("refund")
        set_conversation_id("conv-1")
        set_output({"answer": "refunded"})
        return "refund"

    @agent
    def triage() -> str:
        classify()
        return "ignored because set_output was called"

    triage()
    agent_attrs = captured.one("invoke_agent triage").attributes or {}
    assert agent_attrs[attr.AGENTTRAIL_TASK] == "refund"
    assert agent_attrs[attr.GEN_AI_CONVERSATION_ID] == agent_attrs[attr.SESSION_ID] == "conv-1"
    assert agent_attrs[attr.OUTPUT_VALUE] == '{"answer":"refunded"}'
    tool_attrs = captured.one("execute_tool classify").attributes or {}
    assert attr.AGENTTRAIL_TASK not in tool_attrs
    assert tool_attrs[attr.GEN_AI_TOOL_CALL_RESULT] == '"refund"'


def test_set_task_targets_innermost_agent(captured: CapturedSpans) -> None:
    """In nested runs set_task() applies to the inner run only."""

    @agent
    def inner() -> None:
        set_task("inner-task")

    @agent
    def outer() -> None:
        inner()

    outer()
    assert (captured.one("invoke_agent inner").attributes or {})[attr.AGENTTRAIL_TASK] == "inner-task"
    assert attr.AGENTTRAIL_TASK not in (captured.one("invoke_agent outer").attributes or {})


def test_set_functions_outside_a_run_do_nothing(
    captured: CapturedSpans, caplog: pytest.LogCaptureFixture
) -> None:
    """Outside any agent run set_* are no-ops that log at debug level."""
    caplog.set_level(logging.DEBUG, logger="agenttrail.instrumentation")
    search("x")
    set_task("t")
    set_output("o")
    set_conversation_id("c")
    assert "set_task() called outside any agent run" in caplog.text
    assert attr.AGENTTRAIL_TASK not in (captured.one("execute_tool search").attributes or {})


def test_unsampled_calls_record_and_serialise_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a sampler that drops everything no span is exported and the serializer is never called."""

    def must_not_run(*args: object) -> None:
        raise AssertionError("serializer called for an unsampled span")

    monkeypatch.setattr(_decorators, "capture_into", must_not_run)
    monkeypatch.setattr(_decorators, "capture_arguments_into", must_not_run)
    with capture_spans(sampler=ALWAYS_OFF) as captured:
        assert support("q") == "done"
        with pytest.raises(RefundDeclinedError):
            refund(1)
    assert captured.spans == []


def test_internal_error_does_not_break_the_call(
    captured: CapturedSpans, tolerant: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A failing serializer is logged once per function; the call returns normally and the span survives."""

    def broken(*args: object) -> None:
        raise RuntimeError("serializer bug")

    monkeypatch.setattr(_decorators, "capture_into", broken)
    monkeypatch.setattr(_decorators, "capture_arguments_into", broken)  # positional simple values
    assert search("a") == ["a", "a"]
    assert search("b") == ["b", "b"]
    with pytest.raises(RefundDeclinedError):
        refund(3)
    assert len(captured.by_name("execute_tool search")) == 2
    logged = [r for r in caplog.records if "internal error" in r.getMessage()]
    assert len(logged) == 2  # once for search, once for refund
    assert "serializer bug" in caplog.text


def test_internal_error_in_tracer_still_runs_function(
    tolerant: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If even starting the span fails, the function runs and its result and exceptions pass through."""

    class BrokenTracer:
        def start_span(self, *args: object, **kwargs: object) -> None:
            raise RuntimeError("tracer bug")

    monkeypatch.setattr(STATE, "tracer", BrokenTracer())
    assert support("q") == "done"
    assert asyncio.run(fetch(1)) == {"id": 1, "title": "Refunds"}
    with pytest.raises(RefundDeclinedError):
        refund(1)


def test_internal_errors_raise_when_asked(captured: CapturedSpans, monkeypatch: pytest.MonkeyPatch) -> None:
    """AGENTTRAIL_RAISE_INTERNAL_ERRORS=1 turns an internal error into an exception, so tests see bugs."""
    monkeypatch.setenv("AGENTTRAIL_RAISE_INTERNAL_ERRORS", "1")

    def broken(*args: object) -> None:
        raise RuntimeError("serializer bug")

    monkeypatch.setattr(_decorators, "capture_into", broken)
    monkeypatch.setattr(_decorators, "capture_arguments_into", broken)  # positional simple values
    with pytest.raises(RuntimeError, match="serializer bug"):
        search("a")


def test_decorators_follow_configuration_made_after_decoration() -> None:
    """Functions decorated at import time use whichever provider is current at call time."""
    with capture_spans() as first:
        search("a")
    with capture_spans() as second:
        search("b")
    assert len(first.spans) == len(second.spans) == 1
