"""The Agent overview: `agenttrail stats` over time as charts, with releases, drift findings and
alert firing intervals marked, the tools that fail most and the worst-scored runs.

Every query reads the run-level rollups (monitoring/rollups.py), which are sorted by agent or
metric and start time, so the page reads only the agent's period.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from agenttrail.collector.queries import parse_time
from agenttrail.collector.store import Store
from agenttrail.evaluators.console.charts import Band, Chart, Marker, Series
from agenttrail.evaluators.monitoring import sources
from agenttrail.evaluators.monitoring.alerts.history import AlertFilter, query_history
from agenttrail.evaluators.monitoring.display import format_evidence
from agenttrail.evaluators.monitoring.sources import runs_sql
from agenttrail.evaluators.monitoring.stats import StatsQuery, query_stats
from agenttrail.evaluators.monitoring.timespec import format_duration

_BUCKETS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)
RUN_METRICS = ("latency", "failure")  # charted from the runs themselves


def choose_bucket(span_s: float, most: int = 60) -> int:
    """The smallest round bucket that cuts the period into at most `most` points."""
    for bucket in _BUCKETS_S:
        if span_s / bucket <= most:
            return bucket
    return _BUCKETS_S[-1]


def period(store: Store, agent: str, since: str, until: str) -> tuple[datetime, datetime]:
    """The period asked for, or the last day's span of the agent's runs, drift findings and alert
    changes (a drift is often found after the last run of a burst), padded a little."""
    if since:
        start = parse_time(since)
        return start, parse_time(until) if until else datetime.now(UTC)
    rows = store.query(
        runs_sql(
            ["Agent = {agent:String}", "Start >= now64(6) - toIntervalDay(1)"],
            "min(toUnixTimestamp64Micro(Start)), max(toUnixTimestamp64Micro(Start)), count()",
        ),
        {"agent": agent},
    )
    first, last, count = rows[0] if rows else (0, 0, 0)
    if not count:
        now = datetime.now(UTC)
        return now - timedelta(days=1), now
    events = store.query(
        "SELECT max(toUnixTimestamp64Micro(DetectedAt)) FROM drift_events WHERE Agent = {agent:String} "
        "AND Drifted = 1 AND DetectedAt >= now64(3) - toIntervalDay(1) "
        "UNION ALL SELECT max(toUnixTimestamp64Micro(At)) FROM alert_history "
        "WHERE GroupLabels['agent'] IN ({agent:String}, '') AND At >= now64(3) - toIntervalDay(1)",
        {"agent": agent},
    )
    start, end = first / 1e6, max([last, *(int(at) for (at,) in events if at)]) / 1e6
    pad = max((end - start) * 0.05, 1.0)
    return datetime.fromtimestamp(start - pad, UTC), datetime.fromtimestamp(end + pad, UTC)


@dataclass
class Overview:
    agent: str
    start: float
    end: float
    bucket_s: int
    charts: list[Chart]
    releases: list[Marker]
    drift: list[dict[str, Any]]
    alerts: list[Band]
    tools: list[dict[str, Any]]
    worst: list[dict[str, Any]]
    runs: int
    failures: int


def releases(store: Store, agent: str) -> list[Marker]:
    rows = store.query(
        runs_sql(["Agent = {agent:String}"], "AgentVersion, min(toUnixTimestamp64Micro(Start))")
        + " GROUP BY AgentVersion ORDER BY 2",
        {"agent": agent},
    )
    return [Marker(first / 1e6, f"v{version}" if version else "(no version)") for version, first in rows]


def drift_findings(store: Store, agent: str, start: float, end: float) -> list[dict[str, Any]]:
    """Drift tests that found drift in the period, first detection per (metric, test), each with
    its evidence worded as `agenttrail drift` words it (a p-value, or a change detector's alarm)."""
    rows = store.query(
        "SELECT Metric, Test, min(toUnixTimestamp64Milli(DetectedAt)), argMin(PValue, DetectedAt), "
        "argMin(EffectSize, DetectedAt), argMin(toUnixTimestamp64Milli(WindowStart), DetectedAt), "
        "argMin(toUnixTimestamp64Milli(WindowEnd), DetectedAt), argMin(Detail, DetectedAt), "
        "argMin(RecentN, DetectedAt) "
        "FROM drift_events WHERE Agent = {agent:String} AND Drifted = 1 "
        "AND DetectedAt >= fromUnixTimestamp64Milli({start:Int64}) "
        "AND DetectedAt <= fromUnixTimestamp64Milli({end:Int64}) GROUP BY Metric, Test ORDER BY 3",
        {"agent": agent, "start": int(start * 1000), "end": int(end * 1000)},
    )
    return [
        {
            "metric": metric,
            "test": test,
            "at": at / 1000,
            "p_value": p_value,
            "effect_size": effect,
            "window_start": w0 / 1000,
            "window_end": w1 / 1000,
            "detail": detail,
            "evidence": format_evidence(
                {"test": test, "p_value": p_value, "detail": detail, "recent_n": recent_n}
            ),
        }
        for metric, test, at, p_value, effect, w0, w1, detail, recent_n in rows
    ]


def firing_intervals(store: Store, agent: str, start: float) -> list[Band]:
    """When alerts on this agent (or on every agent) were firing, from the alert history."""
    history = query_history(
        store, AlertFilter(all=True, since=datetime.fromtimestamp(start - 86400, UTC), limit=5000)
    )
    bands: list[Band] = []
    opened: dict[str, float] = {}
    for event in sorted(history, key=lambda e: str(e["at"])):
        if event["event"] != "transition" or event["labels"].get("agent", agent) != agent:
            continue
        at = parse_time(str(event["at"])).timestamp()
        if event["to"] == "firing":
            opened.setdefault(event["fingerprint"], at)
        elif event["fingerprint"] in opened and event["to"] in ("resolved", "inactive"):
            bands.append(Band(opened.pop(event["fingerprint"]), at, f"{event['rule']} firing"))
    rules = {event["fingerprint"]: event["rule"] for event in history}
    bands.extend(Band(at, time.time(), f"{rules[key]} firing (still)") for key, at in opened.items())
    return bands


def worst_runs(store: Store, agent: str, start: float, end: float, limit: int = 10) -> list[dict[str, Any]]:
    """Runs with the lowest mean score (labelled metrics only, failures first)."""
    rows = store.query(
        "SELECT s.TraceId, s.RootSpanId, any(s.Task), avg(s.Score), "
        "groupArrayIf(s.Metric, s.Label IN ('fail', 'failed')) "
        f"FROM {sources.SOURCE.scores} AS s FINAL WHERE s.Agent = {{agent:String}} "
        "AND s.RunStart >= fromUnixTimestamp64Micro({start:Int64}) "
        "AND s.RunStart <= fromUnixTimestamp64Micro({end:Int64}) "
        "AND s.Metric NOT IN ('latency', 'failure') AND s.Score IS NOT NULL "
        "GROUP BY s.TraceId, s.RootSpanId ORDER BY avg(s.Score), s.TraceId LIMIT {limit:UInt32}",
        {"agent": agent, "start": int(start * 1e6), "end": int(end * 1e6), "limit": limit},
    )
    return [
        {"trace_id": trace, "root_span_id": root, "task": task, "mean": mean, "failed": list(failed)}
        for trace, root, task, mean, failed in rows
    ]


def agent_overview(store: Store, agent: str, since: str = "", until: str = "") -> Overview:
    start_at, end_at = period(store, agent, since, until)
    start, end = start_at.timestamp(), end_at.timestamp()
    bucket_s = choose_bucket(end - start)
    aligned_start = datetime.fromtimestamp(start // bucket_s * bucket_s, UTC)
    rows = query_stats(store, StatsQuery(since=aligned_start, until=end_at, bucket_s=bucket_s, agent=agent))
    marks = releases(store, agent)
    drift = drift_findings(store, agent, start, end)
    first_found: dict[str, float] = {}
    for finding in drift:  # one marker per metric: its first detection
        first_found.setdefault(finding["metric"], finding["at"])
    drift_marks = [Marker(at, f"drift: {metric}", "drift") for metric, at in first_found.items()]
    bands = firing_intervals(store, agent, start)

    def centre(row: dict[str, Any]) -> float:
        return parse_time(row["bucket_start"]).timestamp() + bucket_s / 2

    metrics = sorted({name for row in rows for name in row["metrics"]})
    charts = [
        # Counts per bucket, in the bucket's unit: a rate per minute from 1 s buckets read 3 runs
        # as "180/min", a rate the agent never ran at for a minute.
        Chart(
            f"Runs per {format_duration(bucket_s)} bucket",
            [Series("runs", [(centre(r), r["runs"]) for r in rows])],
        ),
        Chart(
            "Failure rate",
            [Series("failure rate", [(centre(r), r["failure_rate"]) for r in rows])],
            y_format=lambda v: f"{v:.0%}",
            y_max=1.0,
        ),
        Chart(
            "Latency (s)",
            [
                Series("p50", [(centre(r), r["latency_p50_s"]) for r in rows]),
                Series("p95", [(centre(r), r["latency_p95_s"]) for r in rows], dashed=True),
            ],
        ),
    ]
    if metrics:
        charts.append(
            Chart(
                "Scores (mean per bucket)",
                [
                    Series(name, [(centre(r), (r["metrics"].get(name) or {}).get("mean")) for r in rows])
                    for name in metrics
                ],
                y_max=1.0,
            )
        )
    for chart in charts:
        chart.markers = [*marks, *drift_marks]
        chart.bands = bands
    tools: dict[str, dict[str, int]] = {}
    for row in rows:
        for name, counts in row["tools"].items():
            total = tools.setdefault(name, {"calls": 0, "errors": 0})
            total["calls"] += counts["calls"]
            total["errors"] += counts["errors"]
    ranked = sorted(tools.items(), key=lambda item: (-item[1]["errors"], item[0]))
    top_tools = [
        {"tool": name, **counts, "error_rate": counts["errors"] / counts["calls"]} for name, counts in ranked
    ]
    return Overview(
        agent=agent,
        start=start,
        end=end,
        bucket_s=bucket_s,
        charts=charts,
        releases=marks,
        drift=drift,
        alerts=bands,
        tools=top_tools,
        worst=worst_runs(store, agent, start, end),
        runs=sum(r["runs"] for r in rows),
        failures=sum(r["failures"] for r in rows),
    )
