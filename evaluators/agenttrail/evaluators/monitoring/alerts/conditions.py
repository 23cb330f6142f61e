"""Rule kinds: what each one measures, as one ClickHouse query per evaluation.

A condition is evaluated at an instant `at` (epoch seconds) over the window that ends there,
so the live evaluator and `agenttrail alerts test` (a replay at past instants) run the same
code. It returns one `Observation` per group that has data; a group with no data is not
observed, which the state machine reads as "condition false". Minimum sample sizes are part of
the condition: a group below them is observed (its value is shown) but never active.

`trajectories` is a ReplacingMergeTree(Version, IsDeleted): read with FINAL and IsDeleted = 0.
`scores` is a ReplacingMergeTree(CreatedAt) keyed by evaluator version: read with FINAL, then
the newest score per run so two evaluator versions do not count a run twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.store import Store
from agenttrail.evaluators.monitoring.alerts.parsing import (
    parse_count,
    parse_number,
    parse_percentile,
    parse_positive,
    parse_rate,
    parse_text,
    parse_window,
)
from agenttrail.evaluators.monitoring.drift_events import event_detail_text
from agenttrail.evaluators.monitoring.timespec import format_duration

GROUP_COLUMNS = {"agent": "Agent", "task": "Task"}


@dataclass(frozen=True, slots=True)
class Observation:
    """One group's measurement at one instant."""

    labels: Mapping[str, str]  # the group: {"agent": "checkout"}, plus labels the kind adds
    value: float | None
    threshold: float | None
    active: bool  # the rule's condition holds (including its minimum sample size)
    detail: str  # the numbers behind the value, for people: "12/40 runs failed; baseline 3/900"
    # The value breaches the threshold on fewer samples than the rule's minimum, so it does not count.
    too_few: bool = False


@dataclass(frozen=True, slots=True)
class Scope:
    """Which runs a rule looks at and how it splits them into alert groups."""

    agents: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    group_by: tuple[str, ...] = ("agent",)

    def where(self) -> tuple[list[str], dict[str, Any]]:
        clauses: list[str] = []
        params: dict[str, Any] = {}
        if self.agents:
            clauses.append("Agent IN {scope_agents:Array(String)}")
            params["scope_agents"] = list(self.agents)
        if self.tasks:
            clauses.append("Task IN {scope_tasks:Array(String)}")
            params["scope_tasks"] = list(self.tasks)
        return clauses, params

    def columns(self, *extra: tuple[str, str]) -> list[tuple[str, str]]:
        """(label, SQL expression) of each group column, the scope's then the kind's."""
        return [(label, GROUP_COLUMNS[label]) for label in self.group_by] + list(extra)


