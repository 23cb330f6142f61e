"""What `agenttrail report` shows, read from ClickHouse.

The time buckets are `agenttrail stats`'s (`query_stats`: the same numbers in both places);
the per-agent summary and the worst runs are queries of their own over the same `sources`.

`report_rows` returns JSON-ready rows tagged by `kind` (runs, summary, score, drift, alert,
worst); the sidecar serves the same rows at `GET /api/v1/report`, so the CLI reads through a
running `serve` exactly as it reads the store. `Report.from_rows` groups them per agent.

It also reads the tables of the other monitoring parts, which every reader of a store creates
(the sidecar's migrations, `composition.ALL_MIGRATIONS`), so they are always there:
- `drift_events` (monitoring/drift_events.py): rows with Drifted != 0 are drift points.
- `alert_history` (alerts/schema.py): a period runs from a transition to `firing` until the
  next transition out of it; the `agent` key of GroupLabels names the agent.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from agenttrail.collector.queries import QueryError, TrajectoryFilter, iso_utc, parse_time
from agenttrail.collector.store import Store
from agenttrail.evaluators.monitoring.hourly import HOUR_OF_START, HOUR_S, WORST_KEPT
from agenttrail.evaluators.monitoring.sources import RUN_METRICS, multi_version_metrics, runs_sql, scores_sql
from agenttrail.evaluators.monitoring.stats import (
    IN_FRESH,
    HourlyPlan,
    ScorePlan,
    StatsQuery,
    hourly_plan,
    joined_plan,
    score_plan,
    stats_with_plan,
)

# Bucket sizes the automatic choice picks from: at most 60 buckets over the range.
BUCKETS_S = (1, 2, 5, 10, 15, 30, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400)
MAX_AUTO_BUCKETS = 60

# How far before the range alert transitions are read, to find periods already firing at its start.
ALERT_LOOKBACK = timedelta(days=7)


@dataclass(frozen=True, slots=True)
class ReportQuery:
    since: datetime
    until: datetime
    agent: str | None = None
    bucket_s: int | None = None  # None: chosen from the range
    worst: int = 5  # runs per agent in each worst-runs table

    def __post_init__(self) -> None:
        if self.since >= self.until:
            raise QueryError(f"the range is empty: since {self.since} is not before until {self.until}")
        if self.bucket_s is not None and not 1 <= self.bucket_s <= 86400:
            raise QueryError(f"bucket of {self.bucket_s}s: must be between 1 (1s) and 86400 (1d)")
        if not 1 <= self.worst <= WORST_KEPT:  # the hourly tables keep WORST_KEPT per hour and agent
            raise QueryError(f"worst {self.worst}: must be between 1 and {WORST_KEPT}")

    @property
    def bucket(self) -> int:
        if self.bucket_s is not None:
            return self.bucket_s
        span = (self.until - self.since).total_seconds()
        return next((b for b in BUCKETS_S if span / b <= MAX_AUTO_BUCKETS), BUCKETS_S[-1])

    def runs_filter(self) -> TrajectoryFilter:
        return TrajectoryFilter(since=self.since, until=self.until, agent=self.agent)

    def to_params(self) -> dict[str, str]:
        params = {"since": self.since.isoformat(), "until": self.until.isoformat(), "worst": str(self.worst)}
        if self.agent:
            params["agent"] = self.agent
        if self.bucket_s is not None:
            params["bucket_s"] = str(self.bucket_s)
        return params

    @classmethod
    def from_params(cls, params: dict[str, str]) -> ReportQuery:
        unknown = set(params) - {"since", "until", "agent", "bucket_s", "worst"}
        if unknown:
            raise QueryError(f"unknown report parameter(s) {sorted(unknown)}")
        now = datetime.now(UTC)
        try:
            return cls(
                since=parse_time(params.get("since") or "24h", now=now),
                until=parse_time(params["until"], now=now) if params.get("until") else now,
                agent=params.get("agent") or None,
                bucket_s=int(params["bucket_s"]) if params.get("bucket_s") else None,
                worst=int(params.get("worst", "5")),
            )
        except ValueError as exc:
            raise QueryError(f"bad report parameter: {exc}") from exc


_RUN_SUMMARY = """Agent, count(), sum(Failure), quantilesExactInclusive(0.5, 0.95, 0.99)(LatencyS),
sum(ToolCount), sum(arrayCount(s -> s = 'error', ToolStatuses)), sum(InputTokens), sum(OutputTokens)"""
# The summary's parts: a run's own, and a fresh hour's (monitoring/hourly.py).
_RAW_SUMMARY_PARTS = """Agent, toUInt64(1) AS n, toUInt64(Failure) AS f, [LatencyS] AS lat,
toUInt64(ToolCount) AS tc, toUInt64(arrayCount(s -> s = 'error', ToolStatuses)) AS te, InputTokens AS i,
OutputTokens AS o"""
_HOURLY_SUMMARY_PARTS = """Agent, Runs AS n, Failures AS f, Latencies AS lat, ToolCount AS tc,
arraySum(ToolErrors) AS te, InputTokens AS i, OutputTokens AS o"""
_RUN_COLUMNS = """Agent, TraceId, RootSpanId, toUnixTimestamp64Micro(Start), Task, LatencyS, Failure,
ErrorType"""
_WORST_COLUMNS = "Agent, TraceId, RootSpanId, Start, Task, LatencyS, Failure, ErrorType"
# The lowest mean score per run over its evaluation metrics, joined back to the run.
_LOWEST_SCORED = """
SELECT t.Agent, t.TraceId, t.RootSpanId, toUnixTimestamp64Micro(t.Start), t.Task, t.LatencyS, t.Failure,
       t.ErrorType, low.mean
