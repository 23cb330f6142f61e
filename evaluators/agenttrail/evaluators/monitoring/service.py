"""What `agenttrail stats`, `drift` and `report` do, as functions tests and other callers use
without click: check the user's values (QueryError names the one that cannot be read, the CLI's
usage error), take the config section they need parsed (the CLI reads it env over file, as serve
does), and describe the read (`ReadRequest`:
the sidecar route with its parameters, and the same rows computed on a store) for the caller to
make wherever the data is. `write_monitoring_report` turns the report's rows into files.

Importing this module stays light (`agenttrail --help`): scipy loads only when drift is
computed, matplotlib only when the report is drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agenttrail.collector.reads import ReadRequest, time_range
from agenttrail.evaluators.monitoring.install import with_overrides
from agenttrail.evaluators.monitoring.report import REPORT_ROUTE  # matplotlib loads when drawing
from agenttrail.evaluators.monitoring.report_data import Report, ReportQuery, report_rows
from agenttrail.evaluators.monitoring.stats import StatsQuery, parse_bucket, query_stats, split_list

if TYPE_CHECKING:
    from agenttrail.collector.store import Store
    from agenttrail.evaluators.monitoring.drift_monitor import DriftConfig

STATS_ROUTE = "/api/v1/stats"
DRIFT_ROUTE = "/api/v1/drift"


def stats_read(
    *,
    since: str = "24h",
    until: str | None = None,
    agent: str | None = None,
    task: str | None = None,
    bucket: str = "1h",
    by: str = "",
    metrics: Sequence[str] = (),
) -> tuple[StatsQuery, ReadRequest]:
    """Per agent and time bucket: runs, failure rate, latency percentiles, tools, tokens, scores.
    `by` and each of `metrics` may be comma-separated lists."""
    start, end = time_range(since, until)
    query = StatsQuery(
        since=start,
        until=end,
        bucket_s=parse_bucket(bucket, what="--bucket"),
        agent=agent,
        task=task,
        by=split_list(by),
        metrics=split_list(",".join(metrics)),
    )
    return query, ReadRequest(STATS_ROUTE, query.to_params(), lambda store: query_stats(store, query))


def drift_read(
    config: DriftConfig,
    *,
    recent: str = "1h",
    baseline: str | None = None,
    baseline_from: str | None = None,
    baseline_to: str | None = None,
    baseline_version: str | None = None,
    agent: str | None = None,
    task: str | None = None,
    metrics: Sequence[str] = (),
    now: str | None = None,
    min_samples: int | None = None,
    alpha: float | None = None,
) -> ReadRequest:
    """Each agent's recent window against its baseline, metric by metric, with the `drift:`
    section's settings (`min_samples` / `alpha` given here win); rows as `DriftResult.to_json`."""
    from agenttrail.evaluators.monitoring.drift import DriftQuery

    given = {
        "recent": recent,
        "baseline": baseline,
        "baseline_from": baseline_from,
        "baseline_to": baseline_to,
        "baseline_version": baseline_version,
        "agent": agent,
        "task": task,
        "metric": ",".join(metrics),
        "now": now,
    }
    query = DriftQuery.from_params({key: value for key, value in given.items() if value})
    settings = with_overrides(config.settings, min_samples, alpha)
    overrides = {k: str(v) for k, v in {"min_samples": min_samples, "alpha": alpha}.items() if v is not None}

    def local(store: Store) -> list[dict[str, Any]]:
        from agenttrail.evaluators.monitoring.drift import analyse_drift  # scipy

        return [result.to_json() for result in analyse_drift(store, query, settings)]

    return ReadRequest(DRIFT_ROUTE, {**query.to_params(), **overrides}, local)


DRIFT_ORDER = {"drift": 0, "no_drift": 1}  # then insufficient data and the rest


def drift_first(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with drift first, then no drift, then the tests that could not be decided."""
    return sorted(rows, key=lambda row: DRIFT_ORDER.get(row["status"], 2))


def report_read(
    *,
    since: str = "24h",
    until: str | None = None,
    agent: str | None = None,
    bucket: str | None = None,
    worst: int = 5,
) -> tuple[ReportQuery, ReadRequest]:
    """The monitoring report's rows over the range (at most 60 buckets unless `bucket` says)."""
    start, end = time_range(since, until)
    query = ReportQuery(
        since=start,
        until=end,
        agent=agent,
        bucket_s=parse_bucket(bucket) if bucket else None,
        worst=worst,
    )
    return query, ReadRequest(REPORT_ROUTE, query.to_params(), lambda store: report_rows(store, query))


@dataclass(frozen=True, slots=True)
class ReportWritten:
    """The files written, and the agents the report covers (none: no runs in the range)."""

    paths: list[Path]
    agents: list[str]
    since: datetime
    until: datetime


def write_monitoring_report(
    query: ReportQuery, rows: Sequence[dict[str, Any]], output_format: str = "html", out: Path | None = None
) -> ReportWritten:
    """Write the report's rows as one HTML page with the plots embedded (`out`, default
    agenttrail-report.html) or one PNG per agent (directory `out`, default agenttrail-report/)."""
    from agenttrail.evaluators.monitoring.report import write_report  # matplotlib

    report = Report.from_rows(rows)
    target = out or Path("agenttrail-report" + (".html" if output_format == "html" else ""))
    paths = write_report(report, output_format, target)
    return ReportWritten(paths, list(report.agents), query.since, query.until)
