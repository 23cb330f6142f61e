"""Rule kinds measured by their ClickHouse queries over real stored runs, scores and drift events."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from trajectory_rows import agent_run, deleted_row, insert_trajectories, run_row

from agenttrail.evaluators.monitoring.alerts.conditions import (
    DriftDetected,
    FailureRateSpike,
    LatencyAbove,
    MetricBelow,
    Observation,
    Scope,
    ToolErrorRate,
)
from agenttrail.evaluators.monitoring.drift import DriftResult
from agenttrail.evaluators.monitoring.drift_events import event_detail

from .data import insert_drift, insert_runs, insert_scores

HOUR = 3600.0


def by_agent(observations: list[Observation]) -> dict[str, Observation]:
    return {observation.labels["agent"]: observation for observation in observations}


def test_failure_spike_compares_window_with_baseline_and_floor(alert_store: Any) -> None:
    """Spike = window rate above factor x baseline and above the floor; a high baseline hides it."""
    now = time.time()
    # "steady": always ~20% failing -> no spike; "spiking": 2% baseline, 30% now -> spike.
    insert_runs(alert_store, agent="steady", at=now - 1200, count=100, failed=20, spread_s=HOUR)
    insert_runs(alert_store, agent="steady", at=now, count=30, failed=6, spread_s=600)
    insert_runs(alert_store, agent="spiking", at=now - 1200, count=100, failed=2, spread_s=HOUR)
    insert_runs(alert_store, agent="spiking", at=now, count=30, failed=9, spread_s=600)
    condition = FailureRateSpike(window_s=900, baseline_s=6 * HOUR, factor=2.0, floor=0.1, min_runs=20)
    seen = by_agent(condition.observe(alert_store, Scope(), now))
    assert seen["spiking"].active
    assert seen["spiking"].value == 9 / 30
    assert seen["spiking"].threshold == 0.1  # 2 x 2% is below the floor
    assert "9/30 runs failed" in seen["spiking"].detail
    assert not seen["steady"].active
    assert seen["steady"].threshold == 0.4  # 2 x 20%


def test_failure_spike_needs_min_runs(alert_store: Any) -> None:
    """A handful of failed runs is observed but never active below min_runs."""
    now = time.time()
    insert_runs(alert_store, agent="tiny", at=now, count=3, failed=3)
    (observation,) = FailureRateSpike(min_runs=20).observe(alert_store, Scope(), now)
    assert observation.value == 1.0
    assert not observation.active
    assert "fewer than min_runs=20" in observation.detail
    assert observation.too_few  # a firing alert resolves "for lack of data", not as if it cleared


def test_failure_spike_reads_latest_version_and_skips_deleted(alert_store: Any) -> None:
    """Re-assembled runs count once (their newest version); deleted runs not at all."""
    now = time.time()
    insert_runs(alert_store, agent="a", at=now, count=20, failed=20)
    keys = alert_store.query("SELECT TraceId, RootSpanId FROM trajectories ORDER BY TraceId")
    # A newer version of every run says it succeeded; half of them are deleted.
    again = [
        agent_run(start=now - 10, trace_id=trace, root_span_id=root, agent="a", task="refund")
        for trace, root in keys
    ]
    insert_trajectories(
        alert_store,
        [deleted_row(run, version=2) if i % 2 else run_row(run, revision=2) for i, run in enumerate(again)],
    )
    (observation,) = FailureRateSpike(min_runs=1).observe(alert_store, Scope(), now)
    assert observation.value == 0.0
    assert observation.detail.startswith("0/10 runs failed")


def test_scope_filters_and_groups_by_task(alert_store: Any) -> None:
    """filter.agent narrows the runs; group_by task splits alerts per task."""
    now = time.time()
    insert_runs(alert_store, agent="a", task="refund", at=now, count=20, failed=10)
    insert_runs(alert_store, agent="a", task="faq", at=now, count=20, failed=0)
    insert_runs(alert_store, agent="b", task="refund", at=now, count=20, failed=20)
    scope = Scope(agents=("a",), group_by=("agent", "task"))
    seen = {
        (o.labels["agent"], o.labels["task"]): o.active
        for o in FailureRateSpike(min_runs=5).observe(alert_store, scope, now)
    }
    assert seen == {("a", "refund"): True, ("a", "faq"): False}


def test_metric_below_counts_each_run_once(alert_store: Any) -> None:
    """The mean is over runs (newest score per run), and needs min_count scores."""
    now = time.time()
    insert_scores(alert_store, agent="a", metric="trajectory_recall", at=now, values=[0.2] * 10 + [1.0] * 10)
    insert_scores(alert_store, agent="b", metric="trajectory_recall", at=now, values=[0.0] * 5)
    insert_scores(alert_store, agent="a", metric="other", at=now, values=[0.0] * 50)
    condition = MetricBelow(metric="trajectory_recall", threshold=0.7, min_count=10)
    seen = by_agent(condition.observe(alert_store, Scope(), now))
    assert seen["a"].active
    assert abs((seen["a"].value or 0) - 0.6) < 1e-9
    assert not seen["b"].active  # 5 scores < min_count


def test_latency_percentile_above_threshold(alert_store: Any) -> None:
    """p95 over the window is compared with threshold_s."""
    now = time.time()
    insert_runs(alert_store, agent="slow", at=now, count=20, latency_s=9.0)
    insert_runs(alert_store, agent="fast", at=now, count=20, latency_s=0.5)
    seen = by_agent(LatencyAbove(threshold_s=5.0, quantile=0.95).observe(alert_store, Scope(), now))
    assert seen["slow"].active
    assert seen["slow"].value == 9.0
    assert not seen["fast"].active


def test_tool_error_rate_per_tool(alert_store: Any) -> None:
    """Each tool is its own group; only the failing tool is active."""
    now = time.time()
    insert_runs(alert_store, agent="a", at=now, count=10, tools=[("search", "ok"), ("pay", "error")])
    insert_runs(alert_store, agent="a", at=now, count=10, tools=[("search", "ok"), ("pay", "ok")])
    seen = {
        o.labels["tool"]: o
        for o in ToolErrorRate(threshold=0.2, min_calls=10).observe(alert_store, Scope(), now)
    }
    assert seen["pay"].active
    assert seen["pay"].value == 0.5
    assert not seen["search"].active
    assert seen["search"].labels == {"agent": "a", "tool": "search"}


def test_drift_event_in_window(alert_store: Any) -> None:
    """A Drifted=1 event inside the window is active; an old one or Drifted=0 is not observed."""
    now = time.time()
    insert_drift(alert_store, agent="a", metric="trajectory_recall", at=now - 60)
    insert_drift(alert_store, agent="b", metric="trajectory_recall", at=now - 3 * HOUR)
    insert_drift(alert_store, agent="c", metric="trajectory_recall", at=now - 60, drifted=False)
    observations = DriftDetected(window_s=HOUR).observe(alert_store, Scope(), now)
    assert [o.labels for o in observations] == [{"agent": "a", "metric": "trajectory_recall"}]
    assert observations[0].active
    assert "mann_whitney p=0.001" in observations[0].detail
    assert observations[0].detail.endswith("; recent window lower")  # a plain-text detail as it is


def test_drift_summary_reads_the_events_detail_as_text(alert_store: Any) -> None:
    """The detail the drift monitor stores (a JSON object) reads as words in the alert's summary,
    which the console, `agenttrail alerts` and webhooks show, not as raw JSON."""
    now = time.time()
    stored = DriftResult(
        "a", "", "failure_rate", "two_proportion_z", "drift", 0.00018, 0.00088, 0.755, "cohens_h",
        64, 38, 0.033, 0.283, datetime.now(UTC), datetime.now(UTC), "version 1.0", "fewer runs than usual",
    )  # fmt: skip
    detail = event_detail(stored)  # as the drift monitor writes it
    insert_drift(alert_store, agent="a", metric="failure_rate", at=now - 60, detail=detail)
    [observation] = DriftDetected(window_s=HOUR).observe(alert_store, Scope(), now)
    assert observation.detail.endswith(
        "; adjusted p=0.00088, effect size as cohens_h, baseline version 1.0, fewer runs than usual"
    ), observation.detail
    assert "{" not in observation.detail


def test_a_change_detectors_drift_summary_says_where_it_alarmed(alert_store: Any) -> None:
    """A Page-Hinkley drift (no p-value) reads as its alarm and threshold in the alert's summary,
    not "p=-" and the detector's raw JSON."""
    now = time.time()
    alarm = '{"change_at_run": 37, "direction": "up", "threshold": 12.0}'
    stored = DriftResult(
        "a", "", "latency", "page_hinkley", "drift", None, None, 0.91, "mean_shift_sd",
        300, 120, 1.08, 1.79, datetime.now(UTC), datetime.now(UTC), "24h", alarm,
    )  # fmt: skip
    insert_drift(
        alert_store,
        agent="a",
        metric="latency",
        at=now - 60,
        detail=event_detail(stored),
        test="page_hinkley",
        p_value=None,
    )
    [observation] = DriftDetected(window_s=HOUR).observe(alert_store, Scope(), now)
    assert observation.detail.startswith("page_hinkley effect size"), observation.detail
    assert observation.detail.endswith(
        "; effect size as mean_shift_sd, baseline 24h, alarm at run 38, up; threshold 12 sd"
    )
    assert "{" not in observation.detail
