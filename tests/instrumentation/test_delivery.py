"""Spans from configure() reach a real agenttrail sidecar, with its bearer token, over both protocols.

Each case runs tests/instrumentation/delivery_agent.py as its own process (a real agent's global
tracer provider and real OTLP exporters, nothing replaced). The batch delay is ten minutes and
the process is killed after it reports, so a run only arrives if force_flush() or shutdown()
delivers it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agenttrail.collector.queries import TrajectoryFilter, query_trajectories

pytestmark = pytest.mark.slow

TOKEN = "agent-s3cret"
AGENT = Path(__file__).with_name("delivery_agent.py")


class AgentProcess:
    def __init__(self, plan: dict[str, Any], env: dict[str, str]) -> None:
        base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        self.process = subprocess.Popen(
            [sys.executable, str(AGENT), json.dumps(plan)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**base, "OTEL_BSP_SCHEDULE_DELAY": "600000", **env},
        )

    def report(self) -> dict[str, Any]:
        """The next line the agent prints (its trace id, then how flushing went)."""
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            self.process.kill()
            raise AssertionError(f"the agent process ended early: {self.process.communicate()[1]}")
        report: dict[str, Any] = json.loads(line)
        return report

    def kill(self) -> None:
        self.process.kill()
        self.process.communicate()


@pytest.fixture
def agents() -> Iterator[list[AgentProcess]]:
    started: list[AgentProcess] = []
    yield started
    for agent in started:
        if agent.process.poll() is None:
            agent.kill()


def run_agent(agents: list[AgentProcess], plan: dict[str, Any], env: dict[str, str] | None = None) -> str:
    """Start the agent, wait until it has flushed or shut down (still alive); its run's trace id."""
    agent = AgentProcess(plan, env or {})
    agents.append(agent)
    trace_id = str(agent.report()["trace_id"])
    finished = agent.report()
    assert finished["finished"] == plan["finish"]
    if plan["finish"] == "force_flush":
        assert finished["result"] is True
    return trace_id


def wait_for_run(sidecar: Any, trace_id: str, timeout_s: float = 30) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while True:
        sidecar.wait_until_assembled(5)
        runs = query_trajectories(sidecar.store, TrajectoryFilter(trace_id=trace_id))
        if runs or time.monotonic() > deadline:
            return runs
        time.sleep(0.2)


def assert_delivered(sidecar: Any, trace_id: str) -> None:
    [run] = wait_for_run(sidecar, trace_id)
    assert run["agent"] == "delivery-bot"
    assert run["task"] == "deliver"
    assert [call["name"] for call in run["tool_calls"]] == ["lookup"]
    assert run["output"] == "ORDER-17"


@pytest.mark.parametrize(("protocol", "finish"), [("grpc", "force_flush"), ("http/protobuf", "shutdown")])
def test_configure_arguments_deliver_with_the_sidecars_token(
    start_sidecar: Any, agents: list[AgentProcess], protocol: str, finish: str
) -> None:
    """configure(endpoint=, protocol=, headers={authorization: Bearer ...}) delivers to a sidecar
    that requires the token, on force_flush() or shutdown()."""
    sidecar = start_sidecar(bearer_token=TOKEN)
    address = sidecar.grpc_address if protocol == "grpc" else sidecar.http.address
    plan = {
        "configure": {
            "endpoint": f"http://{address}",
            "protocol": protocol,
            "headers": {"authorization": f"Bearer {TOKEN}"},
        },
        "finish": finish,
    }
    assert_delivered(sidecar, run_agent(agents, plan))


@pytest.mark.parametrize(("protocol", "finish"), [("grpc", "shutdown"), ("http/protobuf", "force_flush")])
def test_otel_exporter_variables_deliver_with_the_sidecars_token(
    start_sidecar: Any, agents: list[AgentProcess], protocol: str, finish: str
) -> None:
    """configure() with no arguments follows OTEL_EXPORTER_OTLP_ENDPOINT / _PROTOCOL / _HEADERS."""
    sidecar = start_sidecar(bearer_token=TOKEN)
    address = sidecar.grpc_address if protocol == "grpc" else sidecar.http.address
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{address}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer%20{TOKEN}",
    }
    assert_delivered(sidecar, run_agent(agents, {"configure": {}, "finish": finish}, env))


def test_traces_specific_variables_win_over_the_general_ones(
    start_sidecar: Any, agents: list[AgentProcess]
) -> None:
    """OTEL_EXPORTER_OTLP_TRACES_* override OTEL_EXPORTER_OTLP_* (the general ones point nowhere)."""
    sidecar = start_sidecar(bearer_token=TOKEN)
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20wrong",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://{sidecar.http.address}/v1/traces",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": f"authorization=Bearer%20{TOKEN}",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
    }
    assert_delivered(sidecar, run_agent(agents, {"configure": {}, "finish": "force_flush"}, env))


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_without_the_token_nothing_is_stored(
    start_sidecar: Any, agents: list[AgentProcess], protocol: str
) -> None:
    """The control: the same agent without headers= is refused, so the cases above pass because of
    the token they send."""
    sidecar = start_sidecar(bearer_token=TOKEN)
    address = sidecar.grpc_address if protocol == "grpc" else sidecar.http.address
    plan = {"configure": {"endpoint": f"http://{address}", "protocol": protocol}, "finish": "shutdown"}
    trace_id = run_agent(agents, plan)
    assert sidecar.flush(30)
    rows = sidecar.store.query("SELECT count() FROM otel_traces WHERE TraceId = {t:String}", {"t": trace_id})
    assert rows[0][0] == 0
    assert sidecar.pipeline.counters.accepted_spans == 0
