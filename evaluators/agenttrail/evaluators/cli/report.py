"""`agenttrail report`: write the monitoring report (HTML with embedded plots, or PNGs).

Reads through the running sidecar's `/api/v1/report` while `serve` holds the embedded store (or
from `--server`), else from the store itself, as the other read commands do.
"""

from __future__ import annotations

from pathlib import Path

import click

from agenttrail.collector.cli import store_options
from agenttrail.evaluators.cli.read import read_rows, server_option, time_range, usage_errors
from agenttrail.evaluators.monitoring.report_data import Report, ReportQuery, report_rows
from agenttrail.evaluators.monitoring.stats import parse_bucket


def _query(since: str, until: str | None, agent: str | None, bucket: str | None, worst: int) -> ReportQuery:
    with usage_errors():
        start, end = time_range(since, until)
        return ReportQuery(
            since=start,
            until=end,
            agent=agent,
            bucket_s=parse_bucket(bucket) if bucket else None,
            worst=worst,
        )


@click.command("report")
@store_options
@click.option(
    "--since",
    default="24h",
    show_default=True,
    help="Runs started after: ISO 8601 or a duration back from now (15m, 2h, 7d).",
)
@click.option("--until", help="Runs started before, same forms as --since (default: now).")
@click.option("--agent", help="Only this agent.")
@click.option(
    "--bucket", help="Time bucket, 1m to 1d (e.g. 5m, 1h); default: at most 60 buckets over the range."
)
@click.option(
    "--worst", default=5, show_default=True, type=click.IntRange(1, 100), help="Runs per worst-runs table."
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["html", "png"]),
    default="html",
    show_default=True,
    help="One HTML page with the plots embedded, or one PNG per agent.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="HTML file (default agenttrail-report.html) or PNG directory (default agenttrail-report/).",
)
@server_option
def report_command(
    store: str | None,
    database: str | None,
    config_file: str | None,
    since: str,
    until: str | None,
    agent: str | None,
    bucket: str | None,
    worst: int,
    output_format: str,
    out: Path | None,
    server: str | None,
) -> None:
    """Per agent: runs, failure rate, latency percentiles and evaluation scores over time, with
    drift points and alert periods marked, and the worst runs with their trajectories."""
    from agenttrail.evaluators.monitoring.report import REPORT_ROUTE, write_report  # matplotlib

    query = _query(since, until, agent, bucket, worst)
    rows = read_rows(
        store, database, config_file, server, REPORT_ROUTE, query.to_params(), lambda s: report_rows(s, query)
    )
    report = Report.from_rows(rows)
    target = out or Path("agenttrail-report" + (".html" if output_format == "html" else ""))
    if not report.agents:
        click.echo(
            f"no agent runs between {query.since:%Y-%m-%d %H:%M} and {query.until:%Y-%m-%d %H:%M} UTC",
            err=True,
        )
    for path in write_report(report, output_format, target):
        click.echo(f"wrote {path}")
