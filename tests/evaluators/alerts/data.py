"""Stored runs, scores and drift events for the alert tests, written straight into chDB."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from trajectory_rows import agent_run, store_runs

from agenttrail.collector.store import Store
from agenttrail.evaluators.monitoring.drift_events import DriftEventRow


class Clock:
    """The evaluator's clock, moved by the test."""

    def __init__(self, now: float | None = None) -> None:
        self.now = time.time() if now is None else now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


def insert_runs(
    store: Store,
    *,
    agent: str,
    at: float,
    count: int,
    failed: int = 0,
    task: str = "refund",
    latency_s: float = 1.0,
    tools: Sequence[tuple[str, str]] = (),
    spread_s: float = 60.0,
) -> list[str]:
    """`count` runs of `agent` started in the `spread_s` seconds before `at`; the first `failed` failed."""
    runs = [
        agent_run(
            start=at - spread_s * (i + 0.5) / count,
            agent=agent,
            task=task,
            latency_s=latency_s,
            failure=i < failed,
            tools=tools,
        )
        for i in range(count)
    ]
    return [run.trace_id for run in store_runs(store, runs)]


def insert_scores(store: Store, *, agent: str, metric: str, at: float, values: Sequence[float]) -> None:
    columns = ("TraceId", "RootSpanId", "Metric", "Evaluator", "EvaluatorVersion", "Score", "Agent", "Task")
    columns += ("RunStart", "CreatedAt")
    rows = [
        (
            os.urandom(16).hex(),
            "r",
            metric,
            "trajectory",
            "v1",
            value,
            agent,
            "refund",
            f"{at - i - 1:.6f}",
            f"{time.time():.6f}",
        )
        for i, value in enumerate(values)
    ]
    store.insert_rows("scores", columns, rows)


def insert_drift(
    store: Store,
    *,
    agent: str,
    metric: str,
    at: float,
    drifted: bool = True,
    detail: str = "recent window lower",
    test: str = "mann_whitney",
    p_value: float | None = 0.001,
) -> None:
    row = DriftEventRow(
        f"{at:.3f}", agent, "", metric, test, int(drifted), p_value, 0.8, 500, 120, 0.9, 0.6,
        f"{at - 3600:.3f}", f"{at:.3f}", detail,
    )  # fmt: skip
    store.insert("drift_events", [row])
