"""One run, three ways in, one model out: a decorated agent exported over OTLP by the real SDK to a
sidecar on loopback (assembled from spans, scored by the online worker), the same run as a dataset
file (what `agenttrail trajectories --format json` prints, evaluated offline), and the same agent
run offline in runnable mode (its spans captured in-process and built by build_runs). The calls
cover every way a value goes missing: arguments and result not captured (`capture=False`), a
result not captured (a GenAI tool span with arguments only), a tool that returned None, and a
failed call."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from receiver_clients import sdk_exporting_to

from agenttrail.collector.queries import TrajectoryFilter, query_trajectories
from agenttrail.collector.runs import NOT_CAPTURED, AgentRun, ToolCall, predicted_calls
from agenttrail.evaluators.offline.datasets import DatasetRow, load_dataset
from agenttrail.evaluators.offline.evaluate import evaluate_rows
from agenttrail.evaluators.offline.runnable import run_agent_over_dataset
from agenttrail.evaluators.scoring.reference_store import store_reference_set
from agenttrail.evaluators.scoring.references import parse_reference_set
from agenttrail.evaluators.scoring.scores import ScoreFilter, query_scores
from agenttrail.instrumentation import agent, set_task, tool
from agenttrail.instrumentation._state import STATE

METRICS = [
    "trajectory_exact_match",
    "trajectory_in_order_match",
    "trajectory_precision",
    "trajectory_recall",
    "tool_correctness",
]
# "lenient": the not-captured call meets a wildcard, so every metric has a value. "strict": it
# meets expected arguments, which makes the argument-comparing metrics not computable (online:
# no score row; offline: None), where reading its arguments as null would have scored 0.
_EXPECTED = [
    {"name": "lookup", "args": {"order_id": 42}, "output": {"status": "shipped"}},
    {"name": "audit", "args": None},
    {"name": "search", "args": {"q": "policy"}, "output": "the refund policy"},
    {"name": "notify", "args": {"order_id": 42}, "output": {"sent": True}},
    {"name": "refund", "args": {"order_id": 42}},
]
REFERENCES = {
    "lenient": {"reference_trajectory": _EXPECTED, "metrics": METRICS},
    "strict": {
        "reference_trajectory": [
            {**call, "args": {"order_id": 42}} if call["name"] == "audit" else call for call in _EXPECTED
        ],
        "metrics": METRICS,
    },
}


class DeclinedError(RuntimeError):
    pass


@tool
def lookup(order_id: int) -> dict[str, Any]:
    return {"status": "shipped"}


@tool(capture=False)
def audit(order_id: int) -> str:
    return "audited"


@tool
def notify(order_id: int) -> None:
    return None


@tool
def refund(order_id: int) -> None:
    raise DeclinedError("card declined")


def search_by_framework(query: str) -> None:
    """A framework's own OTel GenAI tool span that records the arguments and not the result."""
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search",
        "gen_ai.tool.call.arguments": json.dumps({"q": query}),
    }
    with STATE.tracer.start_as_current_span("execute_tool search", attributes=attributes):
        pass


@agent(name="parity")
def parity_agent(task: str) -> str:
    set_task(task)
    lookup(42)
    audit(42)
    search_by_framework("policy")
    notify(42)
    with contextlib.suppress(DeclinedError):
        refund(42)
    return "done"


@pytest.fixture
def sidecar(start_sidecar: Any) -> Iterator[tuple[Any, TracerProvider]]:
    started = start_sidecar()
    with sdk_exporting_to(started, "parity") as provider:
        yield started, provider


def wait_decided(sidecar: Any, count: int, timeout: float = 120) -> list[str]:
    """Trace ids of the runs once `count` of them have the online evaluator's decision."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        decided = [row[0] for row in sidecar.store.query("SELECT DISTINCT TraceId FROM evaluation_decisions")]
        if len(decided) >= count:
            return decided
        time.sleep(0.1)
    raise AssertionError(f"the online evaluator decided {len(decided)} of {count} runs in {timeout} s")


def online_scores(sidecar: Any, trace_id: str) -> dict[str, float | None]:
    """Every metric the offline report names, None where the worker stored no score."""
    stored = {
        row["metric"]: row["score"]
        for row in query_scores(sidecar.store, ScoreFilter.from_params({"trace_id": trace_id}))
    }
    return {name: stored.get(name) for name in [*METRICS, "tool_correctness_success", "latency", "failure"]}


def test_one_run_online_from_a_file_and_runnable_is_one_model(
    sidecar: tuple[Any, TracerProvider], tmp_path: Path
) -> None:
    """Equal AgentRun values (the stored run and the file's), equal predicted calls on all three
    paths, and equal metric scores online and offline, for a wildcard and a strict reference."""
    side, provider = sidecar
    store_reference_set(side.store, parse_reference_set(REFERENCES), source="test")
    for task in REFERENCES:
        parity_agent(task)
    assert provider.force_flush(30_000)
    wait_decided(side, len(REFERENCES))
    documents = {doc["task"]: doc for doc in query_trajectories(side.store, TrajectoryFilter())}
    assert sorted(documents) == sorted(REFERENCES)

    # The file a user writes with `agenttrail trajectories --format json`, each run given its reference.
    dataset = tmp_path / "runs.jsonl"
    dataset.write_text(
        "".join(
            json.dumps({**doc, "reference_trajectory": REFERENCES[task]["reference_trajectory"]}) + "\n"
            for task, doc in documents.items()
        )
    )
    rows = load_dataset(dataset)
    assert all(isinstance(row, DatasetRow) for row in rows), rows
    for row in rows:
        assert isinstance(row, DatasetRow)
        assert row.run is not None
        document = documents[row.run.task]
        online_run = AgentRun.from_json(document)
        assert row.run == online_run
        predicted = predicted_calls(document["tool_calls"])
        assert row.predicted == predicted == [call.as_predicted() for call in online_run.tool_calls]
        assert predicted == [
            ToolCall("lookup", {"order_id": 42}, {"status": "shipped"}),
            ToolCall("audit", NOT_CAPTURED),
            ToolCall("search", {"q": "policy"}),
            ToolCall("notify", {"order_id": 42}),
            ToolCall("refund", {"order_id": 42}),
        ]

        report = evaluate_rows([row], METRICS)
        offline = {
            name: report.instances[0].metrics[name] for name in online_scores(side, document["trace_id"])
        }
        assert offline == online_scores(side, document["trace_id"]), row.run.task
    assert online_scores(side, documents["lenient"]["trace_id"])["trajectory_exact_match"] == 1.0
    assert online_scores(side, documents["lenient"]["trace_id"])["tool_correctness"] == 1.0
    assert online_scores(side, documents["strict"]["trace_id"])["trajectory_exact_match"] is None

    # Runnable mode: the agent run in-process, its captured spans built into the same calls.
    queries = [
        DatasetRow(index=i, predicted=None, reference=None, query=task) for i, task in enumerate(REFERENCES)
    ]
    for ran in run_agent_over_dataset(parity_agent, queries):
        assert isinstance(ran, DatasetRow)
        assert ran.run is not None
        assert ran.predicted == [call.as_predicted() for call in ran.run.tool_calls]
        assert ran.predicted == predicted_calls(documents[str(ran.query)]["tool_calls"])