class ParamError(AgentTrailError, ValueError):
    """A rule parameter is missing or bad; `key` names it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True, slots=True)
class Param:
    field: str
    parse: Callable[[Any], Any]
    required: bool = False


class Condition:
    """Base of the rule kinds: parameters from the config, and one query per evaluation."""

    __slots__ = ()
    KIND: ClassVar[str]
    PARAMS: ClassVar[Mapping[str, Param]]  # config key -> field
    SUMMARY: ClassVar[str]  # default `summary` annotation template
    LABELS: ClassVar[tuple[str, ...]] = ()  # group labels the kind adds to the scope's
    # What a group with no observation means: no data to judge (the rates and means), or, for a
    # kind that observes only the groups where it holds (drift events), that it no longer holds.
    ABSENT: ClassVar[str] = "no data in the window"
    ABSENT_IS_NO_DATA: ClassVar[bool] = True

    def observe(self, store: Store, scope: Scope, at: float) -> list[Observation]:
        raise NotImplementedError

    def template_fields(self) -> dict[str, Any]:
        """Values a summary template may use besides labels, value and threshold."""
        return {
            key: format_duration(value) if key in ("window", "baseline") else value
            for key, param in self.PARAMS.items()
            if (value := getattr(self, param.field)) is not None
        }

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Condition:
        unknown = sorted(set(params) - set(cls.PARAMS))
        if unknown:
            raise ParamError(
                unknown[0], f"unknown parameter for kind {cls.KIND}; known: {sorted(cls.PARAMS)}"
            )
        values: dict[str, Any] = {}
        for key, param in cls.PARAMS.items():
            if key not in params:
                if param.required:
                    raise ParamError(key, f"required by kind {cls.KIND}")
                continue
            try:
                values[param.field] = param.parse(params[key])
            except ValueError as exc:
                raise ParamError(key, str(exc)) from exc
        return cls(**values)


def _query(
    store: Store,
    scope: Scope,
    select: str,
    source: str,
    conditions: list[str],
    params: dict[str, Any],
    *extra_groups: tuple[str, str],
) -> list[tuple[dict[str, str], tuple[Any, ...]]]:
    """Run a grouped aggregate; returns (group labels, the aggregate columns) per group."""
    columns = scope.columns(*extra_groups)
    scope_clauses, scope_params = scope.where()
    group_select = "".join(f"{expression} AS g_{label}, " for label, expression in columns)
    group_by = f"GROUP BY {', '.join(f'g_{label}' for label, _ in columns)}" if columns else ""
    sql = (
        f"SELECT {group_select}{select} FROM {source} "
        f"WHERE {' AND '.join([*conditions, *scope_clauses])} {group_by}"
    )
    rows = store.query(sql, {**params, **scope_params})
    width = len(columns)
    return [
        ({label: str(value) for (label, _), value in zip(columns, row[:width], strict=True)}, row[width:])
        for row in rows
    ]


def _window(at: float, seconds: float) -> dict[str, str]:
    return {"from": f"{at - seconds:.6f}", "to": f"{at:.6f}"}


_IN_WINDOW = "{column} > {{from:DateTime64(6)}} AND {column} <= {{to:DateTime64(6)}}"


def _sampled(
    labels: dict[str, str],
    value: float,
    threshold: float,
    breached: bool,
    samples: int,
    minimum: tuple[str, int],
    detail: str,
) -> Observation:
    """An observation that is active only when the breach rests on at least the minimum sample
    size (`minimum` is the parameter's name and value); its detail says when it does not."""
    name, least = minimum
    enough = samples >= least
    return Observation(
        labels,
        value,
        threshold,
        enough and breached,
        detail if enough else f"{detail}; fewer than {name}={least}",
        too_few=breached and not enough,
    )


@dataclass(frozen=True, slots=True)
class FailureRateSpike(Condition):
    """Failure rate over `window` above `factor` x the rate of the `baseline` before it, and
    above `floor`. A baseline with fewer than `min_baseline_runs` runs is unknown: the floor
    alone applies."""

    window_s: float = 900.0
    baseline_s: float = 86400.0
    factor: float = 2.0
    floor: float = 0.05
    min_runs: int = 20
    min_baseline_runs: int = 20

    KIND = "failure_rate_spike"
    PARAMS: ClassVar[Mapping[str, Param]] = {
        "window": Param("window_s", parse_window),
        "baseline": Param("baseline_s", parse_window),
        "factor": Param("factor", parse_positive),
        "floor": Param("floor", parse_rate),
        "min_runs": Param("min_runs", parse_count),
        "min_baseline_runs": Param("min_baseline_runs", parse_count),
    }
    SUMMARY = "Failure rate {value:.1%} over {window} for {group} (threshold {threshold:.1%})"

    def observe(self, store: Store, scope: Scope, at: float) -> list[Observation]:
        split = f"{at - self.window_s:.6f}"
        select = (
            "countIf(Start > {split:DateTime64(6)}), countIf(Start > {split:DateTime64(6)} AND Failure = 1), "
            "countIf(Start <= {split:DateTime64(6)}), countIf(Start <= {split:DateTime64(6)} AND Failure = 1)"
        )
        rows = _query(
            store,
            scope,
            select,
            "trajectories FINAL",
            ["IsDeleted = 0", _IN_WINDOW.format(column="Start")],
            {**_window(at, self.window_s + self.baseline_s), "split": split},
        )
        observations = []
        for labels, (runs, failed, baseline_runs, baseline_failed) in rows:
            if not runs:
                continue
            rate = failed / runs
            known = baseline_runs >= self.min_baseline_runs
            baseline = baseline_failed / baseline_runs if known else 0.0
            threshold = max(self.factor * baseline, self.floor)
            observations.append(
                _sampled(
                    labels,
                    rate,
                    threshold,
                    rate > threshold,
                    runs,
                    ("min_runs", self.min_runs),
                    f"{failed}/{runs} runs failed in the last {format_duration(self.window_s)}; baseline "
                    + (
                        f"{baseline_failed}/{baseline_runs} ({baseline:.1%})"
                        if known
                        else f"unknown ({baseline_runs} runs < {self.min_baseline_runs})"
                    ),
                )
            )
        return observations


@dataclass(frozen=True, slots=True)
class MetricBelow(Condition):
    """The mean of an evaluation metric over `window` below `threshold`."""

    metric: str
    threshold: float
    window_s: float = 3600.0
    min_count: int = 20

    KIND = "metric_below"
    PARAMS: ClassVar[Mapping[str, Param]] = {
        "metric": Param("metric", parse_text, required=True),
        "threshold": Param("threshold", parse_number, required=True),
        "window": Param("window_s", parse_window),
        "min_count": Param("min_count", parse_count),
    }
    SUMMARY = "Mean {metric} {value:.3f} over {window} for {group} (threshold {threshold:.3f})"

    def observe(self, store: Store, scope: Scope, at: float) -> list[Observation]:
        latest = (
            "(SELECT Agent, Task, argMax(Score, CreatedAt) AS LatestScore FROM scores FINAL "
            "WHERE Metric = {metric:String} AND Score IS NOT NULL AND "
            + _IN_WINDOW.format(column="RunStart")
            + " GROUP BY TraceId, RootSpanId, Agent, Task)"
        )
        rows = _query(
            store,
            scope,
            "count(), avg(LatestScore)",
            latest,
            ["1"],
            {**_window(at, self.window_s), "metric": self.metric},
        )
        return [
            _sampled(
                labels,
                mean,
                self.threshold,
                mean < self.threshold,
                count,
                ("min_count", self.min_count),
                f"mean {self.metric} {mean:.3f} over {count} scored runs in the last "
                f"{format_duration(self.window_s)}",
            )
            for labels, (count, mean) in rows
            if count
        ]


@dataclass(frozen=True, slots=True)
class LatencyAbove(Condition):
    """A latency percentile of runs over `window` above `threshold_s` seconds."""

    threshold_s: float
    quantile: float = 0.95
    window_s: float = 900.0
    min_runs: int = 20

    KIND = "latency_above"
    PARAMS: ClassVar[Mapping[str, Param]] = {
        "threshold_s": Param("threshold_s", parse_positive, required=True),
        "percentile": Param("quantile", parse_percentile),
        "window": Param("window_s", parse_window),
        "min_runs": Param("min_runs", parse_count),
    }
    SUMMARY = "{percentile} latency {value:.2f}s over {window} for {group} (threshold {threshold:.2f}s)"

    def template_fields(self) -> dict[str, Any]:
        return {**Condition.template_fields(self), "percentile": f"p{self.quantile * 100:g}"}

    def observe(self, store: Store, scope: Scope, at: float) -> list[Observation]:
        rows = _query(
            store,
            scope,
            "count(), quantileExact({quantile:Float64})(LatencyS)",
            "trajectories FINAL",
            ["IsDeleted = 0", _IN_WINDOW.format(column="Start")],
            {**_window(at, self.window_s), "quantile": self.quantile},
        )
        name = f"p{self.quantile * 100:g}"
        return [
            _sampled(
                labels,
                latency,
                self.threshold_s,
                latency > self.threshold_s,
                runs,
                ("min_runs", self.min_runs),
                f"{name} {latency:.3f}s over {runs} runs in the last {format_duration(self.window_s)}",
            )
            for labels, (runs, latency) in rows
            if runs
        ]


@dataclass(frozen=True, slots=True)
class ToolErrorRate(Condition):
    """Per tool, the share of its calls over `window` that failed, above `threshold`."""

    threshold: float
    window_s: float = 900.0
    min_calls: int = 20
    tool: str | None = None

    KIND = "tool_error_rate"
    PARAMS: ClassVar[Mapping[str, Param]] = {
        "threshold": Param("threshold", parse_rate, required=True),
        "window": Param("window_s", parse_window),
        "min_calls": Param("min_calls", parse_count),
        "tool": Param("tool", parse_text),
    }
    SUMMARY = "Tool {tool} error rate {value:.1%} over {window} for {group} (threshold {threshold:.1%})"
    LABELS = ("tool",)

    def observe(self, store: Store, scope: Scope, at: float) -> list[Observation]:
        conditions = ["IsDeleted = 0", _IN_WINDOW.format(column="Start")]
        params: dict[str, Any] = _window(at, self.window_s)
        if self.tool:
            conditions.append("ToolName = {tool:String}")
            params["tool"] = self.tool
        rows = _query(
            store,
            scope,
            "count(), countIf(ToolStatus = 'error')",
            "trajectories FINAL ARRAY JOIN ToolNames AS ToolName, ToolStatuses AS ToolStatus",
            conditions,
            params,
            ("tool", "ToolName"),
        )
        return [
            _sampled(
                labels,
                errors / calls,
                self.threshold,
                errors / calls > self.threshold,
                calls,
                ("min_calls", self.min_calls),
                f"{errors}/{calls} calls of {labels['tool']} failed in the last "
                f"{format_duration(self.window_s)}",
            )
            for labels, (calls, errors) in rows
            if calls
        ]


@dataclass(frozen=True, slots=True)
class DriftDetected(Condition):
    """A drift event (`drift_events.Drifted = 1`) for the group and metric within `window`."""

    metric: str | None = None
    window_s: float = 3600.0

    KIND = "drift"
    PARAMS: ClassVar[Mapping[str, Param]] = {
        "metric": Param("metric", parse_text),
        "window": Param("window_s", parse_window),
    }
    SUMMARY = "Drift in {metric} for {group}: {detail}"
    LABELS = ("metric",)
    ABSENT = "no drift event in the window"
    ABSENT_IS_NO_DATA = False

    def observe(self, store: Store, scope: Scope, at: float) -> list[Observation]:
        conditions = ["Drifted = 1", _IN_WINDOW.format(column="DetectedAt")]
        params: dict[str, Any] = _window(at, self.window_s)
        if self.metric:
            conditions.append("Metric = {metric:String}")
            params["metric"] = self.metric
        rows = _query(
            store,
            scope,
            "count(), argMax(EffectSize, DetectedAt), argMax(PValue, DetectedAt), "
            "argMax(Test, DetectedAt), argMax(BaselineValue, DetectedAt), argMax(RecentValue, DetectedAt), "
            "argMax(Detail, DetectedAt)",
            "drift_events",
            conditions,
            params,
            ("metric", "Metric"),
        )
        return [
            Observation(
                labels,
                effect,
                None,
                True,
                f"{test}{_p(p_value)} effect size {_maybe(effect, '.3f')}, "
                f"{_maybe(baseline, '.3f')} -> {_maybe(recent, '.3f')}; {events} drift event(s) in the last "
                f"{format_duration(self.window_s)}"
                + (f"; {text}" if (text := event_detail_text(detail, test)) else ""),
            )
            for labels, (events, effect, p_value, test, baseline, recent, detail) in rows
        ]


def _p(p_value: float | None) -> str:
    """The p-value as a summary shows it (" p=0.001"); nothing for a change detector, which has none."""
    return "" if p_value is None else f" p={p_value:.2g}"


def _maybe(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


KINDS: dict[str, type[Condition]] = {
    kind.KIND: kind for kind in (FailureRateSpike, MetricBelow, LatencyAbove, ToolErrorRate, DriftDetected)
}