FROM ({runs}) AS t
INNER JOIN (
    SELECT Agent, TraceId, RootSpanId, avg(Score) AS mean FROM ({scores})
    GROUP BY Agent, TraceId, RootSpanId ORDER BY mean ASC, TraceId, RootSpanId LIMIT {{worst:UInt32}} BY Agent
) AS low ON t.TraceId = low.TraceId AND t.RootSpanId = low.RootSpanId
ORDER BY t.Agent, low.mean ASC, t.TraceId, t.RootSpanId
"""
# The worst runs' tool calls, which the rollups do not hold: a few runs by trace id, the table's key.
_TOOL_CALLS = """
SELECT TraceId, RootSpanId, ToolCalls FROM trajectories FINAL
WHERE TraceId IN {traces:Array(String)} AND IsDeleted = 0
"""
_DRIFT = """
SELECT toUnixTimestamp64Micro(toDateTime64(DetectedAt, 6)), Agent, Task, Metric, Test, PValue, EffectSize,
       BaselineN, RecentN, BaselineValue, RecentValue, Detail
FROM drift_events WHERE {where} AND Drifted != 0 ORDER BY DetectedAt LIMIT 10000
"""
_ALERTS = """
SELECT toUnixTimestamp64Micro(toDateTime64(At, 6)), Fingerprint, Rule, GroupLabels['agent'],
       FromState, ToState
