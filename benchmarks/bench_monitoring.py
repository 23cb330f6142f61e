"""Monitoring benchmark: `agenttrail stats`, `drift`, `report` and the console's agent overview
over 1,000,000 stored runs.

Runs are generated inside the embedded store (INSERT ... SELECT from numbers()), spread over
the last 7 days, 4 agents x 20 tasks x 2 models x 2 versions, with 2 % re-assembled (a second
version of the same run, as late spans cause) and 4 scores per run, each with the scored
revision's agent version, as the evaluator writes them. Prints the time of each
query; asserts nothing. `--runs N` for a smaller store. The sidecar's hourly rollup job runs
once before the queries (its back-fill is timed), and once more after the store changed;
`--no-hourly` reads the run-level rollups only, as before the hourly ones (for A/B runs on one
store). `--rescored-hours H`: a second evaluator version re-scores the evaluation metrics of the
runs of the last H hours (once per store), as when the metric set changed, so that the queries
over them take each run's latest score (sources.scores_sql's multi-version part).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store, parse_store
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.console.overview import agent_overview
from agenttrail.evaluators.monitoring import sources
from agenttrail.evaluators.monitoring.drift import (
    Baseline,
    DriftContext,
    DriftQuery,
    DriftSettings,
    analyse_drift,
    compare,
    load_windows,
)
from agenttrail.evaluators.monitoring.hourly import HourlyRollup
from agenttrail.evaluators.monitoring.report_data import ReportQuery, report_rows
from agenttrail.evaluators.monitoring.stats import StatsQuery, query_stats

SPREAD_S = 7 * 86_400
AGENTS = "['support-bot', 'research-bot', 'billing-bot', 'triage-bot']"
TOOLS = "['search_kb', 'lookup_order', 'issue_refund', 'send_email', 'escalate']"

# One run per number: deterministic ids, times in order over the spread, random measures.
_RUNS = f"""
INSERT INTO trajectories (TraceId, RootSpanId, Agent, AgentVersion, Task, ServiceName, Model, Start,
    LatencyS, Failure, ErrorType, InputTokens, OutputTokens, ToolCount, ToolNames, ToolStatuses,
    ToolCalls, SpanCount, Revision, AssembledAt, Version, IsDeleted)
SELECT TraceId, RootSpanId, Agent, AgentVersion, Task, 'bench', Model, Start, LatencyS, Failure,
    if(Failure, 'TimeoutError', ''), InputTokens, OutputTokens, length(ToolNames), ToolNames,
    arrayMap(t -> if(randCanonical() < 0.05, 'error', 'ok'), ToolNames), '[]', length(ToolNames) + 2,
    {{revision:UInt32}}, Start, {{version:UInt64}}, 0
FROM (
    SELECT lower(hex(MD5(toString(number)))) AS TraceId,
        substring(lower(hex(MD5(concat('root', toString(number))))), 1, 16) AS RootSpanId,
        {AGENTS}[number % 4 + 1] AS Agent,
        if(number < {{runs:UInt64}} / 2, 'v1', 'v2') AS AgentVersion,
        concat('task-', toString(number % 20)) AS Task,
        ['model-a', 'model-b'][intDiv(number, 7) % 2 + 1] AS Model,
        fromUnixTimestamp64Micro(toInt64({{start_us:Int64}} + number * {{step_us:Int64}})) AS Start,
        exp(randNormal(0, 0.6)) AS LatencyS,
        toUInt8(randCanonical() < 0.05) AS Failure,
        toUInt64(200 + rand() % 800) AS InputTokens,
        toUInt64(50 + rand() % 300) AS OutputTokens,
        arrayMap(i -> {TOOLS}[rand(i) % 5 + 1], range(1 + rand() % 6)) AS ToolNames
    FROM numbers({{runs:UInt64}})
    WHERE number % {{every:UInt64}} = 0
)
"""

_SCORES = """
INSERT INTO scores (TraceId, RootSpanId, Metric, Evaluator, EvaluatorVersion, Score, Label, Explanation,
    Agent, Task, RunStart, Revision, ReferenceVersion, Error, CreatedAt, AgentVersion)
SELECT t.TraceId, t.RootSpanId, m, 'trajectory', 'trajectory-bench',
    multiIf(m = 'latency', t.LatencyS, m = 'failure', toFloat64(t.Failure),
            m = 'trajectory_exact_match', toFloat64(randCanonical() < 0.8), randCanonical()),
    '', '', t.Agent, t.Task, t.Start, t.Revision, 1, '', t.Start, t.AgentVersion
FROM trajectories AS t
ARRAY JOIN ['trajectory_exact_match', 'trajectory_precision', 'latency', 'failure'] AS m
"""


# A second evaluator version's scores of the recent runs' evaluation metrics, written now.
_RESCORED = """
INSERT INTO scores (TraceId, RootSpanId, Metric, Evaluator, EvaluatorVersion, Score, Label, Explanation,
    Agent, Task, RunStart, Revision, ReferenceVersion, Error, CreatedAt, AgentVersion)
