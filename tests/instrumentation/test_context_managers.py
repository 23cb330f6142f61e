"""agent_run(), tool_call() and chat(): the decorators' spans, for code that is not one function."""

import asyncio

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from agenttrail.instrumentation import agent_run, chat, set_output, set_task, tool, tool_call
from agenttrail.instrumentation import attributes as attr
from agenttrail.instrumentation.testing import CapturedSpans


class PlannerError(Exception):
    """Raised inside blocks to check the error path."""


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def test_agent_run_block_records_input_output_and_ids(captured: CapturedSpans) -> None:
    """agent_run() emits invoke_agent with task, conversation/session id, JSON input and set_output()."""
    with agent_run("planner", task="refund", input={"question": "q"}, conversation_id="c-1") as run:
        run.set_output(["step 1"])
    attributes = captured.one("invoke_agent planner").attributes or {}
    assert dict(attributes) == {
        attr.GEN_AI_OPERATION_NAME: "invoke_agent",
        attr.GEN_AI_AGENT_NAME: "planner",
        attr.AGENTTRAIL_TASK: "refund",
        attr.GEN_AI_CONVERSATION_ID: "c-1",
        attr.SESSION_ID: "c-1",
        attr.OPENINFERENCE_SPAN_KIND: "AGENT",
        attr.INPUT_VALUE: '{"question":"q"}',
        attr.INPUT_MIME_TYPE: "application/json",
        attr.OUTPUT_VALUE: '["step 1"]',
        attr.OUTPUT_MIME_TYPE: "application/json",
    }


def test_agent_run_without_input_or_output_records_neither(captured: CapturedSpans) -> None:
    """A block given no input and no output records no input.value / output.value at all."""
    with agent_run("planner"):
        pass
    attributes = captured.one("invoke_agent planner").attributes or {}
    for absent in (attr.INPUT_VALUE, attr.OUTPUT_VALUE, attr.INPUT_MIME_TYPE, attr.OUTPUT_MIME_TYPE):
        assert absent not in attributes


def test_tool_call_block_with_call_id_and_result(captured: CapturedSpans) -> None:
    """tool_call() emits execute_tool with the model's call id, arguments and set_result() value."""
    with tool_call("search", arguments={"q": "x"}, description="Search", call_id="call_9") as call:
        assert call.call_id == "call_9"
        call.set_result({"hits": 2})
    attributes = captured.one("execute_tool search").attributes or {}
    assert attributes[attr.GEN_AI_TOOL_CALL_ID] == "call_9"
    assert attributes[attr.GEN_AI_TOOL_CALL_ARGUMENTS] == attributes[attr.INPUT_VALUE] == '{"q":"x"}'
    assert attributes[attr.GEN_AI_TOOL_CALL_RESULT] == attributes[attr.OUTPUT_VALUE] == '{"hits":2}'
    assert attributes[attr.GEN_AI_TOOL_DESCRIPTION] == "Search"


def test_tool_call_default_id_is_span_id(captured: CapturedSpans) -> None:
    """Without call_id the tool call id is the span id as 16 hex digits, also on the handle."""
    with tool_call("search") as call:
        handle_id = call.call_id
    span = captured.one("execute_tool search")
    assert (span.attributes or {})[attr.GEN_AI_TOOL_CALL_ID] == handle_id == format(span_id(span), "016x")


def test_blocks_nest_and_mix_with_decorators(captured: CapturedSpans) -> None:
    """Blocks parent their children like decorated calls, and set_task() reaches an agent_run()."""

    @tool
    def lookup() -> int:
        set_task("from-tool")
        return 1

    with agent_run("planner") as run, tool_call("search"):
        lookup()
        run.set_conversation_id("c-9")
    root = captured.one("invoke_agent planner")
    block_tool = captured.one("execute_tool search")
    assert parent_id(block_tool) == span_id(root)
    assert parent_id(captured.one("execute_tool lookup")) == span_id(block_tool)
    assert (root.attributes or {})[attr.AGENTTRAIL_TASK] == "from-tool"
    assert (root.attributes or {})[attr.SESSION_ID] == "c-9"


def test_block_error_is_recorded_and_propagates(captured: CapturedSpans) -> None:
    """An exception in a block propagates unchanged; the span is ERROR with error.type and no result."""
    error = PlannerError("no plan")

    def plan() -> None:
        with agent_run("planner") as run:
            run.set_output("never recorded")
            raise error

    with pytest.raises(PlannerError) as info:
        plan()
    assert info.value is error
    span = captured.one("invoke_agent planner")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "no plan"
    assert (span.attributes or {})[attr.ERROR_TYPE] == "PlannerError"
    assert attr.OUTPUT_VALUE not in (span.attributes or {})
    assert [e.name for e in span.events] == ["exception"]


def test_async_with_blocks(captured: CapturedSpans) -> None:
    """`async with` works for all three blocks, including the error path."""

    async def main() -> None:
        async with agent_run("async-planner"):
            async with tool_call("search", arguments=["a"]) as call:
                await asyncio.sleep(0)
                call.set_result("found")
            with pytest.raises(PlannerError):
                async with tool_call("broken"):
                    raise PlannerError("down")
            async with chat("gpt-4o") as model_call:
                model_call.set_usage(input_tokens=3)
            set_output("ok")

    asyncio.run(main())
    root = captured.one("invoke_agent async-planner")
    assert (root.attributes or {})[attr.OUTPUT_VALUE] == '"ok"'
    assert (captured.one("execute_tool search").attributes or {})[attr.GEN_AI_TOOL_CALL_RESULT] == '"found"'
    broken = captured.one("execute_tool broken")
    assert broken.status.status_code is StatusCode.ERROR
    assert {parent_id(s) for s in captured.spans if s is not root} == {span_id(root)}


def test_chat_span(captured: CapturedSpans) -> None:
    """chat() emits a CLIENT `chat {model}` span with model, provider, LLM kind and token usage."""
    with chat("gpt-4o-mini", provider="openai") as call:
        call.set_usage(input_tokens=12, output_tokens=5)
    span = captured.one("chat gpt-4o-mini")
    assert span.kind is SpanKind.CLIENT
    assert dict(span.attributes or {}) == {
        attr.GEN_AI_OPERATION_NAME: "chat",
        attr.GEN_AI_REQUEST_MODEL: "gpt-4o-mini",
        attr.GEN_AI_PROVIDER_NAME: "openai",
        attr.OPENINFERENCE_SPAN_KIND: "LLM",
        attr.GEN_AI_USAGE_INPUT_TOKENS: 12,
        attr.GEN_AI_USAGE_OUTPUT_TOKENS: 5,
    }


def test_handle_outside_block_is_inert(captured: CapturedSpans) -> None:
    """A handle used before entering or after leaving its block changes nothing and does not raise."""
    block = tool_call("search")
    block.set_result("early")
    with block:
        pass
    block.set_result("late")
    assert attr.GEN_AI_TOOL_CALL_RESULT not in (captured.one("execute_tool search").attributes or {})


def test_capture_off_per_block(captured: CapturedSpans) -> None:
    """capture=False on a block records neither its input nor its output."""
    with agent_run("planner", input="secret plan", capture=False) as run:
        run.set_output("secret result")
    attributes = captured.one("invoke_agent planner").attributes or {}
    assert attr.INPUT_VALUE not in attributes
    assert attr.OUTPUT_VALUE not in attributes
