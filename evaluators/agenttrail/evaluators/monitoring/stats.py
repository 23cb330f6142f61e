"""Metrics over time: per agent (and task, model, agent version) and time bucket, in ClickHouse.

Per bucket: run count, failure rate, latency p50/p95/p99 (exact, linearly interpolated like
numpy's default), tool calls and errors per tool, input/output tokens, and per evaluation
metric count/mean/std (sample std, n-1; 0 for n = 1; a run without a score for a metric is
missing, never 0 - spec/metrics.md "Aggregates over many runs"). Buckets are aligned to the
Unix epoch, so a `1d` bucket is a UTC day. Two queries: runs (with tools, one pass via a
multi-value sumMap) and scores; rows are joined by key here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from agenttrail.collector.queries import QueryError, iso_utc, parse_time
from agenttrail.collector.store import Store
from agenttrail.evaluators.monitoring import hourly, sources
from agenttrail.evaluators.monitoring.sources import (
    RUN_METRICS,
    filter_clauses,
    multi_version_metrics,
    runs_sql,
    scores_sql,
    ts6,
)
from agenttrail.evaluators.monitoring.timespec import format_duration, parse_duration_s

# --by name -> trajectories column.
GROUPS = {"task": "Task", "model": "Model", "agent_version": "AgentVersion"}
MAX_BUCKETS = 20_000
PERCENTILES = (0.5, 0.95, 0.99)


def parse_bucket(text: str, what: str = "bucket") -> int:
    """`10s`, `5m`, `1h`, `1d` -> seconds (1 second to 1 day): the bucket of `stats` and `report`."""
    return parse_duration_s(text, what=what, high_s=86_400)


@dataclass(frozen=True, slots=True)
class StatsQuery:
    since: datetime
    until: datetime
    bucket_s: int = 3600
    agent: str | None = None
    task: str | None = None
    by: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()  # evaluation metrics to report; empty: all

    def __post_init__(self) -> None:
        if self.until <= self.since:
            raise QueryError(
                f"--until ({self.until.isoformat()}) must be after --since ({self.since.isoformat()})"
            )
        if not 1 <= self.bucket_s <= 86_400:
            raise QueryError(f"bucket {self.bucket_s}s is out of range: between 1s and 1d")
        unknown = [name for name in self.by if name not in GROUPS]
        if unknown:
            raise QueryError(f"cannot group by {unknown}; use any of {', '.join(GROUPS)}")
        buckets = (self.until - self.since).total_seconds() / self.bucket_s
        if buckets > MAX_BUCKETS:
            raise QueryError(
                f"{buckets:,.0f} buckets of {format_duration(self.bucket_s)} between --since and --until; "
                f"at most {MAX_BUCKETS:,}: use a larger --bucket or a shorter period"
            )

    @classmethod
    def last(cls, period_s: int, **kwargs: Any) -> StatsQuery:
        until = datetime.now(UTC)
        return cls(since=until - timedelta(seconds=period_s), until=until, **kwargs)

    def to_params(self) -> dict[str, str]:
        optional = {
            "agent": self.agent,
            "task": self.task,
            "by": ",".join(self.by),
            "metric": ",".join(self.metrics),
        }
        return {
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
            "bucket": format_duration(self.bucket_s),
            **{key: value for key, value in optional.items() if value},
        }

    @classmethod
    def from_params(cls, params: dict[str, str]) -> StatsQuery:
        """The HTTP form: since/until as in `trajectories`, bucket `5m`, by and metric comma-separated."""
        unknown = set(params) - {"since", "until", "bucket", "agent", "task", "by", "metric"}
        if unknown:
            raise QueryError(
                f"unknown parameter(s) {sorted(unknown)}; use since, until, bucket, agent, task, by, metric"
            )
        now = datetime.now(UTC)
        return cls(
            since=parse_time(params.get("since") or "24h", now=now),
            until=parse_time(params["until"], now=now) if params.get("until") else now,
            bucket_s=parse_bucket(params.get("bucket") or "1h"),
            agent=params.get("agent") or None,
            task=params.get("task") or None,
            by=split_list(params.get("by")),
            metrics=split_list(params.get("metric")),
        )


def split_list(text: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (text or "").split(",") if part.strip())


@dataclass(slots=True)
class _Row:
    """One (agent, groups, bucket) of the answer, filled by both queries."""

    bucket: int
    agent: str
    groups: dict[str, str]
    runs: int = 0
    failures: int = 0
    latency: tuple[float | None, ...] = (None, None, None)
    input_tokens: int = 0
    output_tokens: int = 0
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self, bucket_s: int) -> dict[str, Any]:
        p50, p95, p99 = self.latency
        return {
            "bucket_start": iso_utc(self.bucket * bucket_s * 1_000_000),
            "bucket": format_duration(bucket_s),
            "agent": self.agent,
            **self.groups,
            "runs": self.runs,
            "failures": self.failures,
            "failure_rate": self.failures / self.runs if self.runs else None,
            "latency_p50_s": p50,
            "latency_p95_s": p95,
            "latency_p99_s": p99,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "tools": self.tools,
            "metrics": dict(sorted(self.metrics.items())),  # in one order whatever order rows came in
        }


def query_stats(store: Store, query: StatsQuery) -> list[dict[str, Any]]:
    """Stats rows ordered by agent, groups, bucket start (the JSON contract of `agenttrail stats`)."""
    # Buckets of whole hours: fresh hours from the hourly rollups, the rest run by run.
    plan = None if query.bucket_s % hourly.HOUR_S else hourly_plan(store, query.since, query.until)
    return stats_with_plan(store, query, plan)


def stats_with_plan(store: Store, query: StatsQuery, plan: HourlyPlan | None) -> list[dict[str, Any]]:
    """`query_stats` reading the hours of `plan` (made for this period, buckets of whole hours)."""
    group_columns = [GROUPS[name] for name in query.by]
    bounds = {"since": ts6(query.since.timestamp()), "until": ts6(query.until.timestamp())}
    filters, params = filter_clauses((("Agent", "agent", query.agent), ("Task", "task", query.task)))
    params.update(bounds, bucket_us=query.bucket_s * 1_000_000)
    rows: dict[tuple[Any, ...], _Row] = {}

    def row_for(bucket: int, agent: str, groups: tuple[str, ...]) -> _Row:
        key = (agent, *groups, bucket)
        if key not in rows:
            rows[key] = _Row(bucket, agent, dict(zip(query.by, groups, strict=True)))
        return rows[key]

    width = len(group_columns)
    for found in _run_rows(store, plan, group_columns, filters, params):
        row = row_for(found[0], found[1], tuple(found[2 : 2 + width]))
        runs, failures, latency, tokens_in, tokens_out, tools = found[2 + width :]
        row.runs, row.failures, row.latency = int(runs), int(failures), tuple(latency)
        row.input_tokens, row.output_tokens = int(tokens_in), int(tokens_out)
        names, calls, errors = tools
        row.tools = {
            name: {"calls": int(c), "errors": int(e), "error_rate": e / c if c else None}
            for name, c, e in zip(names, calls, errors, strict=True)
        }

    for found in _score_rows(store, query, plan, group_columns, filters, params):
        row = row_for(found[0], found[1], tuple(found[2 : 2 + width]))
        metric, count, mean, std = found[2 + width :]
        count = int(count)
        row.metrics[metric] = {
            "count": count,
            "mean": mean if count else None,
            "std": (std if count > 1 else 0.0) if count else None,
        }
    return [rows[key].to_json(query.bucket_s) for key in sorted(rows)]


_TOOL_TALLY = (
    "sumMap(names, arrayMap(s -> toUInt64(1), statuses), arrayMap(s -> toUInt64(s = 'error'), statuses))"
)


@dataclass(frozen=True, slots=True)
class HourlyPlan:
    """The whole hours of a query's period that the hourly rollups answer (hourly.py), and how:
    every other row of the period (edges, hours not rolled up or changed since) is read raw."""

    since: float  # the period, Unix seconds
    until: float
    points: dict[int, hourly.Point]  # the fresh whole hours read from the rollups
    # score_plan's hours of runs moved between versions, by metrics: the report asks twice.
    split_hours: dict[tuple[str, ...], set[int]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def hours(self) -> list[int]:
        return sorted(self.points)

    @property
    def metric_versions(self) -> list[tuple[str, str]]:
        return sorted({pair for point in self.points.values() for pair in point.metric_versions})

    @property
    def gaps(self) -> list[tuple[float, float]]:
        """The rest of the period, [start, end) in Unix seconds."""
        gaps: list[tuple[float, float]] = []
        start = self.since
        for hour in self.hours:
            if hour > start:
                gaps.append((start, hour))
            start = hour + hourly.HOUR_S
        if start < self.until:
            gaps.append((start, self.until))
        return gaps

    def only(self, hours: Iterable[int]) -> HourlyPlan | None:
        """This plan reading only `hours` (of its own) from the rollups; None if none is left."""
        points = {hour: self.points[hour] for hour in hours if hour in self.points}
        return HourlyPlan(self.since, self.until, points) if points else None

    def params(self) -> dict[str, Any]:
        gaps = {
            f"gap{i}_{end}": ts6(bound)
            for i, gap in enumerate(self.gaps)
            for end, bound in zip("se", gap, strict=True)
        }
        hours = self.hours
        generations = [self.points[hour].generation for hour in hours]
        return {"fresh_hours": hours, "fresh_generations": generations, **gaps}

    def in_gaps(self, column: str) -> str:
        """`column` in the rest of the period, as ranges the sorting key can skip to."""
        ranges = [
            f"({column} >= {{gap{i}_s:DateTime64(6)}} AND {column} < {{gap{i}_e:DateTime64(6)}})"
            for i in range(len(self.gaps))
        ]
        return f"({' OR '.join(ranges) or '0'})"


# The rows of the fresh hours' current generations (transform: a hash lookup, where has() on
# (hour, generation) pairs compared every pair on every row).
IN_FRESH = (
    "toUnixTimestamp(Hour) IN {fresh_hours:Array(UInt32)} AND transform(toUnixTimestamp(Hour), "
    "{fresh_hours:Array(UInt32)}, {fresh_generations:Array(UInt64)}, toUInt64(0)) = Generation"
)


def hourly_plan(store: Store, since: datetime, until: datetime) -> HourlyPlan | None:
    """How to read [since, until) with the hourly rollups; None if no hour of it is fresh."""
    if sources.SOURCE is not sources.ROLLUPS:
        return None
    first, last = hourly.whole_hours(since.timestamp(), until.timestamp())
    fresh = hourly.fresh_hours(store, first, last)
    return HourlyPlan(since.timestamp(), until.timestamp(), fresh) if fresh else None


def plan_multi_version(
    store: Store, plan: HourlyPlan, bounds: list[str], params: dict[str, Any]
) -> list[str]:
    """`multi_version_metrics` of the plan's period (`bounds`: its RunStart conditions) without
    reading the whole period: the pairs each fresh hour recorded and those of the rest."""
    return score_plan(store, plan, bounds, params).multi_version


@dataclass(frozen=True, slots=True)
class ScorePlan:
    """How a period's scores are read with the hourly rollups: `plan`'s hours from their rows
    (None: the whole period raw), the rest raw. `multi_version`: the period's
    `multi_version_metrics`; `rest_pairs`: the (metric, evaluator version) pairs of the rows
    outside `plan`'s hours; `single_start`: every run's live rows of the `multi_version`
    metrics lie at one start."""

    plan: HourlyPlan | None
    multi_version: list[str]
    rest_pairs: list[tuple[str, str]] = field(default_factory=list)
    single_start: bool = True

    def rest_multi_version(self, hours: HourlyPlan) -> list[str]:
        """The `multi_version` parameter of `rest_sql(..., hours)`: with every run's rows at one
        start, the metrics two versions scored outside `hours` (a run's rows there are all its
        rows); else the period's."""
        if not self.single_start or self.plan is None:
            return self.multi_version
        left_out = [point for hour, point in self.plan.points.items() if hour not in hours.points]
        pairs = [*self.rest_pairs, *(pair for point in left_out for pair in point.metric_versions)]
        return sorted(hourly.multi_version(pairs))

    def rest_params(self, hours: HourlyPlan) -> dict[str, Any]:
        """The parameters of `rest_sql(..., hours)` and of `hours`' rows."""
        return {**hours.params(), "multi_version": self.rest_multi_version(hours)}

    def rest_sql(self, where: list[str], hours: HourlyPlan) -> str:
        """`scores_sql` of `where` (its first two: the period's RunStart bounds) outside
        `hours` (this plan or a part of it), with `rest_params(hours)`."""
        rest = hours.in_gaps("RunStart")
        run_start = [*where[:2], rest] if self.single_start else None
        return scores_sql([*where, rest], multi_version=self.rest_multi_version(hours), run_start=run_start)