FROM alert_history
WHERE At >= {since:DateTime64(6)} AND At < {until:DateTime64(6)} AND FromState != ToState AND ToState != ''
ORDER BY Fingerprint, At LIMIT 100000
"""


def _conditions(query: ReportQuery, start_column: str) -> tuple[list[str], dict[str, Any]]:
    """The range and agent conditions on `start_column`, with every parameter the queries use."""
    clauses, params = query.runs_filter().where_clauses(start_column)
    params.update(worst=query.worst, run_metrics=list(RUN_METRICS))
    return clauses, params


def _quantiles(values: Sequence[float | None]) -> dict[str, float | None]:
    return dict(zip(("p50", "p95", "p99"), values, strict=True))


def report_rows(store: Store, query: ReportQuery) -> list[dict[str, Any]]:
    """Every row the report needs, tagged by `kind`; the body of `GET /api/v1/report`."""
    rows: list[dict[str, Any]] = [{"kind": "range", "bucket_s": query.bucket, **query.to_params()}]
    stats = StatsQuery(since=query.since, until=query.until, bucket_s=query.bucket, agent=query.agent)
    plan = hourly_plan(store, query.since, query.until)  # once: every part below reads it
    for found in stats_with_plan(store, stats, None if query.bucket % HOUR_S else plan):
        if found["runs"]:
            rows.append(
                {
                    "kind": "runs",
                    "agent": found["agent"],
                    "bucket": found["bucket_start"],
                    "runs": found["runs"],
                    "failures": found["failures"],
                    "p50": found["latency_p50_s"],
                    "p95": found["latency_p95_s"],
                    "p99": found["latency_p99_s"],
                }
            )
        rows.extend(
            {
                "kind": "score",
                "agent": found["agent"],
                "metric": metric,
                "bucket": found["bucket_start"],
                **values,
            }
            for metric, values in found["metrics"].items()
            if values["count"]
        )
    for agent, runs, failures, quantiles, tools, tool_errors, tokens_in, tokens_out in _summaries(
        store, query, plan
    ):
        rows.append(
            {
                "kind": "summary",
                "agent": agent,
                "runs": int(runs),
                "failures": int(failures),
                **_quantiles(quantiles),
                "tool_calls": int(tools),
                "tool_errors": int(tool_errors),
                "input_tokens": int(tokens_in),
                "output_tokens": int(tokens_out),
            }
        )
    rows.extend(_worst_runs(store, query, plan))
    rows.extend(_drift_rows(store, query))
    rows.extend(_alert_rows(store, query))
    return rows


def _summaries(store: Store, query: ReportQuery, plan: HourlyPlan | None) -> list[tuple[Any, ...]]:
    """Per agent over the period: runs, failures, latency percentiles, tool calls and errors, tokens."""
    clauses, params = _conditions(query, "Start")
    if plan is None:
        return store.query(runs_sql(clauses, _RUN_SUMMARY) + " GROUP BY Agent ORDER BY Agent", params)
    # Fresh whole hours from runs_by_hour (every latency kept: the same percentiles), the rest raw.
    raw = runs_sql([*clauses, plan.in_gaps("Start")], _RAW_SUMMARY_PARTS)
    rolled = " AND ".join((IN_FRESH, *clauses[2:]))
    sql = (
        "SELECT Agent, sum(n), sum(f), quantilesExactInclusiveArray(0.5, 0.95, 0.99)(lat), sum(tc), sum(te), "
        f"sum(i), sum(o) FROM (SELECT {_HOURLY_SUMMARY_PARTS} FROM runs_by_hour WHERE {rolled} "
        f"UNION ALL {raw}) GROUP BY Agent ORDER BY Agent"
    )
    return store.query(sql, {**params, **plan.params()})


_FAILURES_BY_HOUR = """
SELECT Agent, h, sum(f) FROM (
SELECT Agent, toUnixTimestamp(Hour) AS h, Failures AS f FROM runs_by_hour WHERE {rolled} UNION ALL {raw})
GROUP BY Agent, h
"""


def _latest_failed_sql(
    store: Store, query: ReportQuery, plan: HourlyPlan | None, clauses: list[str], params: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The latest failed runs per agent; with fresh hours, read only from the latest hour from
    which every agent has `worst` failures on (counted from the hours' failures and the rest's
    runs): the runs before it cannot be among the latest."""
    order = " ORDER BY Start DESC, TraceId LIMIT {worst:UInt32} BY Agent"
    failed = [*clauses, "Failure = 1"]
    if plan is None:
        return runs_sql(failed, _RUN_COLUMNS) + order, params
    params = {**params, **plan.params()}
    rolled = " AND ".join((IN_FRESH, *clauses[2:]))
    raw = runs_sql(
        [*failed, plan.in_gaps("Start")], f"Agent, toUInt32({HOUR_OF_START}) AS h, toUInt64(1) AS f"
    )
    per_agent: dict[str, list[tuple[int, int]]] = {}
    for agent, hour, failures in store.query(_FAILURES_BY_HOUR.format(rolled=rolled, raw=raw), params):
        per_agent.setdefault(agent, []).append((int(hour), int(failures)))
    start = query.until.timestamp()
    for hours in per_agent.values():
        seen, cut = 0, query.since.timestamp()
        for hour, failures in sorted(hours, reverse=True):
            seen += failures
            if seen >= query.worst:
                cut = max(hour, query.since.timestamp())
                break
        start = min(start, cut)
    params["failed_from"] = f"{start:.6f}"
    return runs_sql([*failed, "Start >= {failed_from:DateTime64(6)}"], _RUN_COLUMNS) + order, params


