"""Drift's definitions before it was made fast, kept to compare the fast paths against.

`reference_windows` is the loading of 5789263..cb984a0 (drift.py's `analyse_drift` then): it
counts each window's runs, then reads every run and score of the span through FINAL and keeps
those whose run-id hash is under their window's limit, with no condition before FINAL. The
test functions are significance.py's and changepoint.py's sums over Python lists as they were.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from agenttrail.collector.store import Store
from agenttrail.evaluators.monitoring import sources
from agenttrail.evaluators.monitoring.changepoint import BernoulliCusum, ChangePoint
from agenttrail.evaluators.monitoring.drift import (
    FAILURE_RATE,
    LATENCY,
    RUN_DRIFT_METRICS,
    TRAJECTORY_LENGTH,
    DriftQuery,
    DriftSettings,
    Samples,
)
from agenttrail.evaluators.monitoring.significance import TestOutcome
from agenttrail.evaluators.monitoring.sources import RUN_METRICS, filter_clauses, runs_sql, scores_sql, ts6

_HASH_MAX = 2**64 - 1
_MULTI_VERSION = """
SELECT Metric FROM {table}
WHERE RunStart >= {{since:DateTime64(6)}} AND RunStart < {{until:DateTime64(6)}}
GROUP BY Metric HAVING uniqExact(EvaluatorVersion) > 1
"""

_MULTI_VERSION_ANYWHERE = "SELECT Metric FROM {table} GROUP BY Metric HAVING uniqExact(EvaluatorVersion) > 1"


def reference_windows(
    store: Store, query: DriftQuery, settings: DriftSettings
) -> dict[str, tuple[Samples, Samples]]:
    recent_start, recent_end = query.recent_window()
    baseline_start, baseline_end = query.baseline_window()
    params: dict[str, Any] = {
        "recent_start": ts6(recent_start.timestamp()),
        "recent_end": ts6(recent_end.timestamp()),
        "baseline_start": ts6(baseline_start.timestamp()) if baseline_start else ts6(0),
        "baseline_end": ts6(baseline_end.timestamp()) if baseline_end else ts6(recent_end.timestamp()),
        "version": query.baseline.version or "",
    }
    filters, filter_params = filter_clauses((("Agent", "agent", query.agent), ("Task", "task", query.task)))
    params.update(filter_params)
    bounds = (params["baseline_start"], params["baseline_end"], params["recent_start"], params["recent_end"])
    params.update(span_start=min(bounds, key=float), span_end=max(bounds, key=float))
    windows: dict[str, tuple[Samples, Samples]] = {}

    def samples(agent: str, window: int) -> Samples:
        if agent not in windows:
            windows[agent] = (Samples(), Samples())
        return windows[agent][window]

    run_window = _window_sql("Start", "AgentVersion = {version:String}", query.baseline.version is not None)
    in_span = _between("Start", "span_start", "span_end")
    counts = store.query(
        runs_sql([*filters, in_span, f"({run_window}) >= 0"], f"Agent, {run_window} AS w, count()")
        + " GROUP BY Agent, w",
        params,
    )
    keys = [f"{agent}/{window}" for agent, window, _ in counts]
    limits = [min(_HASH_MAX, int(_HASH_MAX * settings.max_samples / n)) for _, _, n in counts]
    params.update(keep_keys=keys, keep_limits=limits)
    keep = (
        "cityHash64(TraceId, RootSpanId) <= {keep_limits:Array(UInt64)}"
        "[indexOf({keep_keys:Array(String)}, concat(Agent, '/', toString(w)))]"
    )
    columns = f"Agent, {run_window} AS w, Start, TraceId, RootSpanId, Failure, LatencyS, ToolCount, ToolNames"
    per_window = (
        "SELECT Agent, w, length(runs), arrayMap(r -> toFloat64(r.4), runs), arrayMap(r -> r.5, runs), "
        "arrayMap(r -> toFloat64(r.6), runs), tools.1, tools.2 FROM ("
        "SELECT Agent, w, arraySort(groupArray((Start, TraceId, RootSpanId, Failure, LatencyS, ToolCount))) "
        "AS runs, sumMap(ToolNames, arrayMap(name -> toUInt64(1), ToolNames)) AS tools "
        f"FROM ({runs_sql([*filters, in_span, 'w >= 0', keep], columns)}) GROUP BY Agent, w)"
    )
    for agent, window, count, failures, latencies, lengths, names, calls in store.query(per_window, params):
        target = samples(agent, window)
        target.runs = int(count)
        target.values[FAILURE_RATE] = failures
        target.values[LATENCY] = latencies
        target.values[TRAJECTORY_LENGTH] = lengths
        target.tools = Counter(dict(zip(names, (int(c) for c in calls), strict=True)))
    if not query.metrics or set(query.metrics) - set(RUN_DRIFT_METRICS):
        _load_scores(store, query, filters, params, keep, samples)
    return windows


def _window_sql(start_column: str, in_version: str, by_version: bool) -> str:
    recent = _between(start_column, "recent_start", "recent_end")
    baseline = _between(start_column, "baseline_start", "baseline_end")
    if by_version:
        recent += f" AND NOT ({in_version})"
        baseline += f" AND ({in_version})"
    return f"multiIf({recent}, 1, {baseline}, 0, -1)"


def _between(column: str, start: str, end: str) -> str:
    return f"{column} >= {{{start}:DateTime64(6)}} AND {column} < {{{end}:DateTime64(6)}}"


def _load_scores(
    store: Store, query: DriftQuery, filters: list[str], params: dict[str, Any], keep: str, samples: Any
) -> None:
    in_version = (
        "(TraceId, RootSpanId) IN ("
        + runs_sql(["AgentVersion = {version:String}"], "TraceId, RootSpanId")
        + ")"
    )
    window = _window_sql("RunStart", in_version, query.baseline.version is not None)
    in_span = _between("RunStart", "span_start", "span_end")
    where = [*filters, in_span, "Metric NOT IN {run_metrics:Array(String)}"]
    params = {**params, "run_metrics": list(RUN_METRICS)}
    if query.metrics:
        where.append("Metric IN {metrics:Array(String)}")
        params["metrics"] = list(query.metrics)
    multi = _MULTI_VERSION.format(table=sources.SOURCE.scores)
    if not sources.SOURCE.keyed_by_start:  # the base tables keep a moved run's rows of another
        # version under its old start (the rollups delete them: migration 124), so a metric two
        # versions scored anywhere takes each run's latest score
        multi = _MULTI_VERSION_ANYWHERE.format(table=sources.SOURCE.scores)
    # Over the whole span: a fixed baseline may end after the recent window does.
    span = {"since": params["span_start"], "until": params["span_end"]}
    params["multi_version"] = [row[0] for row in store.query(multi, span)]
    per_window = (
        "SELECT Agent, w, Metric, arrayMap(s -> s.4, arraySort(groupArray("
        "(RunStart, TraceId, RootSpanId, assumeNotNull(Score))))) "
        f"FROM (SELECT *, {window} AS w FROM ({scores_sql(where)})) "
        f"WHERE w >= 0 AND Score IS NOT NULL AND {keep} GROUP BY Agent, w, Metric"
    )
    for agent, window_index, metric, scores in store.query(per_window, params):
        samples(agent, window_index).values[metric] = scores


def two_proportion_z(baseline: Sequence[float], recent: Sequence[float]) -> TestOutcome:
    n1, n2 = len(baseline), len(recent)
    p1, p2 = sum(baseline) / n1, sum(recent) / n2
    pooled = (p1 * n1 + p2 * n2) / (n1 + n2)
    variance = pooled * (1 - pooled) * (1 / n1 + 1 / n2)
    if variance <= 0:
        p_value = 1.0
    else:
        from scipy import stats

        z = (p2 - p1) / math.sqrt(variance)
        p_value = float(2 * stats.norm.sf(abs(z)))
    h = 2 * math.asin(math.sqrt(p2)) - 2 * math.asin(math.sqrt(p1))
    return TestOutcome("two_proportion_z", min(1.0, max(0.0, p_value)), h, "cohens_h")


def mann_whitney(baseline: Sequence[float], recent: Sequence[float]) -> TestOutcome:
    if constant_and_equal(baseline, recent):
        return TestOutcome("mann_whitney_u", 1.0, 0.0, "cliffs_delta")
    from scipy import stats

    result = stats.mannwhitneyu(recent, baseline, alternative="two-sided", method="asymptotic")
    delta = 2 * float(result.statistic) / (len(recent) * len(baseline)) - 1
    p_value = float(result.pvalue)
    return TestOutcome(
        "mann_whitney_u", 1.0 if math.isnan(p_value) else min(1.0, max(0.0, p_value)), delta, "cliffs_delta"
    )


def constant_and_equal(baseline: Sequence[float], recent: Sequence[float]) -> bool:
    first = baseline[0]
    return all(v == first for v in baseline) and all(v == first for v in recent)


def mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def detect_rate_change(
    baseline: Sequence[float], recent: Sequence[float], *, shift_h: float = 0.2, threshold: float = 10.0
) -> ChangePoint | None:
    n = len(baseline)
    p0 = min(max(sum(baseline) / n, 0.5 / n), 1 - 0.5 / n)
    detector = BernoulliCusum(p0, shift_h=shift_h, threshold=threshold)
    ones = np.asarray(recent, dtype=float) >= 0.5
    first: int | None = None
    for if_one, if_zero in detector.sides:
        sums = np.cumsum(np.where(ones, if_one, if_zero))
        above = np.flatnonzero(sums - np.minimum(np.minimum.accumulate(sums), 0.0) > threshold)
        if len(above) and (first is None or above[0] < first):
            first = int(above[0])
    if first is None:
        return None
    after = recent[first:]
    rate = sum(after) / len(after)
    h = 2 * math.asin(math.sqrt(rate)) - 2 * math.asin(math.sqrt(sum(baseline) / n))
    return ChangePoint(first, 1 if h >= 0 else -1, h)