def score_plan(store: Store, plan: HourlyPlan, bounds: list[str], params: dict[str, Any]) -> ScorePlan:
    """Which of `plan`'s hours answer the scores of the period (`bounds`: its RunStart
    conditions), and how the rest is read.

    A metric two evaluator versions scored in the period takes each run's latest score over
    all the run's rows; an hour's rows pick it within the hour (hourly.py). The two agree for
    every run whose live rows of the metric share one start, so lie in one hour: only a run
    stored more than once can have rows at two starts (moved between two versions' scores,
    which migration 124's view now deletes), and the hours holding a row of such a run are
    read raw, with the rest of the period, as before. With no such run, the rest reads a
    metric as one version's only if one version scored it there (each run's rows there are
    all its rows); else as the period does."""
    where = " AND ".join([*bounds, plan.in_gaps("RunStart")])
    raw_pairs = store.query(hourly.METRIC_VERSIONS.format(where=where), {**params, **plan.params()})
    rest = [pair for _, found in raw_pairs for pair in found]
    multi = sorted(hourly.multi_version([*plan.metric_versions, *rest]))
    if not multi:
        return ScorePlan(plan, [])
    if tuple(multi) not in plan.split_hours:
        plan.split_hours[tuple(multi)] = sources.hours_of_split_runs(store, multi)
    split = plan.split_hours[tuple(multi)]
    if not split:
        return ScorePlan(plan, multi, rest)
    return ScorePlan(plan.only(set(plan.points) - split), multi, single_start=False)


