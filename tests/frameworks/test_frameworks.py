"""Real agent frameworks, instrumented as their docs show, send OTLP http/protobuf to a real sidecar;
each trajectory must equal what the agent's tools recorded really ran: names, order, arguments,
statuses, failure, agent name and tokens (the model's usage as the scripted server reported it).

Each framework runs three runs in one process: two tool calls that succeed, a tool that raises, and
a model call that fails with HTTP 500 after a tool call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from llm_server import LlmServer

from agenttrail.collector.queries import TrajectoryFilter, query_trajectories

from .scripted import SCRIPTS, ScriptedModel
from .setups import AGENTS, SETUPS, Setup, venv_python

RUNS = list(SCRIPTS)


def run_agent(setup: Setup, sidecar: Any, llm: LlmServer) -> list[dict[str, Any]]:
    """Run the set-up's agent script in its venv; returns its record of what the tools did."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
        **setup.env,
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://{sidecar.http.address}/v1/traces",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
        "LLM_BASE_URL": llm.base_url,
        "SERVICE_NAME": setup.name,
        "RUNS": ",".join(RUNS),
        "PYTHONPATH": str(AGENTS),
    }
    done = subprocess.run(
        [str(venv_python(setup)), str(AGENTS / setup.script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"{setup.script} failed:\n{done.stderr[-4000:]}"
    record: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    assert [run["marker"] for run in record] == RUNS
    return record


def expected_calls(setup: Setup, run: dict[str, Any]) -> list[tuple[str, Any, str]]:
    calls = [
        (c["name"], c["arguments"] if setup.arguments_captured else None, c["status"]) for c in run["calls"]
    ]
    if setup.final_answer_tool and not run["raised"]:
        [final] = [step.text for step in SCRIPTS[run["marker"]] if step.text]
        calls.append(("final_answer", {"answer": final}, "ok"))
    return calls


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", list(SETUPS))
def test_framework_trajectories_equal_what_ran(name: str, start_sidecar: Any) -> None:
    """Every run of the framework's agent is rebuilt exactly from its spans."""
    setup = SETUPS[name]
    venv_python(setup)  # built before the servers start, so no quiet period runs out meanwhile
    sidecar = start_sidecar(quiet_period_s=0.5, idle_timeout_s=2.0)
    model = ScriptedModel(final_answer_tool=setup.final_answer_tool)
    with LlmServer(model) as llm:
        record = run_agent(setup, sidecar, llm)
    assert sidecar.wait_until_assembled(60)
    runs = sorted(query_trajectories(sidecar.store, TrajectoryFilter()), key=lambda r: r["start"])
    got = [
        {
            "agent": run["agent"],
            "failure": run["failure"],
            "incomplete": run["incomplete"],
            "tokens": [run["input_tokens"], run["output_tokens"]],
            "calls": [(c["name"], c["input"], c["status"]) for c in run["tool_calls"]],
            "captured": {c["input_captured"] for c in run["tool_calls"]},
        }
        for run in runs
    ]
    want = []
    for run in record:
        unended = setup.unended_failed_runs and bool(run["raised"])
        calls = expected_calls(setup, run)
        want.append(
            {
                # an agent span that never ended never arrives: the run is named by its service
                "agent": setup.name if unended else "refund_agent",
                "failure": int(bool(run["raised"])),
                "incomplete": unended,
                "tokens": model.tokens[run["marker"]],
                "calls": calls,
                "captured": {setup.arguments_captured} if calls else set(),
            }
        )
    assert got == want, f"record: {json.dumps(record)}"
    tools = {tool["name"] for run in runs for tool in run["available_tools"]}
    assert {"search_books", "refund", "charge_card"} <= tools, f"available tools seen: {sorted(tools)}"


if __name__ == "__main__":  # build every venv (make test-frameworks does it through pytest)
    for setup in SETUPS.values():
        print(venv_python(setup), file=sys.stderr)
