"""Seeded stored data for report tests: two agents over six hours; `bot` degrades halfway."""

from __future__ import annotations

import os
import random
import time
from typing import Any

from trajectory_rows import agent_run, store_runs

from agenttrail.collector.trajectory import AgentRun
from agenttrail.evaluators.monitoring.alerts.schema import ALERT_MIGRATIONS
from agenttrail.evaluators.monitoring.drift_events import MONITORING_MIGRATIONS, DriftEventRow
from agenttrail.evaluators.scoring.schema import ScoreRow

HOURS = 6
# drift_events and alert_history, as the sidecar creates them
MONITORING_TABLES = (*MONITORING_MIGRATIONS, *ALERT_MIGRATIONS)


def _ts(seconds: float) -> str:
    return f"{seconds:.6f}"


def seed_runs(store: Any, *, now: float | None = None, seed: int = 3) -> dict[str, Any]:
    """Runs every ~2 minutes per agent over the last HOURS; after the midpoint `bot`'s refund tool
    fails half the time, its runs fail and slow down, and its scores drop. Returns what was stored."""
    rng = random.Random(seed)
    now = now or time.time()
    start = now - HOURS * 3600
    midpoint = start + HOURS * 3600 / 2
    runs: list[AgentRun] = []
    scores: list[tuple[Any, ...]] = []
    for agent in ("bot", "helper"):
        at = start + rng.uniform(0, 60)
        while at < now - 60:
            degraded = agent == "bot" and at > midpoint
            trace, root = os.urandom(16).hex(), os.urandom(8).hex()
            tool_fails = degraded and rng.random() < 0.5
            failed = tool_fails and rng.random() < 0.8
            latency = rng.lognormvariate(0.0, 0.3) * (3.0 if degraded else 1.0)
            calls = [
                {"name": "lookup", "input": {"id": 1}, "output": {"ok": True}, "latency_ms": 5.0},
                {
                    "name": "refund",
                    "input": {"amount": 5},
                    "output": None,
                    "status": "error" if tool_fails else "ok",
                    "latency_ms": 9.0,
                },
            ]
            runs.append(
                agent_run(
                    start=at,
                    trace_id=trace,
                    root_span_id=root,
                    agent=agent,
                    task="refund",
                    latency_s=latency,
                    failure=failed,
                    tools=calls,
                    input_tokens=100,
                    output_tokens=20,
                )
            )
            quality = (0.4 if degraded else 0.9) + rng.uniform(-0.1, 0.1)
            for metric, value in (("trajectory_recall", quality), ("latency", latency), ("failure", failed)):
                scores.append(
                    ScoreRow(
                        trace,
                        root,
                        metric,
                        "trajectory",
                        "trajectory-v1",
                        float(value),
                        "",
                        "",
                        agent,
                        "refund",
                        _ts(at),
                        1,
                        1,
                        "",
                        _ts(now),
                    )
                )
            at += rng.uniform(90, 150)
    store_runs(store, runs, assembled_at=now)
    store.insert("scores", scores)
    return {"start": start, "midpoint": midpoint, "now": now, "runs": runs, "scores": scores}


def seed_drift_and_alerts(store: Any, seeded: dict[str, Any]) -> None:
    """A drift event on bot's recall, and a failure-rate alert that fired after the midpoint and resolved.

    The tables come from the monitoring migrations (`MONITORING_TABLES`)."""
    detected = seeded["midpoint"] + 1800
    store.insert(
        "drift_events",
        [
            DriftEventRow(
                _ts(detected),
                "bot",
                "refund",
                "trajectory_recall",
                "mann_whitney",
                1,
                0.0001,
                0.9,
                80,
                30,
                0.9,
                0.4,
                _ts(seeded["start"]),
                _ts(detected),
                "recall fell",
            ),
            DriftEventRow(
                _ts(detected),
                "helper",
                "refund",
                "trajectory_recall",
                "mann_whitney",
                0,
                0.6,
                0.01,
                80,
                30,
                0.9,
                0.9,
                _ts(seeded["start"]),
                _ts(detected),
                "stable",
            ),
        ],
    )
    fired, resolved = seeded["midpoint"] + 1200, seeded["midpoint"] + 5400
    transitions = [
        (seeded["midpoint"] + 600, "inactive", "pending"),
        (fired, "pending", "firing"),
        (resolved, "firing", "resolved"),
    ]
    store.insert_rows(
        "alert_history",
        ("At", "Fingerprint", "Rule", "GroupLabels", "Event", "FromState", "ToState", "Detail"),
        [
            (_ts(at), "fp1", "failure_rate_spike", {"agent": "bot"}, "transition", old, new, "")
            for at, old, new in transitions
        ]
        + [(_ts(fired + 5), "fp1", "failure_rate_spike", {"agent": "bot"}, "notification", "", "", "sent")],
    )
    seeded["drift_at"], seeded["fired"], seeded["resolved"] = detected, fired, resolved