# Scores read raw whose run is not among the live runs read raw (dead, outside the period, or
# in an hour of the plan), and the hours of the plan holding a row (any version) of such a run.
_STRAYS = "SELECT 1 FROM ({scores}) WHERE (TraceId, RootSpanId) NOT IN ({runs}) LIMIT 1"
_HOURS_OF_STRAYS = f"""
SELECT DISTINCT toUInt32({hourly.HOUR_OF_START}) AS h FROM runs_by_start
WHERE Start >= {{{{since:DateTime64(6)}}}} AND Start < {{{{until:DateTime64(6)}}}}
    AND h IN {{{{fresh_hours:Array(UInt32)}}}}
    AND (TraceId, RootSpanId) IN (
        SELECT TraceId, RootSpanId FROM ({{scores}}) WHERE (TraceId, RootSpanId) NOT IN ({{runs}}))
"""


def joined_plan(
    store: Store, split: ScorePlan, score_where: list[str], run_where: list[str], params: dict[str, Any]
) -> HourlyPlan | None:
    """The part of `plan` that answers scores joined to their runs (stats by model or version,
    the report's lowest-scored runs), so that no join reads every run of the period.

    Its hours are those whose every score belongs to a live run of the same hour, agent and
    task (hourly.Point.scores_joined), less any hour holding a row of the run of a score read
    raw (`score_where` and the rest of the period) that is not among the live runs read raw
    (`run_where` and the rest): rare, as a score's run start is its run's. So every score read
    from the hourly rows has its run in its own hour, and every score read raw has its run
    among the runs read raw, or none in the period. Needs `split.plan` (some hours answer
    from the rollups)."""
    plan = split.plan
    assert plan is not None
    joined = plan.only(hour for hour, point in plan.points.items() if point.scores_joined)
    if joined is None:
        return None
    params = {**params, **split.rest_params(joined)}
    scores = split.rest_sql(score_where, joined)
    runs = runs_sql([*run_where, joined.in_gaps("Start")], "TraceId, RootSpanId")
    if not store.query(_STRAYS.format(scores=scores, runs=runs), params):
        return joined  # the usual case: no need to look for runs in the hours
    strays = {int(hour) for (hour,) in store.query(_HOURS_OF_STRAYS.format(scores=scores, runs=runs), params)}
    return joined.only(set(joined.points) - strays)


