"""Our decorators end to end: a decorated agent exports over OTLP to a live collector, and its
trajectory comes back with arguments, results, errors and nesting as the agent did them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from receiver_clients import sdk_exporting_to

from agenttrail.collector.queries import TrajectoryFilter, query_trajectories
from agenttrail.collector.runs import AgentRun
from agenttrail.instrumentation import agent, set_output, set_task, tool


class DeclinedError(RuntimeError):
    pass


@tool(description="Look an order up")
def lookup(order_id: int, *, verbose: bool = False) -> dict[str, Any]:
    return {"order_id": order_id, "status": "shipped"}


@tool
async def fetch_policy(topic: str) -> str:
    await asyncio.sleep(0)
    return f"policy for {topic}"


@tool(name="refund")
def refund_tool(order_id: int, api_key: str) -> None:
    raise DeclinedError("card declined")


@agent(name="helper")
def helper_agent(topic: str) -> str:
    return asyncio.run(fetch_policy(topic))


@agent(name="support", version="3.1")
def support(question: str, order_id: int) -> str:
    set_task("refund")
    lookup(order_id)
    helper_agent("refunds")
    with contextlib.suppress(DeclinedError):
        refund_tool(order_id, api_key="sk-secret-123")
    set_output("escalated")
    return "escalated"


@agent(name="async-support")
async def async_support(order_id: int) -> str:
    lookup(order_id)
    await fetch_policy("returns")
    raise DeclinedError("gave up")


@pytest.fixture
def exported_to(start_sidecar: Any) -> Iterator[tuple[Any, TracerProvider]]:
    sidecar = start_sidecar()
    with sdk_exporting_to(sidecar, "instrumented") as provider:
        yield sidecar, provider


def test_decorated_agent_round_trip(exported_to: tuple[Any, TracerProvider]) -> None:
    """Sync, async, failing and nested decorated calls become one trajectory with the right details."""
    sidecar, provider = exported_to
    assert support("where is my refund?", 42) == "escalated"
    with pytest.raises(DeclinedError, match="gave up"):
        asyncio.run(async_support(7))
    assert provider.force_flush(10_000)
    assert sidecar.wait_until_assembled(30)

    [run] = query_trajectories(sidecar.store, TrajectoryFilter(agent="support"))
    assert (run["task"], run["failure"], run["output"]) == ("refund", 0, "escalated")
    assert run["input"] == {"question": "where is my refund?", "order_id": 42}
    assert run["agent_version"] == "3.1"
    assert AgentRun.from_json(run).agent_version == "3.1"  # `--format json` read back keeps it
    calls = run["tool_calls"]
    assert [(c["name"], c["agent"], c["status"]) for c in calls] == [
        ("lookup", "support", "ok"),
        ("fetch_policy", "helper", "ok"),
        ("refund", "support", "error"),
    ]
    assert calls[0]["input"] == {"order_id": 42}
    assert calls[0]["output"] == {"order_id": 42, "status": "shipped"}
    assert calls[1]["output"] == "policy for refunds"
    assert calls[2]["error_type"] == "DeclinedError"
    assert "sk-secret-123" not in str(calls[2]["input"])

    [failed] = query_trajectories(sidecar.store, TrajectoryFilter(agent="async-support"))
    assert (failed["failure"], failed["error_type"], failed["agent_version"]) == (1, "DeclinedError", "")
    assert [c["name"] for c in failed["tool_calls"]] == ["lookup", "fetch_policy"]
