"""Drift: does an agent's recent window differ from its baseline, metric by metric?

The baseline is a fixed past period, a rolling window just before the recent one, or the runs
of a pinned agent version. Per agent, each metric gets the test that fits its data
(significance.py): failure rate and pass/fail scores (values all in {0, 1}) a two-proportion
z-test; latency and continuous scores Mann-Whitney U and Kolmogorov-Smirnov; trajectory length
Mann-Whitney U; the tools used a chi-square test on call counts; and failure, latency and
scores also a Page-Hinkley change-point detector over the recent runs in time order
(changepoint.py), for drift too gradual to move a window's average.

Calling drift, per agent:
- a window with fewer than `min_samples` values is "insufficient data", never drift;
- multiple comparisons: the p-values of all tests of an agent (every metric and test) are
  Benjamini-Hochberg adjusted, and a test calls drift when its adjusted p <= `alpha` AND its
  effect size reaches `min_effect` (so a huge window does not call a negligible shift drift);
- Page-Hinkley has no p-value: its false-alarm rate is set by its threshold (changepoint.py).
Windows larger than `max_samples` runs are sampled uniformly by run-id hash.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agenttrail.collector.queries import QueryError, iso_utc, parse_time
from agenttrail.collector.store import Store
from agenttrail.evaluators.monitoring import significance, sources
from agenttrail.evaluators.monitoring.changepoint import ChangePoint, detect_change, detect_rate_change
from agenttrail.evaluators.monitoring.drift_counts import window_counts
from agenttrail.evaluators.monitoring.rollups import SAMPLE_LIMIT
from agenttrail.evaluators.monitoring.sources import (
    RUN_METRICS,
    filter_clauses,
    hours_of_split_runs,
    multi_version_metrics,
    overlap_bounds,
    runs_sql,
    scores_sql,
    ts6,
)
from agenttrail.evaluators.monitoring.stats import split_list
from agenttrail.evaluators.monitoring.timespec import format_duration, parse_duration_s

FAILURE_RATE = "failure_rate"
LATENCY = "latency"
TRAJECTORY_LENGTH = "trajectory_length"
TOOL_DISTRIBUTION = "tool_distribution"
RUN_DRIFT_METRICS = (FAILURE_RATE, LATENCY, TRAJECTORY_LENGTH, TOOL_DISTRIBUTION)
PAGE_HINKLEY = "page_hinkley"
BERNOULLI_CUSUM = "bernoulli_cusum"

# Conventional "small effect" thresholds: Cohen (h, V), Romano et al. 2006 (Cliff's delta).
DEFAULT_MIN_EFFECT: Mapping[str, float] = {
    "cohens_h": 0.2,
    "cliffs_delta": 0.147,
    "ks_d": 0.1,
    "cramers_v": 0.1,
}

STATUS_DRIFT = "drift"
STATUS_STABLE = "no_drift"
STATUS_INSUFFICIENT = "insufficient_data"
_HASH_MAX = 2**64 - 1
FloatArray = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class DriftSettings:
    """How drift is called (the `drift:` config section holds the same knobs)."""

    min_samples: int = 30
    alpha: float = 0.01
    min_effect: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_MIN_EFFECT))
    change_delta: float = 0.5
    change_threshold: float = 12.0  # Page-Hinkley, in baseline sd
    rate_change_threshold: float = 10.0  # Bernoulli CUSUM, in log-likelihood ratio
    max_samples: int = 20_000

    def __post_init__(self) -> None:
        if self.min_samples < 2:
            raise QueryError(f"min_samples {self.min_samples} must be at least 2")
        if not 0 < self.alpha < 1:
            raise QueryError(f"alpha {self.alpha} must be between 0 and 1")
        unknown = set(self.min_effect) - set(DEFAULT_MIN_EFFECT)
        if unknown:
            raise QueryError(
                f"min_effect: unknown effect size(s) {sorted(unknown)}; known: {sorted(DEFAULT_MIN_EFFECT)}"
            )
        if self.max_samples < self.min_samples:
            raise QueryError(
                f"max_samples {self.max_samples} must be at least min_samples {self.min_samples}"
            )


@dataclass(frozen=True, slots=True)
class Baseline:
    """Exactly one of: a rolling window just before the recent one, a fixed period, a version."""

    rolling_s: int | None = None
    since: datetime | None = None
    until: datetime | None = None
    version: str | None = None  # optionally limited to [since, until)

    def __post_init__(self) -> None:
        fixed = self.since is not None or self.until is not None
        if self.version is None and (self.rolling_s is None) == (not fixed):
            raise QueryError(
                "give one baseline: a rolling window (24h), a fixed period (from/to), or a version"
            )
        if self.version is not None and self.rolling_s is not None:
            raise QueryError("a version baseline takes an optional fixed period, not a rolling window")
        if fixed and (self.since is None or self.until is None or self.until <= self.since):
            raise QueryError("a fixed baseline needs both a start and a later end")

    def describe(self) -> str:
        if self.rolling_s is not None:
            return f"the {format_duration(self.rolling_s)} before"
        period = (
            f"{iso_utc(_us(self.since))}..{iso_utc(_us(self.until))}" if self.since and self.until else ""
        )
        if self.version is not None:
            return f"version {self.version}" + (f" in {period}" if period else "")
        return period


def _us(moment: datetime | None) -> int:
    assert moment is not None
    return int(moment.timestamp() * 1e6)


@dataclass(frozen=True, slots=True)
class DriftQuery:
    recent_s: int
    baseline: Baseline
    agent: str | None = None
    task: str | None = None
    metrics: tuple[str, ...] = ()  # empty: every metric
    now: datetime | None = None  # end of the recent window; default: now

    def recent_window(self) -> tuple[datetime, datetime]:
        end = self.now or datetime.now(UTC)
        return end - timedelta(seconds=self.recent_s), end

    def baseline_window(self) -> tuple[datetime | None, datetime | None]:
        if self.baseline.rolling_s is not None:
            start, _ = self.recent_window()
            return start - timedelta(seconds=self.baseline.rolling_s), start
        return self.baseline.since, self.baseline.until

    def to_params(self) -> dict[str, str]:
        params = {"recent": format_duration(self.recent_s)}
        baseline = self.baseline
        optional = {
            "baseline": format_duration(baseline.rolling_s) if baseline.rolling_s else None,
            "baseline_from": baseline.since.isoformat() if baseline.since else None,
            "baseline_to": baseline.until.isoformat() if baseline.until else None,
            "baseline_version": baseline.version,
            "agent": self.agent,
            "task": self.task,
            "metric": ",".join(self.metrics),
            "now": self.now.isoformat() if self.now else None,
        }
        params.update({key: value for key, value in optional.items() if value})
        return params

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> DriftQuery:
        known = {
            "recent",
            "baseline",
            "baseline_from",
            "baseline_to",
            "baseline_version",
            "agent",
            "task",
            "metric",
            "now",
        }
        unknown = set(params) - known
        if unknown:
            raise QueryError(f"unknown parameter(s) {sorted(unknown)}; use {', '.join(sorted(known))}")
        now = parse_time(params["now"]) if params.get("now") else None
        given_from, given_to = params.get("baseline_from"), params.get("baseline_to")
        rolling = params.get("baseline")
        if not (rolling or given_from or given_to or params.get("baseline_version")):
            rolling = "24h"
        return cls(
            recent_s=parse_duration_s(params.get("recent") or "1h", what="recent window", low_s=60),
            baseline=Baseline(
                rolling_s=parse_duration_s(rolling, what="baseline window", low_s=60) if rolling else None,
                since=parse_time(given_from, now=now) if given_from else None,
                until=parse_time(given_to, now=now) if given_to else None,
                version=params.get("baseline_version") or None,
            ),
            agent=params.get("agent") or None,
            task=params.get("task") or None,
            metrics=split_list(params.get("metric")),
            now=now,
        )


@dataclass(slots=True)
class Samples:
    """One window of one agent: per metric the per-run values in time order (a list, or the
    float array the store's windows load), and tool-call counts."""

    values: dict[str, Sequence[float] | FloatArray] = field(default_factory=dict)
    tools: Counter[str] = field(default_factory=Counter)
    runs: int = 0

    def add(self, metric: str, value: float) -> None:
        values = self.values.setdefault(metric, [])
        assert isinstance(values, list), "add() builds a window value by value"
        values.append(value)


@dataclass(frozen=True, slots=True)
class DriftResult:
    agent: str
    task: str
    metric: str
    test: str
    status: str
    p_value: float | None
    p_adjusted: float | None
    effect_size: float | None
    effect: str
    baseline_n: int
    recent_n: int
    baseline_value: float | None  # window mean (the rate for proportions)
    recent_value: float | None
    window_start: datetime
    window_end: datetime
    baseline: str
    detail: str = ""

    @property
    def drifted(self) -> bool:
        return self.status == STATUS_DRIFT

    def to_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "task": self.task,
            "metric": self.metric,
            "test": self.test,
            "status": self.status,
            "drifted": self.drifted,
            "p_value": self.p_value,
            "p_adjusted": self.p_adjusted,
            "effect_size": self.effect_size,
            "effect": self.effect,
            "baseline_n": self.baseline_n,
            "recent_n": self.recent_n,
            "baseline_value": self.baseline_value,
            "recent_value": self.recent_value,
            "window_start": iso_utc(_us(self.window_start)),
            "window_end": iso_utc(_us(self.window_end)),
            "baseline": self.baseline,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class DriftContext:
    """What every result of one agent's comparison shares."""

    agent: str
    task: str
    window_start: datetime
    window_end: datetime
    baseline: str


def compare(
    context: DriftContext,
    baseline: Samples,
    recent: Samples,
    settings: DriftSettings,
    metrics: Sequence[str] = (),
) -> list[DriftResult]:
    """Every test of one agent's two windows, with drift called as the module docstring says. Pure."""
    results: list[DriftResult] = []
    names = sorted(set(baseline.values) | set(recent.values))
    for metric in names:
        if metrics and metric not in metrics:
            continue
        results.extend(
            _scalar_tests(
                context,
                metric,
                _array(baseline.values.get(metric, ())),
                _array(recent.values.get(metric, ())),
                settings,
            )
        )
    if not metrics or TOOL_DISTRIBUTION in metrics:
        results.append(_tool_test(context, baseline, recent, settings))
    return _call_drift(results, settings)


def _kind(metric: str, baseline: FloatArray, recent: FloatArray) -> str:
    if metric == TRAJECTORY_LENGTH:
        return "length"
    if metric == FAILURE_RATE or (metric != LATENCY and _binary(baseline) and _binary(recent)):
        return "proportion"
    return "continuous"


def _binary(values: FloatArray) -> bool:
    """Every value is 0 or 1."""
    return bool(np.all((values == 0.0) | (values == 1.0)))


# Per kind of data, the tests run; per test, its function (None: the change-point detector).
_TESTS = {
    "proportion": ("two_proportion_z", BERNOULLI_CUSUM),
    "continuous": ("mann_whitney_u", "kolmogorov_smirnov", PAGE_HINKLEY),
    "length": ("mann_whitney_u",),
}
_TWO_SAMPLE = {
    "two_proportion_z": (significance.two_proportion_z, "cohens_h"),
    "mann_whitney_u": (significance.mann_whitney, "cliffs_delta"),
    "kolmogorov_smirnov": (significance.kolmogorov_smirnov, "ks_d"),
}


def _scalar_tests(
    context: DriftContext, metric: str, baseline: FloatArray, recent: FloatArray, settings: DriftSettings
) -> list[DriftResult]:
    """The tests of one metric, on the windows' values as float arrays (converted once: the
    tests' own conversions of lists took most of their time)."""
    kind = _kind(metric, baseline, recent)
    base = _result(context, metric, baseline, recent)
    enough = len(baseline) >= settings.min_samples and len(recent) >= settings.min_samples
    results = []
    for name in _TESTS[kind]:
        if not enough:
            effect = _TWO_SAMPLE[name][1] if name in _TWO_SAMPLE else _CHANGE_EFFECT[name]
            results.append(_insufficient(base, name, effect, settings))
        elif name in _CHANGE_EFFECT:
            change = _change_point(name, baseline, recent, settings)
            found: dict[str, object] = (
                {"change_at_run": change.index, "direction": "up" if change.direction > 0 else "down"}
                if change
                else {}
            )
            # What the detector has instead of a p-value: the threshold it alarms past.
            found["threshold"] = (
                settings.rate_change_threshold if name == BERNOULLI_CUSUM else settings.change_threshold
            )
            results.append(
                replace(
                    base,
                    test=name,
                    effect=_CHANGE_EFFECT[name],
                    status=STATUS_DRIFT if change else STATUS_STABLE,
                    effect_size=change.shift if change else None,
                    detail=json.dumps(found),
                )
            )
        else:
            test, effect = _TWO_SAMPLE[name]
            outcome = test(baseline, recent)
            results.append(
                replace(
                    base, test=name, effect=effect, p_value=outcome.p_value, effect_size=outcome.effect_size
                )
            )
    return results


_CHANGE_EFFECT = {PAGE_HINKLEY: "mean_shift_sd", BERNOULLI_CUSUM: "cohens_h"}


def _change_point(
    name: str, baseline: FloatArray, recent: FloatArray, settings: DriftSettings
) -> ChangePoint | None:
    if name == BERNOULLI_CUSUM:
        shift = settings.min_effect.get("cohens_h", DEFAULT_MIN_EFFECT["cohens_h"])
        return detect_rate_change(baseline, recent, shift_h=shift, threshold=settings.rate_change_threshold)
    return detect_change(baseline, recent, delta=settings.change_delta, threshold=settings.change_threshold)


def _tool_test(
    context: DriftContext, baseline: Samples, recent: Samples, settings: DriftSettings
) -> DriftResult:
    base = replace(
        _result(context, TOOL_DISTRIBUTION, _array(()), _array(())),
        test="chi_square",
        effect="cramers_v",
        baseline_n=baseline.runs,
        recent_n=recent.runs,
        baseline_value=None,
        recent_value=None,
    )
    if baseline.runs < settings.min_samples or recent.runs < settings.min_samples:
        return _insufficient(base, "chi_square", "cramers_v", settings)
    outcome = significance.chi_square_counts(baseline.tools, recent.tools)
    return replace(
        base,
        p_value=outcome.p_value,
        effect_size=outcome.effect_size,
        detail=json.dumps(_share_changes(baseline.tools, recent.tools)),
    )


def _share_changes(baseline: Counter[str], recent: Counter[str], top: int = 3) -> dict[str, Any]:
    """The tools whose share of calls moved most, for the report."""
    b_total, r_total = sum(baseline.values()) or 1, sum(recent.values()) or 1
    moves = {name: recent[name] / r_total - baseline[name] / b_total for name in set(baseline) | set(recent)}
    largest = sorted(moves.items(), key=lambda item: -abs(item[1]))[:top]
    return {"share_change": {name: round(change, 4) for name, change in largest}}


def _result(context: DriftContext, metric: str, baseline: FloatArray, recent: FloatArray) -> DriftResult:
    return DriftResult(
        agent=context.agent,
        task=context.task,
        metric=metric,
        test="",
        status=STATUS_STABLE,
        p_value=None,
        p_adjusted=None,
        effect_size=None,
        effect="",
        baseline_n=len(baseline),
        recent_n=len(recent),
        baseline_value=_mean(baseline),
        recent_value=_mean(recent),
        window_start=context.window_start,
        window_end=context.window_end,
        baseline=context.baseline,
    )


def _insufficient(base: DriftResult, test: str, effect: str, settings: DriftSettings) -> DriftResult:
    return replace(
        base,
        test=test,
        effect=effect,
        status=STATUS_INSUFFICIENT,
        detail=(
            f"insufficient data: baseline n={base.baseline_n}, recent n={base.recent_n}; "
            f"drift is only called with at least {settings.min_samples} per window"
        ),
    )


def _mean(values: FloatArray) -> float | None:
    """The mean of the exactly rounded sum (math.fsum). Whole finite values (0/1 rates, lengths)
    below 2**53 in all sum exactly in any order, so numpy's sum is fsum's there, without the
    list fsum needs."""
    if not len(values):
        return None
    values = np.asarray(values, dtype=np.float64)
    whole = np.abs(values).sum() < 2.0**53 and bool(np.all(np.floor(values) == values))
    return float(values.sum()) / len(values) if whole else math.fsum(values.tolist()) / len(values)


def _call_drift(results: list[DriftResult], settings: DriftSettings) -> list[DriftResult]:
    """Benjamini-Hochberg across the agent's p-values, then alpha and the minimum effect size."""
    tested = [i for i, r in enumerate(results) if r.p_value is not None]
    adjusted = significance.benjamini_hochberg([results[i].p_value or 0.0 for i in tested])
    called = list(results)
    for index, q in zip(tested, adjusted, strict=True):
        result = results[index]
        large = abs(result.effect_size or 0.0) >= settings.min_effect.get(result.effect, 0.0)
        status = STATUS_DRIFT if q <= settings.alpha and large else STATUS_STABLE
        called[index] = replace(result, p_adjusted=q, status=status)
    return called


# -- loading windows from ClickHouse -----------------------------------------------------------


def analyse_drift(
    store: Store, query: DriftQuery, settings: DriftSettings | None = None
) -> list[DriftResult]:
    """Drift results for every agent with runs in either window (or the one asked for)."""
    settings = settings or DriftSettings()
    recent_start, recent_end = query.recent_window()
    windows = load_windows(store, query, settings)
    results: list[DriftResult] = []
    for agent in sorted(windows):
        context = DriftContext(agent, query.task or "", recent_start, recent_end, query.baseline.describe())
        baseline, recent = windows[agent]
        results.extend(compare(context, baseline, recent, settings, query.metrics))
    return results


def load_windows(
    store: Store, query: DriftQuery, settings: DriftSettings
) -> dict[str, tuple[Samples, Samples]]:
    """Per agent, its (baseline, recent) samples: each window's runs, or a sample of
    `max_samples` of them picked by run-id hash, with their values in time order.

    The first query counts each window's runs (drift_counts.py), which sets the hash limit of its sample; the
    others read only the runs and scores under those limits. The limits are conditions on the
    rollups' sorting key (the run's ids, its agent and start; for scores, the window's largest
    limit), so they filter before FINAL: FINAL de-duplicates the sample only, not the period.
    A window whose limits are at most `rollups.SAMPLE_LIMIT` is read from the rollups' hash
    sample tables, which hold a quarter of the runs (a hash sample is spread over every granule
    of a time-sorted table; there it reads a quarter of them). The same runs either way.
    """
    filters, params = window_params(query)
    windows: dict[str, tuple[Samples, Samples]] = {}

    def samples(agent: str, window: int) -> Samples:
        if agent not in windows:
            windows[agent] = (Samples(), Samples())
        return windows[agent][window]

    window_of = run_window(query)
    # Exact counts, whole hours from the hourly rollups where they still match (drift_counts.py).
    counts = window_counts(store, filters, params, window_of)
    if any(n >= settings.min_samples for _, _, n in counts):
        significance.warm_up()  # tests will run: their import overlaps the reads below
    # Per agent, each window's hash limit (0: the window has none of its runs).
    agents = sorted({agent for agent, _, _ in counts})
    limits = [[0] * len(agents), [0] * len(agents)]
    for agent, window, n in counts:
        limits[window][agents.index(agent)] = min(_HASH_MAX, int(_HASH_MAX * settings.max_samples / n))
    params.update(
        agents=agents,
        baseline_limits=limits[0],
        recent_limits=limits[1],
        keep_baseline=max(limits[0], default=0),
        keep_recent=max(limits[1], default=0),
    )
    keep = f"{_RUN_HASH} <= if(w = 1, {_limit('recent')}, {_limit('baseline')})"
    parts = _parts(limits)
    # Per part (the windows read from one table): before FINAL, on the sorting key, a run under
    # its agent's limit for a window of the part its start is in. It keeps every run `keep`
    # keeps (a run's window needs its start in that window).
    run_parts = []
    for tables, part in parts:
        run_sample = f"{_RUN_HASH} <= " + _greatest(
            f"if({_between('Start', f'{_WINDOWS[w]}_start', f'{_WINDOWS[w]}_end')}, {_limit(_WINDOWS[w])}, 0)"
            for w in part
        )
        columns = (
            f"Agent, {window_of('Start')} AS w, "
            "Start, TraceId, RootSpanId, Failure, LatencyS, ToolCount, ToolNames"
        )
        where = [*filters, _part_span("Start", part), _in_part(part), keep]
        run_parts.append(runs_sql(where, columns, prewhere=[run_sample], tables=tables))

    # One row per (agent, window): its runs' values in time order and its tool-call counts, built
    # in ClickHouse (a row per run into Python cost more than the tests that follow). Sorted by
    # start alone (an integer key, not tuples holding the ids), and by the run's ids too only
    # where two runs of a window share a start, as the scores are.
    def per_window(order: str, key: str, first: int) -> str:
        values = ", ".join(f"arrayMap(r -> toFloat64(r.{first + i}), runs)" for i in range(3))
        return (
            f"SELECT Agent, w, length(runs), {values}, tools.1, tools.2, {_shared_start('runs')} FROM ("
            f"SELECT Agent, w, arraySort({key}, groupArray({order})) AS runs, "
            "sumMap(ToolNames, arrayWithConstant(length(ToolNames), toUInt64(1))) AS tools "
            f"FROM ({' UNION ALL '.join(run_parts)}) "
            "GROUP BY Agent, w)"
        )

    measures = "Failure, LatencyS, ToolCount"
    rows = store.query(per_window(f"(toUnixTimestamp64Micro(Start), {measures})", "r -> r.1", 2), params)
    if any(shared for *_, shared in rows):
        rows = store.query(per_window(f"(Start, TraceId, RootSpanId, {measures})", "r -> r", 4), params)
    for agent, window, count, failures, latencies, lengths, names, calls, _ in rows:
        target = samples(agent, window)
        target.runs = int(count)
        target.values[FAILURE_RATE] = _array(failures)
        target.values[LATENCY] = _array(latencies)
        target.values[TRAJECTORY_LENGTH] = _array(lengths)
        target.tools = Counter(dict(zip(names, (int(c) for c in calls), strict=True)))

    if not query.metrics or set(query.metrics) - set(RUN_DRIFT_METRICS):
        _load_scores(store, query, filters, params, keep, parts, samples)
    return windows


def window_params(query: DriftQuery) -> tuple[list[str], dict[str, Any]]:
    """The conditions (agent, task) and query parameters of `query`'s windows, which every
    query of `load_windows` reads (drift_counts.py and its test too): each window's range
    (`baseline_start`...), the pinned `version`, the filters' values, and the span holding both
    windows (`span_start`, `span_end`), a plain range the rollups read only."""
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
    return filters, params


def run_window(query: DriftQuery) -> Callable[[str], str]:
    """The window of a run (over `window_params`): -1 for none, 0 the baseline, 1 the recent
    window, for a run starting at the SQL expression given (a run's, or an hour's, start)."""
    by_version = query.baseline.version is not None
    return lambda start: _window_sql(start, _IN_VERSION, by_version)


_IN_VERSION = "AgentVersion = {version:String}"
_RUN_HASH = "cityHash64(TraceId, RootSpanId)"
_WINDOWS = ("baseline", "recent")  # by window index


def _parts(limits: list[list[int]]) -> list[tuple[sources.Tables, tuple[int, ...]]]:
    """The windows read from the hash sample tables (rollups.py: every run with a hash at most
    SAMPLE_LIMIT) and those read from the whole tables: a window whose agents' limits are all
    at most SAMPLE_LIMIT has its whole sample in the sample tables, a quarter of the rows."""
    source = sources.SOURCE
    if source.runs_sample is None:
        return [(source, (0, 1))]
    small = tuple(w for w in (0, 1) if max(limits[w], default=0) <= SAMPLE_LIMIT)
    large = tuple(w for w in (0, 1) if w not in small)
    return [(tables, part) for tables, part in ((source.sampled(), small), (source, large)) if part]


def _part_span(column: str, part: tuple[int, ...]) -> str:
    """The part's windows as a plain range of `column` (what the rollups read)."""
    if len(part) == 2:
        return _between(column, "span_start", "span_end")
    return _between(column, f"{_WINDOWS[part[0]]}_start", f"{_WINDOWS[part[0]]}_end")


def _in_part(part: tuple[int, ...]) -> str:
    return "w >= 0" if len(part) == 2 else f"w = {part[0]}"


def _greatest(expressions: Iterable[str]) -> str:
    listed = list(expressions)
    return listed[0] if len(listed) == 1 else f"greatest({', '.join(listed)})"


def _carried_in_version(tables: sources.Tables, part: tuple[int, ...], where: list[str], largest: str) -> str:
    """Whether a score's run is of the version, where the scores carry their run's version
    (rollups.py, migration 122): as carried for a run stored once; for a run stored again, its
    latest row in `tables.revised`; for a NULL (the run not found when the score was written),
    the run's latest row in `trajectories`, by trace id (a key look-up: none for most questions).
    The old look-up probed every score's (TraceId, RootSpanId) in a set of the version's runs."""
    keep = _greatest_keep(part)
    unknown = (
        "(TraceId, RootSpanId) IN (SELECT TraceId, RootSpanId FROM trajectories FINAL "
        f"WHERE TraceId IN (SELECT TraceId FROM {tables.scores} PREWHERE AgentVersion IS NULL AND "
        f"{' AND '.join(where)} WHERE {largest}) AND {_IN_VERSION} AND IsDeleted = 0)"
    )
    revised = f"{_RUN_HASH} IN (SELECT RunHash FROM {tables.revised} PREWHERE RunHash <= {keep})"
    revised_in_version = (
        f"(TraceId, RootSpanId) IN (SELECT TraceId, RootSpanId FROM {tables.revised} FINAL "
        f"PREWHERE RunHash <= {keep} WHERE {_IN_VERSION} AND IsDeleted = 0)"
    )
    return (
        f"multiIf(AgentVersion IS NULL, {unknown}, {revised}, {revised_in_version}, "
        f"AgentVersion = {{version:String}})"
    )


def _greatest_keep(part: tuple[int, ...]) -> str:
    """The largest hash limit of the part's windows (a parameter of `load_windows`)."""
    return _greatest(f"{{keep_{_WINDOWS[w]}:UInt64}}" for w in part)


def _limit(window: str) -> str:
    """The hash limit of the row's agent in `window` ('baseline' or 'recent'); 0 for none."""
    return f"transform(Agent, {{agents:Array(String)}}, {{{window}_limits:Array(UInt64)}}, toUInt64(0))"


def _array(values: Sequence[float] | FloatArray) -> FloatArray:
    return np.asarray(values, dtype=np.float64)


def _window_sql(start_column: str, in_version: str, by_version: bool) -> str:
    """-1 outside both windows, 0 in the baseline, 1 in the recent window."""
    recent = _between(start_column, "recent_start", "recent_end")
    baseline = _between(start_column, "baseline_start", "baseline_end")
    if by_version:
        recent += f" AND NOT ({in_version})"
        baseline += f" AND ({in_version})"
    return f"multiIf({recent}, 1, {baseline}, 0, -1)"


def _between(column: str, start: str, end: str) -> str:
    return f"{column} >= {{{start}:DateTime64(6)}} AND {column} < {{{end}:DateTime64(6)}}"


def _load_scores(
    store: Store,
    query: DriftQuery,
    filters: list[str],
    params: dict[str, Any],
    keep: str,
    parts: list[tuple[sources.Tables, tuple[int, ...]]],
    samples: Any,
) -> None:
    # A score's window and limit depend on its agent, which is not in the scores rollup's key:
    # before FINAL, each window's largest limit, and in the version's runs, the part's larger one.
    params = {**params, "run_metrics": list(RUN_METRICS)}
    since = min(params["baseline_start"], params["recent_start"], key=float)
    if sources.SOURCE.revised is not None:
        # Over the whole span: a fixed baseline may end after the recent window.
        overlap = overlap_bounds(store, params["span_start"], params["span_end"])
        params.update(
            multi_version=overlap.metrics,
            overlap_low=overlap.low,
            overlap_high=overlap.high,
            evaluator_versions=overlap.versions,
        )
    else:
        params["multi_version"] = multi_version_metrics(store, since, params["recent_end"])
    if query.metrics:
        params["metrics"] = list(query.metrics)
    one_start = _every_run_at_one_start(store, params)
    selects = []
    for tables, part in parts:
        largest = f"{_RUN_HASH} <= {_greatest_keep(part)}"
        where = [*filters, _part_span("RunStart", part), "Metric NOT IN {run_metrics:Array(String)}"]
        if query.metrics:
            where.append("Metric IN {metrics:Array(String)}")
        # Against a version, a part without its whole history (the recent window, or a baseline
        # period) takes the version's runs among those its score rows name, found by hash first:
        # a set of the (TraceId, RootSpanId) of every run of the version under the limit cost
        # more to build than the rest of the query. A run's rows share its hash, so it is exact.
        named = [largest]
        if 0 not in part or query.baseline.since is not None:
            named.append(
                f"{_RUN_HASH} IN (SELECT {_RUN_HASH} FROM {tables.scores} "
                f"PREWHERE {largest} AND {' AND '.join(where)})"
            )
        in_version = (
            "(TraceId, RootSpanId) IN ("
            + runs_sql([_IN_VERSION], "TraceId, RootSpanId", prewhere=named, tables=tables)
            + ")"
        )
        carried = query.baseline.version is not None and tables.revised is not None
        if carried:
            in_version = _carried_in_version(tables, part, where, largest)
        window = _window_sql("RunStart", in_version, query.baseline.version is not None)
        score_sample = f"{_RUN_HASH} <= " + _greatest(
            f"if({_between('RunStart', f'{_WINDOWS[w]}_start', f'{_WINDOWS[w]}_end')}, "
            f"{{keep_{_WINDOWS[w]}:UInt64}}, 0)"
            for w in part
        )
        scores = scores_sql(
            where,
            prewhere=[score_sample],
            run_prewhere=[largest],
            tables=tables,
            multi_version=params["multi_version"],
            agent_version=carried,
            run_start=[_part_span("RunStart", part)] if one_start else None,
            one_start=one_start,
            carried_once=_carried_once(part) if carried and one_start else (),
            latest_rows=one_start and _latest_rows(tables, params),
        )
        selects.append(
            f"SELECT Agent, Metric, RunStart, TraceId, RootSpanId, Score, w FROM ("
            f"SELECT Agent, Metric, RunStart, TraceId, RootSpanId, Score, {window} AS w FROM ({scores})) "
            f"WHERE {_in_part(part)}"
        )

    # Each window's scores in time order, ties by the run's ids: sorted by start alone (sorting
    # tuples holding the ids took a third of the query), and by the ids too only where two
    # scores of a window share a start.
    def per_window(value: int, order: str, key: str) -> str:
        return (
            f"SELECT Agent, w, Metric, arrayMap(s -> s.{value}, sorted), {_shared_start('sorted')} FROM ("
            f"SELECT Agent, w, Metric, arraySort({key}, groupArray({order})) AS sorted "
            f"FROM ({' UNION ALL '.join(selects)}) "
            f"WHERE Score IS NOT NULL AND {keep} GROUP BY Agent, w, Metric)"
        )

    start_us = "toUnixTimestamp64Micro(RunStart)"
    rows = store.query(
        per_window(2, f"({start_us}, assumeNotNull(Score))", "s -> s.1"), params, settings=_LAZY_BRANCHES
    )
    if any(shared for *_, shared in rows):
        rows = store.query(
            per_window(4, "(RunStart, TraceId, RootSpanId, assumeNotNull(Score))", "s -> s"),
            params,
            settings=_LAZY_BRANCHES,
        )
    for agent, window_index, metric, scores_in_order, _ in rows:
        samples(agent, window_index).values[metric] = _array(scores_in_order)


def _latest_rows(tables: sources.Tables, params: dict[str, Any]) -> bool:
    """Whether the runs stored once inside the versions' overlap read their latest rows from
    `tables.latest` (migration 127; not for the hash samples): where its order tells the
    overlap's versions apart (`sources.versions_apart`)."""
    return tables.latest is not None and sources.versions_apart(params["evaluator_versions"])


def _carried_once(part: tuple[int, ...]) -> list[str]:
    """For a part of one window against a version: the runs stored once whose carried version
    already puts them out of it (`_carried_in_version`: a run stored once is of the version it
    carries; a NULL one is looked up, so kept). Dropped before `scores_sql` groups them: the
    baseline part of the re-scored 1M-run store took 0.18-0.23 s CPU instead of 0.23-0.29 s."""
    if len(part) == 2:
        return []
    is_or_not = "=" if part == (0,) else "!="
    return [f"(AgentVersion IS NULL OR AgentVersion {is_or_not} {{version:String}})"]


# Each score's window (`_window_sql` over `_carried_in_version`) is a `multiIf` whose branches
# probe sets by the run's ids or hash: evaluated for the rows that reach them only, drift's
# scores statement on the re-scored 1M-run store took 0.88 s CPU instead of 1.02 (median of 6).
_LAZY_BRANCHES = {"short_circuit_function_evaluation": "force_enable"}


def _every_run_at_one_start(store: Store, params: dict[str, Any]) -> bool:
    """Whether every sampled run with a score row in the windows' span has its live rows of each
    metric two evaluator versions scored at one start (no hour `hours_of_split_runs` names
    meets the span), so `scores_sql` may group the runs in the versions' overlap alike
    (`scores_sql`'s `one_start`). On a store whose last day a second version re-scored, the three parts
    of each window's read took 0.8 s CPU (recent day), this question ~0.1-0.2 s."""
    if not params["multi_version"] or sources.SOURCE.revised is None:
        return False
    keep = f"{_RUN_HASH} <= greatest({{keep_baseline:UInt64}}, {{keep_recent:UInt64}})"
    hours = hours_of_split_runs(store, params["multi_version"], keep, params)
    span_start, span_end = float(params["span_start"]), float(params["span_end"])
    return not any(hour + 3600 > span_start and hour < span_end for hour in hours)


def _shared_start(array: str) -> str:
    """Whether two neighbours in `array`, sorted tuples with the start first, share a start."""
    return f"arrayExists((a, b) -> a.1 = b.1, arrayPopBack({array}), arrayPopFront({array}))"