def _run_rows(
    store: Store,
    plan: HourlyPlan | None,
    group_columns: list[str],
    filters: list[str],
    params: dict[str, Any],
) -> list[tuple[Any, ...]]:
    """(bucket, agent, groups..., runs, failures, [p50, p95, p99], tokens in, out, tool tally)."""
    keys = ", ".join(["bucket", "Agent", *group_columns])
    in_period = ["Start >= {since:DateTime64(6)}", "Start < {until:DateTime64(6)}", *filters]
    if plan is None:
        run_columns = (
            "intDiv(toUnixTimestamp64Micro(Start), {bucket_us:UInt64}) AS bucket, Agent"
            f"{_tail(group_columns)}, count(), sum(Failure), "
            "quantilesExactInclusive(0.5, 0.95, 0.99)(LatencyS), sum(InputTokens), sum(OutputTokens), "
            + _TOOL_TALLY.replace("names", "ToolNames").replace("statuses", "ToolStatuses")
        )
        return store.query(f"{runs_sql(in_period, run_columns)} GROUP BY {keys}", params)
    # Whole fresh hours from runs_by_hour, the rest of the period run by run: the same sums,
    # and the percentiles over the same latencies (the hourly rows keep every one).
    rolled = " AND ".join((IN_FRESH, *filters))
    tail = _tail(group_columns)
    raw = runs_sql(
        [*in_period, plan.in_gaps("Start")],
        f"intDiv(toUnixTimestamp64Micro(Start), {{bucket_us:UInt64}}) AS bucket, Agent{tail}, "
        "toUInt64(1) AS n, toUInt64(Failure) AS f, [LatencyS] AS lat, InputTokens AS i, OutputTokens AS o, "
        "CAST(ToolNames, 'Array(String)') AS names, arrayMap(s -> toUInt64(1), ToolStatuses) AS calls, "
        "arrayMap(s -> toUInt64(s = 'error'), ToolStatuses) AS errors",
    )
    sql = (
        f"SELECT {keys}, sum(n), sum(f), quantilesExactInclusiveArray(0.5, 0.95, 0.99)(lat), sum(i), sum(o), "
        "sumMap(names, calls, errors) FROM ("
        f"SELECT intDiv(toUnixTimestamp(Hour), {{bucket_s:UInt32}}) AS bucket, Agent{tail}, Runs AS n, "
        "Failures AS f, Latencies AS lat, InputTokens AS i, OutputTokens AS o, ToolNames AS names, "
        f"ToolCalls AS calls, ToolErrors AS errors FROM runs_by_hour WHERE {rolled} "
        f"UNION ALL {raw}) GROUP BY {keys}"
    )
    return store.query(sql, {**params, **plan.params(), "bucket_s": params["bucket_us"] // 1_000_000})


def _tail(columns: list[str]) -> str:
    return "".join(f", {column}" for column in columns)


def _score_rows(
    store: Store,
    query: StatsQuery,
    plan: HourlyPlan | None,
    group_columns: list[str],
    filters: list[str],
    params: dict[str, Any],
) -> list[tuple[Any, ...]]:
    """(bucket, agent, groups..., metric, count, mean, std); joins runs only for model/version groups."""
    where = ["RunStart >= {since:DateTime64(6)}", "RunStart < {until:DateTime64(6)}", *filters]
    where.append("Metric NOT IN {run_metrics:Array(String)}")
    params = {**params, "run_metrics": list(RUN_METRICS)}
    if query.metrics:
        where.append("Metric IN {metrics:Array(String)}")
        params["metrics"] = list(query.metrics)
    joined = bool({"Model", "AgentVersion"} & set(group_columns))
    run_where = ["Start >= {since:DateTime64(6)}", "Start < {until:DateTime64(6)}", *filters]
    if plan is None:
        params["multi_version"] = multi_version_metrics(store, params["since"], params["until"])
    else:
        split = score_plan(store, plan, where[:2], params)
        params["multi_version"] = split.multi_version
        if split.plan is not None:
            if not joined:
                return _hourly_score_rows(store, split, group_columns, where, params)
            part = joined_plan(store, split, where, run_where, params)
            if part is not None:
                return _joined_score_rows(store, split, part, group_columns, where, run_where, params)
    source = f"({scores_sql(where, multi_version=params['multi_version'])}) AS s"
    if joined:
        runs = runs_sql(run_where, "TraceId, RootSpanId, Model, AgentVersion")
        source += f" INNER JOIN ({runs}) AS r ON s.TraceId = r.TraceId AND s.RootSpanId = r.RootSpanId"
    group_sql = "".join(f", {'s.Task' if column == 'Task' else 'r.' + column}" for column in group_columns)
    sql = (
        "SELECT intDiv(toUnixTimestamp64Micro(s.RunStart), {bucket_us:UInt64}) AS bucket, s.Agent"
        f"{group_sql}, s.Metric, count(s.Score), avg(s.Score), stddevSampStable(s.Score) "
        f"FROM {source} GROUP BY bucket, s.Agent{group_sql}, s.Metric"
    )
    return store.query(sql, params)


def _hourly_score_rows(
    store: Store, split: ScorePlan, group_columns: list[str], where: list[str], params: dict[str, Any]
) -> list[tuple[Any, ...]]:
    """`_score_rows` from scores_by_hour for the fresh hours and the scores for the rest.

    A metric that more than one evaluator version scored in the period takes each run's
    latest score (sources.scores_sql): `split.plan`'s hours' rows pick the same score of each
    run."""
    plan = split.plan
    assert plan is not None
    params = {**params, **split.rest_params(plan)}
    group_sql = _tail(group_columns)  # Task only: model and version groups join the runs
    rolled = " AND ".join((IN_FRESH, *where[2:]))
    raw = split.rest_sql(where, plan)
    sql = (
        f"SELECT bucket, Agent{group_sql}, Metric, sum(length(v)), avgArray(v), stddevSampStableArray(v) "
        "FROM ("
        f"SELECT intDiv(toUnixTimestamp(Hour), {{bucket_s:UInt32}}) AS bucket, Agent{group_sql}, Metric, "
        f"Scores AS v FROM scores_by_hour WHERE {rolled} UNION ALL "
        f"SELECT intDiv(toUnixTimestamp64Micro(RunStart), {{bucket_us:UInt64}}) AS bucket, Agent{group_sql}, "
        f"Metric, if(Score IS NULL, [], [assumeNotNull(Score)]) AS v FROM ({raw})"
        f") GROUP BY bucket, Agent{group_sql}, Metric"
    )
    return store.query(sql, {**params, "bucket_s": params["bucket_us"] // 1_000_000})


def _joined_score_rows(
    store: Store,
    split: ScorePlan,
    plan: HourlyPlan,
    group_columns: list[str],
    where: list[str],
    run_where: list[str],
    params: dict[str, Any],
) -> list[tuple[Any, ...]]:
    """`_score_rows` grouped by model or version with a `joined_plan`: its hours from
    scores_by_hour (each score there carries its run's model and version), the rest of the
    period's scores joined to the rest's runs only."""
    params = {**params, **split.rest_params(plan)}
    group_sql = _tail(group_columns)
    raw_groups = "".join(
        f", {'s.Task' if column == 'Task' else 'r.' + column} AS {column}" for column in group_columns
    )
    rolled = " AND ".join((IN_FRESH, *where[2:]))
    scores = split.rest_sql(where, plan)
    runs = runs_sql([*run_where, plan.in_gaps("Start")], "TraceId, RootSpanId, Model, AgentVersion")
    sql = (
        f"SELECT bucket, Agent{group_sql}, Metric, sum(length(v)), avgArray(v), stddevSampStableArray(v) "
        "FROM ("
        f"SELECT intDiv(toUnixTimestamp(Hour), {{bucket_s:UInt32}}) AS bucket, Agent{group_sql}, Metric, "
        f"Scores AS v FROM scores_by_hour WHERE {rolled} UNION ALL "
        "SELECT intDiv(toUnixTimestamp64Micro(s.RunStart), {bucket_us:UInt64}) AS bucket, s.Agent AS Agent"
        f"{raw_groups}, s.Metric AS Metric, if(s.Score IS NULL, [], [assumeNotNull(s.Score)]) AS v "
        f"FROM ({scores}) AS s INNER JOIN ({runs}) AS r "
        "ON s.TraceId = r.TraceId AND s.RootSpanId = r.RootSpanId"
        f") GROUP BY bucket, Agent{group_sql}, Metric"
    )
    return store.query(sql, {**params, "bucket_s": params["bucket_us"] // 1_000_000})
