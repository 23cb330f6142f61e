"""Metrics export and report benchmark on the embedded store. Prints figures; asserts nothing.

- feed: runs and scores per second that `MetricsFeed` reads from the store and records into the
  OTel instruments (the Prometheus reader attached), and the time to render `/metrics`;
- report: time of `report_rows` (all of the report's queries) over RUNS stored runs spread over
  a day, and of drawing one agent's PNG.
"""

from __future__ import annotations

import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store, parse_store
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.monitoring.export_config import MetricsExportConfig
from agenttrail.evaluators.monitoring.exporter import MetricsFeed
from agenttrail.evaluators.monitoring.instruments import AgentMetrics
from agenttrail.evaluators.monitoring.plots import agent_figure
from agenttrail.evaluators.monitoring.report_data import Report, ReportQuery, report_rows

FEED_RUNS = 100_000
REPORT_RUNS = 1_000_000
AGENTS = 5

# Synthetic runs made by ClickHouse itself (one INSERT ... SELECT), `AssembledAt` {assembled} and
# `Start` spread over the day before {now}.
_RUNS = """
INSERT INTO trajectories (TraceId, RootSpanId, Agent, Task, Start, LatencyS, Failure, ToolCount, ToolNames,
    ToolStatuses, ToolCalls, InputTokens, OutputTokens, Revision, AssembledAt, Version, IsDeleted)
SELECT hex(sipHash128(number)), hex(sipHash64(number)), concat('agent-', toString(number % {agents:UInt32})),
    'task', toDateTime64({now:Float64} - 86400 * number / {runs:UInt32}, 6), 0.5 + (number % 97) / 20,
    number % 13 = 0, 2, ['lookup', 'refund'], ['ok', if(number % 13 = 0, 'error', 'ok')], '[]', 100, 20, 1,
    toDateTime64({assembled:Float64} + number / 1e6, 6), 1, 0
FROM numbers({runs:UInt32})
"""
_SCORES = """
INSERT INTO scores (TraceId, RootSpanId, Metric, Evaluator, EvaluatorVersion, Score, Label, Agent, Task,
    RunStart, Revision, CreatedAt)
SELECT TraceId, RootSpanId, 'trajectory_recall', 'trajectory', 'v1', (cityHash64(TraceId) % 100) / 100, '',
    Agent, Task, Start, 1, AssembledAt
FROM trajectories
"""


def seed(store: Store, runs: int, assembled: float) -> None:
    params = {"agents": AGENTS, "now": time.time(), "runs": runs, "assembled": assembled}
    store.command(_RUNS, params)
    store.command(_SCORES)


def bench_feed(directory: Path) -> None:
    store = Store(parse_store(str(directory), "feed"))
    migrate(store, ALL_MIGRATIONS)
    started = time.time()
    seed(store, FEED_RUNS, assembled=started - 30)
    config = MetricsExportConfig(settle_s=0)
    feed = MetricsFeed(
        store.clone, lambda: AgentMetrics(config), started_us=int((started - 60) * 1e6), batch_size=5000
    )
    feed.metrics = AgentMetrics(config)
    begun = time.perf_counter()
    while feed.run_once():
        pass
    elapsed = time.perf_counter() - begun
    print(
        f"feed: {feed.runs_seen} runs + {feed.scores_seen} scores in {elapsed:.2f} s "
        f"({(feed.runs_seen + feed.scores_seen) / elapsed:,.0f} rows/s)"
    )
    begun = time.perf_counter()
    _, page = feed.metrics.prometheus_page({})
    print(f"/metrics render: {1000 * (time.perf_counter() - begun):.1f} ms ({len(page):,} bytes)")
    feed.metrics.shutdown()
    store.close()


def bench_report(directory: Path) -> None:
    store = Store(parse_store(str(directory), "report"))
    migrate(store, ALL_MIGRATIONS)
    begun = time.perf_counter()
    seed(store, REPORT_RUNS, assembled=time.time())
    print(f"seeded {REPORT_RUNS:,} runs + scores in {time.perf_counter() - begun:.1f} s")
    now = time.time()
    until = datetime.fromtimestamp(now, UTC)
    query = ReportQuery(since=until - timedelta(days=1), until=until)
    for attempt in ("cold", "warm"):
        begun = time.perf_counter()
        rows = report_rows(store, query)
        elapsed = time.perf_counter() - begun
        print(f"report_rows over {REPORT_RUNS:,} runs ({attempt}): {elapsed:.2f} s, {len(rows)} rows")
    report = Report.from_rows(rows)
    agent = next(iter(report.agents.values()))
    begun = time.perf_counter()
    png = agent_figure(agent, report.bucket_s, report.until)
    print(f"one agent's figure: {time.perf_counter() - begun:.2f} s ({len(png):,} bytes PNG)")
    store.close()


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="agenttrail-bench-export-") as directory:
        bench_feed(Path(directory))
        if "--quick" not in sys.argv:
            bench_report(Path(directory))


if __name__ == "__main__":
    main()
