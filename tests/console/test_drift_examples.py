"""The example runs a drift finding links to, per metric, on a real chDB store: the runs of the
recent window that moved the statistic, in the direction it moved, and none outside the window."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from otlp_builders import new_span_id, new_trace_id

from agenttrail.evaluators.console.drift_examples import example_runs

NOW = time.time()
WINDOW = {"agent": "bot", "task": "", "window_start": NOW - 3600, "window_end": NOW}


@pytest.fixture
def runs(store: Any) -> dict[str, str]:
    """Five runs in the window and one before it (the slowest, longest, failed, lowest scoring of
    all); name -> trace id."""
    from agenttrail.collector.assembler import TRAJECTORY_COLUMNS
    from agenttrail.collector.schema import migrate
    from agenttrail.evaluators.composition import ALL_MIGRATIONS

    migrate(store, ALL_MIGRATIONS)
    shapes = {  # name: (age s, latency s, failed, tools, score)
        "outside": (7200, 90.0, True, ["lookup", "refund", "email", "email"], 0.0),
        "slow": (60, 30.0, False, ["lookup", "refund"], 0.9),
        "failed": (120, 0.5, True, ["lookup"], 0.4),
        "long": (180, 1.0, False, ["lookup", "refund", "email"], 0.8),
        "low": (240, 0.8, False, ["lookup", "escalate"], 0.1),
        "quick": (300, 0.01, False, ["lookup", "refund"], 0.7),
    }
    ids, rows, scores = {}, [], []
    for name, (age, latency, failed, tools, score) in shapes.items():
        trace, root = new_trace_id(), new_span_id()
        ids[name] = trace
        calls = [{"name": tool, "input": {}, "output": None, "status": "ok"} for tool in tools]
        row = {
            "TraceId": trace, "RootSpanId": root, "Agent": "bot", "AgentId": "", "AgentVersion": "1",
            "Task": "refund", "ConversationId": "", "ServiceName": "svc", "Model": "",
            "Start": f"{NOW - age:.6f}", "LatencyS": latency, "Failure": int(failed),
            "ErrorType": "Timeout" if failed else "", "Input": "{}", "Output": "{}", "InputTokens": 0,
            "OutputTokens": 0, "ToolCount": len(tools), "ToolNames": tools,
            "ToolStatuses": ["ok"] * len(tools), "ToolCalls": json.dumps(calls), "SpanCount": 1 + len(tools),
            "Revision": 1, "AssembledAt": f"{NOW:.6f}", "Version": 1, "IsDeleted": 0,
        }  # fmt: skip
        rows.append(tuple(row[column] for column in TRAJECTORY_COLUMNS))
        scores.append((trace, root, "helpful", "judge-v1", score))
    store.insert_rows("trajectories", TRAJECTORY_COLUMNS, rows)
    store.insert_rows("scores", ("TraceId", "RootSpanId", "Metric", "EvaluatorVersion", "Score"), scores)
    return ids


def names(store: Any, ids: dict[str, str], **finding: Any) -> list[str]:
    by_id = {trace: name for name, trace in ids.items()}
    return [by_id[example["trace_id"]] for example in example_runs(store, {**WINDOW, **finding}, limit=2)]


def test_each_metric_picks_the_runs_that_moved_it(store: Any, runs: dict[str, str]) -> None:
    """Failure rate up: failed runs; latency up: slowest, down: fastest; trajectory length up:
    longest; a tool's share up: runs calling it, down: runs without it; a score down: lowest
    scoring, up: highest. The run before the window is never picked, extreme as it is."""
    up, down = {"baseline_value": 0.1, "recent_value": 0.5}, {"baseline_value": 0.5, "recent_value": 0.1}
    assert names(store, runs, metric="failure_rate", **up) == ["failed"]
    assert names(store, runs, metric="latency", **up) == ["slow", "long"]
    assert names(store, runs, metric="latency", **down) == ["quick", "failed"]
    assert names(store, runs, metric="trajectory_length", **up)[0] == "long"
    share = {"share_change": {"escalate": 0.2, "email": -0.05}}
    assert names(store, runs, metric="tool_distribution", detail=share) == ["low"]
    dropped = {"share_change": {"refund": -0.3}}
    assert sorted(names(store, runs, metric="tool_distribution", detail=dropped)) == ["failed", "low"]
    assert names(store, runs, metric="helpful", **down) == ["low", "failed"]
    assert names(store, runs, metric="helpful", **up) == ["slow", "long"]
    why = example_runs(store, {**WINDOW, "metric": "latency", **up}, limit=1)[0]["why"]
    assert why == "30 s"