SELECT TraceId, RootSpanId, Metric, Evaluator, 'trajectory-bench-2',
    if(Metric = 'trajectory_exact_match', toFloat64(randCanonical() < 0.7), randCanonical()),
    Label, Explanation, Agent, Task, RunStart, Revision, ReferenceVersion, Error, now64(6), AgentVersion
FROM scores FINAL
WHERE Metric IN ('trajectory_exact_match', 'trajectory_precision') AND RunStart >= {since:DateTime64(6)}
    AND EvaluatorVersion = 'trajectory-bench'
"""


def rescore(store: Store, hours: float, now: datetime) -> None:
    """The runs of the last `hours` re-scored by a second evaluator version, unless already."""
    if store.query("SELECT count() FROM scores WHERE EvaluatorVersion = 'trajectory-bench-2'")[0][0]:
        return
    started = time.perf_counter()
    store.command(_RESCORED, {"since": f"{now.timestamp() - hours * 3600:.6f}"})
    took = time.perf_counter() - started
    print(f"re-scored the last {hours:g} h by a second evaluator version in {took:.1f} s")


def generate(store: Store, runs: int, now: datetime) -> None:
    """`runs` runs over the 7 days before `now`, 2 % of them stored twice, 4 scores each."""
    start_us = int((now.timestamp() - SPREAD_S) * 1e6)
    params = {"runs": runs, "start_us": start_us, "step_us": SPREAD_S * 1_000_000 // runs}
    store.command(_RUNS, {**params, "every": 1, "revision": 1, "version": 1})
    store.command(_RUNS, {**params, "every": 50, "revision": 2, "version": 2})  # re-assembled runs
    store.command(_SCORES)


def timed(what: str, function: Callable[[], Any], repeat: int = 3) -> Any:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - started)
    print(f"  {what:<58} {statistics.median(times) * 1000:8.0f} ms  (median of {repeat})", flush=True)
    return result


def drift_phases(store: Store, query: DriftQuery) -> str:
    """Wall and process CPU time (the embedded engine runs in this process) of loading the
    windows and of the tests, for one more analysis."""
    settings = DriftSettings()
    wall, cpu = time.perf_counter(), time.process_time()
    windows = load_windows(store, query, settings)
    loaded = time.perf_counter() - wall, time.process_time() - cpu
    wall, cpu = time.perf_counter(), time.process_time()
    for agent in sorted(windows):
        context = DriftContext(agent, "", *query.recent_window(), "")
        compare(context, *windows[agent], settings, query.metrics)
    tested = time.perf_counter() - wall, time.process_time() - cpu
    return (
        f"windows {loaded[0] * 1000:.0f} ms ({loaded[1] * 1000:.0f} ms CPU), "
        f"tests {tested[0] * 1000:.0f} ms ({tested[1] * 1000:.0f} ms CPU)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--store", help="reuse this directory (generated if empty)")
    parser.add_argument("--no-hourly", action="store_true", help="read the run-level rollups only")
    parser.add_argument(
        "--rescored-hours",
        type=float,
        default=0,
        help="a second evaluator version re-scores the runs of the last H hours (once per store)",
    )
    parser.add_argument(
        "--skip",
        default="",
        help="comma-separated sections to skip: hourly,stats,drift,report,overview,inserts",
    )
    args = parser.parse_args()
    skip = set(args.skip.split(","))
    with tempfile.TemporaryDirectory(prefix="agenttrail-bench-") as tmp:
        store = Store(parse_store(args.store or str(Path(tmp) / "store"), "bench"))
        started = time.perf_counter()
        applied = migrate(store, ALL_MIGRATIONS)  # every table serve makes (the report reads alerts too)
        if applied and store.query("SELECT count() FROM trajectories")[0][0]:
            print(f"migrations {applied} on the stored runs: {time.perf_counter() - started:.1f} s")
        now = datetime.now(UTC)
        if not store.query("SELECT count() FROM trajectories")[0][0]:
            started = time.perf_counter()
            generate(store, args.runs, now)
            print(f"generated {args.runs:,} runs + scores in {time.perf_counter() - started:.1f} s")
        else:
            now = store.query("SELECT max(Start) FROM trajectories")[0][0].replace(tzinfo=UTC)
        if args.rescored_hours:
            rescore(store, args.rescored_hours, now)
        counts = store.query(
            "SELECT (SELECT count() FROM trajectories), (SELECT count() FROM scores), "
            "(SELECT count() FROM system.parts WHERE database = currentDatabase() AND active "
            "AND table = 'trajectories')"
        )[0]
        print(
            f"stored: {counts[0]:,} trajectory rows (incl. versions), {counts[1]:,} scores, {counts[2]} parts"
        )
        job = HourlyRollup(lambda: store)  # closed hours: the hour now is read run by run
        if "hourly" not in skip:
            started = time.perf_counter()
            hours = job.run_once()
            print(f"hourly rollup job: {hours} hours aggregated in {time.perf_counter() - started:.1f} s")
            timed("hourly rollup job, nothing changed", job.run_once)
        if args.no_hourly:
            sources.SOURCE = sources.RUN_ROLLUPS
            print("reading the run-level rollups only (--no-hourly)")
        until = now + timedelta(seconds=1)
        day, week = until - timedelta(days=1), until - timedelta(days=7)
        print("stats:")
        for label, query in (
            ()
            if "stats" in skip
            else (
                ("1 day, 5m buckets", StatsQuery(since=day, until=until, bucket_s=300)),
                ("1 day, 1h buckets", StatsQuery(since=day, until=until, bucket_s=3600)),
                ("7 days, 1h buckets", StatsQuery(since=week, until=until, bucket_s=3600)),
                ("7 days, 1d buckets", StatsQuery(since=week, until=until, bucket_s=86_400)),
                (
                    "7 days, 1d, by task,model,agent_version",
                    StatsQuery(
                        since=week, until=until, bucket_s=86_400, by=("task", "model", "agent_version")
                    ),
                ),
                (
                    "7 days, 1h, one agent",
                    StatsQuery(since=week, until=until, bucket_s=3600, agent="support-bot"),
                ),
            )
        ):
            rows = timed(f"{label} ({args.runs:,} runs stored)", partial(query_stats, store, query))
            print(f"    -> {len(rows)} rows")
        print("drift (all agents, every metric):")
        for label, drift in (
            ()
            if "drift" in skip
            else (
                (
                    "recent 1h vs rolling 24h",
                    DriftQuery(recent_s=3600, baseline=Baseline(rolling_s=86_400), now=until),
                ),
                (
                    "recent 24h vs rolling 6d",
                    DriftQuery(recent_s=86_400, baseline=Baseline(rolling_s=6 * 86_400), now=until),
                ),
                (
                    "recent 24h vs version v1",
                    DriftQuery(recent_s=86_400, baseline=Baseline(version="v1"), now=until),
                ),
            )
        ):
            results = timed(label, partial(analyse_drift, store, drift))
            print(f"    -> {len(results)} results, {sum(r.drifted for r in results)} drifted")
            print(f"    phases once more: {drift_phases(store, drift)}")
        print("report (`agenttrail report` data: buckets, summary, worst runs, drift, alerts):")
        for label, report in (
            ()
            if "report" in skip
            else (
                ("1 day, all agents", ReportQuery(since=day, until=until)),
                ("7 days, all agents", ReportQuery(since=week, until=until)),
                ("7 days, one agent", ReportQuery(since=week, until=until, agent="support-bot")),
            )
        ):
            rows = timed(label, partial(report_rows, store, report))
            print(f"    -> {len(rows)} rows")
        print("console agent overview (the page's data, without rendering):")
        for label, since in () if "overview" in skip else (("1 day", "1d"), ("7 days", "7d")):
            found = timed(label, partial(agent_overview, store, "billing-bot", since=since, until=""))
            print(f"    -> {found.runs:,} runs, {len(found.worst)} worst runs")
        print("inserts of 1,000 runs (what the rollups' materialized views add to assembly):")
        for label, changes in (
            ()
            if "inserts" in skip
            else (
                (
                    "first assemblies (Revision 1)",
                    "concat('n', toString(rand64()), TraceId) AS TraceId, 1 AS Revision",
                ),
                (
                    "re-assemblies, same start (Revision + 1)",
                    "Revision + 1 AS Revision, Version + 1 AS Version",
                ),
                (
                    "re-assemblies, start moved (Revision + 1)",
                    "Revision + 1 AS Revision, Version + 2 AS Version, Start + toIntervalSecond(7) AS Start",
                ),
            )
        ):
            timed(
                label,
                partial(
                    store.command,
                    f"INSERT INTO trajectories SELECT * REPLACE ({changes}) FROM trajectories "
                    "WHERE TraceId IN (SELECT TraceId FROM trajectories WHERE Revision = 1 LIMIT 1000) "
                    "AND Revision = 1",
                ),
                repeat=1,
            )
        if "inserts" not in skip:  # what the scores' views add to scoring (4 scores a run)
            timed(
                "scores of 1,000 runs (re-scored)",
                partial(
                    store.command,
                    "INSERT INTO scores SELECT * REPLACE (now64(6) AS CreatedAt) FROM scores FINAL "
                    "WHERE TraceId < '004189'",  # ~1,000 runs: a range of the scores' key
                ),
                repeat=1,
            )
        store.close()


if __name__ == "__main__":
    main()