def _slowest_sql(
    plan: HourlyPlan | None, clauses: list[str], params: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The slowest runs per agent; with fresh hours, each hour's own slowest from
    `slowest_by_hour` (ranked in the same order, `worst` of them at least) and the rest of the
    period's runs: the same runs in the same order."""
    order = " ORDER BY LatencyS DESC, TraceId LIMIT {worst:UInt32} BY Agent"
    if plan is None:
        return runs_sql(clauses, _RUN_COLUMNS) + order, params
    rolled = " AND ".join((IN_FRESH, *clauses[2:], "Rank <= {worst:UInt32}"))
    raw = runs_sql([*clauses, plan.in_gaps("Start")], _WORST_COLUMNS)
    sql = (
        f"SELECT {_RUN_COLUMNS} FROM (SELECT {_WORST_COLUMNS} FROM slowest_by_hour WHERE {rolled} "
        f"UNION ALL {raw}){order}"
    )
    return sql, {**params, **plan.params()}


# The lowest means per agent among the hours' lowest runs (with their run's columns) and the
# rest's runs (h = 0): each hour keeps `worst` of its own at least, so the period's are among them.
_LOWEST_PICKS = f"""
SELECT Agent, TraceId, RootSpanId, mean, h, {_RUN_COLUMNS} FROM (
SELECT Agent, TraceId, RootSpanId, Mean AS mean, toUInt32(toUnixTimestamp(Hour)) AS h, Start, Task, LatencyS,
    Failure, ErrorType
FROM lowest_by_hour WHERE {{rolled}} AND Rank <= {{{{worst:UInt32}}}}
UNION ALL
SELECT Agent, TraceId, RootSpanId, avg(assumeNotNull(Score)) AS mean, toUInt32(0) AS h,
    toDateTime64(0, 6) AS Start, '' AS Task, 0. AS LatencyS, toUInt8(0) AS Failure, '' AS ErrorType
FROM ({{raw}}) GROUP BY Agent, TraceId, RootSpanId)
ORDER BY mean ASC, TraceId, RootSpanId LIMIT {{{{worst:UInt32}}}} BY Agent
"""


def _lowest_scored(
    store: Store,
    split: ScorePlan | None,
    clauses: list[str],
    score_where: list[str],
    params: dict[str, Any],
) -> list[tuple[Any, ...]]:
    """The runs with the lowest mean evaluation score per agent (the agent of the scores), as
    `_LOWEST_SCORED` finds them: picked among the scores, then joined to the live runs of the
    period (a pick whose run is not one is dropped, not replaced).

    With a `joined_plan` (of `split`'s plan), its hours' picks come from `lowest_by_hour` with
    their runs (a run's scores there are all in its hour, and its run is live there with the
    scores' agent) and the rest of the period's from its scores, joined to the rest's runs
    (where their runs are)."""
    part = None
    if split is not None and split.plan is not None:
        part = joined_plan(store, split, score_where, clauses, params)
    if part is None:
        scores = scores_sql(score_where, multi_version=params["multi_version"])
        sql = _LOWEST_SCORED.format(runs=runs_sql(clauses, _WORST_COLUMNS), scores=scores)
        return store.query(sql, params)
    assert split is not None
    params = {**params, **split.rest_params(part)}
    raw = split.rest_sql(score_where, part)
    rolled = " AND ".join((IN_FRESH, *clauses[2:]))
    picks = store.query(_LOWEST_PICKS.format(rolled=rolled, raw=raw), params)
    found = [(*run, mean) for _, _, _, mean, hour, *run in picks if hour]
    raw_picks: dict[tuple[str, str], list[float]] = {}
    for _, trace, root, mean, hour, *_ in picks:
        if not hour:
            raw_picks.setdefault((trace, root), []).append(mean)
    if raw_picks:
        params["low_traces"] = sorted({trace for trace, _ in raw_picks})
        where = [*clauses, "TraceId IN {low_traces:Array(String)}", part.in_gaps("Start")]
        for run in store.query(runs_sql(where, _RUN_COLUMNS), params):
            found.extend((*run, mean) for mean in raw_picks.get((run[1], run[2]), []))
    return sorted(found, key=lambda row: (row[0], row[8], row[1], row[2]))


def _worst_runs(store: Store, query: ReportQuery, plan: HourlyPlan | None) -> list[dict[str, Any]]:
    """Per agent: the latest failed runs, the slowest, and the lowest mean evaluation score."""
    clauses, params = _conditions(query, "Start")
    score_clauses, score_params = _conditions(query, "RunStart")
    score_params = {**params, **score_params}
    split = None if plan is None else score_plan(store, plan, score_clauses[:2], score_params)
    if split is None:
        score_params["multi_version"] = multi_version_metrics(store, params["since"], params["until"])
    else:
        score_params["multi_version"] = split.multi_version
    score_where = [*score_clauses, "Score IS NOT NULL", "Metric NOT IN {run_metrics:Array(String)}"]
    found_rows: list[tuple[str, tuple[Any, ...]]] = []
    for why, sql, sql_params in (
        ("failed", *_latest_failed_sql(store, query, plan, clauses, params)),
        ("slowest", *_slowest_sql(plan, clauses, params)),
    ):
        found_rows.extend((why, found) for found in store.query(sql, sql_params))
    lowest = _lowest_scored(store, split, clauses, score_where, score_params)
    found_rows.extend(("lowest_scored", found) for found in lowest)
    traces = sorted({found[1] for _, found in found_rows})
    calls_of = {
        (trace_id, root): calls
        for trace_id, root, calls in (store.query(_TOOL_CALLS, {"traces": traces}) if traces else [])
    }
    rows: list[dict[str, Any]] = []
    for why, found in found_rows:
        agent, trace_id, root, start_us, task, latency, failure, error_type = found[:8]
        calls = calls_of.get((trace_id, root), "")
        rows.append(
            {
                "kind": "worst",
                "why": why,
                "agent": agent,
                "trace_id": trace_id,
                "root_span_id": root,
                "start": iso_utc(start_us),
                "task": task,
                "latency_s": float(latency),
                "failure": int(failure),
                "error_type": error_type,
                "tool_calls": json.loads(calls) if calls else [],
                "mean_score": float(found[8]) if len(found) > 8 and found[8] is not None else None,
            }
        )
    return rows


def _drift_rows(store: Store, query: ReportQuery) -> list[dict[str, Any]]:
    clauses, params = query.runs_filter().where_clauses("DetectedAt")
    rows = []
    for (
        when,
        agent,
        task,
        metric,
        test,
        p_value,
        effect,
        base_n,
        recent_n,
        base_value,
        recent_value,
        detail,
    ) in store.query(_DRIFT.format(where=" AND ".join(clauses)), params):
        rows.append(
            {
                "kind": "drift",
                "detected_at": iso_utc(when),
                "agent": agent,
                "task": task,
                "metric": metric,
                "test": test,
                "p_value": p_value,
                "effect_size": effect,
                "baseline_n": int(base_n),
                "recent_n": int(recent_n),
                "baseline_value": base_value,
                "recent_value": recent_value,
                "detail": detail,
            }
        )
    return rows


def _alert_rows(store: Store, query: ReportQuery) -> list[dict[str, Any]]:
    params = {
        "since": f"{(query.since - ALERT_LOOKBACK).timestamp():.6f}",
        "until": f"{query.until.timestamp():.6f}",
    }
    periods: list[dict[str, Any]] = []
    open_periods: dict[str, dict[str, Any]] = {}
    for when, fingerprint, rule, agent, from_state, to_state in store.query(_ALERTS, params):
        if to_state == "firing" and fingerprint not in open_periods:
            open_periods[fingerprint] = {
                "kind": "alert",
                "rule": rule,
                "agent": agent,
                "start": iso_utc(when),
            }
        elif from_state == "firing" and fingerprint in open_periods:
            periods.append({**open_periods.pop(fingerprint), "end": iso_utc(when)})
    periods.extend({**period, "end": None} for period in open_periods.values())
    return [
        period
        for period in periods
        if (period["end"] is None or _parse(period["end"]) >= query.since)
        and (not query.agent or period["agent"] in ("", query.agent))
    ]


def _parse(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


@dataclass(frozen=True, slots=True)
class RunBucket:
    start: datetime
    runs: int
    failures: int
    p50: float
    p95: float
    p99: float

    @property
    def failure_rate(self) -> float:
        return self.failures / self.runs if self.runs else 0.0


@dataclass(frozen=True, slots=True)
class ScoreBucket:
    start: datetime
    count: int
    mean: float
    std: float


@dataclass(frozen=True, slots=True)
class AlertPeriod:
    rule: str
    agent: str  # "" when the alert is not about one agent
    start: datetime
    end: datetime | None  # None: still firing


@dataclass
class AgentReport:
    agent: str
    summary: dict[str, Any] = field(default_factory=dict)
    runs: list[RunBucket] = field(default_factory=list)
    scores: dict[str, list[ScoreBucket]] = field(default_factory=dict)
    drift: list[dict[str, Any]] = field(default_factory=list)
    alerts: list[AlertPeriod] = field(default_factory=list)
    worst: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


@dataclass
class Report:
    since: datetime
    until: datetime
    bucket_s: int
    agents: dict[str, AgentReport]

    @classmethod
    def from_rows(cls, rows: Sequence[dict[str, Any]]) -> Report:
        header = next(row for row in rows if row["kind"] == "range")
        agents: dict[str, AgentReport] = {}
        shared_alerts: list[AlertPeriod] = []

        def agent(name: str) -> AgentReport:
            return agents.setdefault(name, AgentReport(name))

        for row in rows:
            kind = row["kind"]
            if kind == "summary":
                agent(row["agent"]).summary = row
            elif kind == "runs":
                agent(row["agent"]).runs.append(
                    RunBucket(
                        _parse(row["bucket"]),
                        row["runs"],
                        row["failures"],
                        row["p50"],
                        row["p95"],
                        row["p99"],
                    )
                )
            elif kind == "score":
                agent(row["agent"]).scores.setdefault(row["metric"], []).append(
                    ScoreBucket(_parse(row["bucket"]), row["count"], row["mean"], row["std"])
                )
            elif kind == "worst":
                agent(row["agent"]).worst.setdefault(row["why"], []).append(row)
            elif kind == "drift":
                agent(row["agent"]).drift.append(row)
            elif kind == "alert":
                period = AlertPeriod(
                    row["rule"],
                    row["agent"],
                    _parse(row["start"]),
                    _parse(row["end"]) if row["end"] else None,
                )
                (agent(period.agent).alerts if period.agent else shared_alerts).append(period)
        ranked = {name: report for name, report in sorted(agents.items()) if report.summary}
        for report in ranked.values():
            report.alerts.extend(shared_alerts)
        return cls(_parse(header["since"]), _parse(header["until"]), int(header["bucket_s"]), ranked)
