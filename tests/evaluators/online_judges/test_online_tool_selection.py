"""An online tool-selection judge scores live runs: decorated tools and a framework's spans, both
sent over real OTLP, reach the judge with the tools the trace described."""

from __future__ import annotations

import json
import time
from typing import Any

from llm_server import LlmServer, Reply
from opentelemetry.sdk.trace import TracerProvider

from agenttrail.instrumentation import agent, set_task, tool


@tool(description="Look an order up by its id")
def find_order(order_id: int) -> dict[str, Any]:
    return {"order_id": order_id, "status": "shipped"}


@tool(description="Refund an order in full")
def refund_order(order_id: int) -> str:
    return f"refunded {order_id}"


@agent(name="support")
def support(order_id: int) -> str:
    set_task("refund")
    find_order(order_id)
    return refund_order(order_id)


def framework_run(provider: TracerProvider) -> str:
    """A run shaped as OpenInference instrumentations emit it (openai-agents): an AGENT span, an LLM
    span offering the tools as `llm.tools.*` JSON schemas, and the TOOL span it called."""
    tracer = provider.get_tracer("openinference.instrumentation.openai_agents")
    schema = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    other = {"type": "function", "function": {"name": "get_time", "description": "Local time in a city"}}
    with tracer.start_as_current_span(
        "weather_agent", attributes={"openinference.span.kind": "AGENT", "agent.name": "weather_agent"}
    ) as root:
        with tracer.start_as_current_span(
            "response",
            attributes={
                "openinference.span.kind": "LLM",
                "llm.tools.0.tool.json_schema": json.dumps(schema),
                "llm.tools.1.tool.json_schema": json.dumps(other),
            },
        ):
            pass
        with tracer.start_as_current_span(
            "get_weather",
            attributes={
                "openinference.span.kind": "TOOL",
                "tool.name": "get_weather",
                "input.value": json.dumps({"city": "Oslo"}),
                "output.value": "rain",
            },
        ):
            pass
        return format(root.get_span_context().trace_id, "032x")  # its own trace


def test_online_tool_selection_judges_decorated_and_framework_runs(
    live_judge_sidecar: Any,
) -> None:
    """Both live runs are judged (not missing): each prompt names that run's available tools
    with their descriptions, and the stored score is the judge's."""
    with LlmServer(lambda _: Reply.chat_json({"reason": "right tools", "score": 0.8})) as llm:
        judge = {"name": "picks", "type": "tool_selection", "concurrency": 1}
        sidecar, provider = live_judge_sidecar(llm, judge, "live")
        support(7)
        framework_run(provider)
        provider.shutdown()
        assert sidecar.wait_until_assembled(30)
        deadline = time.monotonic() + 30
        scores: dict[str, tuple[Any, ...]] = {}
        while time.monotonic() < deadline and len(scores) < 2:
            rows = sidecar.store.query(
                "SELECT t.Agent, s.Score, s.Error, s.Details FROM scores AS s FINAL "
                "JOIN trajectories AS t FINAL ON s.TraceId = t.TraceId WHERE s.Metric = 'picks'"
            )
            scores = {agent_name: rest for agent_name, *rest in rows}
            time.sleep(0.1)
        assert scores == {"support": [0.8, "", ""], "weather_agent": [0.8, "", ""]}, scores
        prompts = [json.dumps(request["messages"]) for request in llm.chat_requests()]
        decorated = next(p for p in prompts if "find_order" in p)
        assert "Look an order up by its id" in decorated
        assert "Refund an order in full" in decorated
        framework = next(p for p in prompts if "get_weather" in p)
        assert "Current weather for a city" in framework
        assert "Local time in a city" in framework
