"""`agenttrail report`: write the monitoring report (HTML with embedded plots, or PNGs); what it
reads and writes is `monitoring/service.py`'s.

Reads through the running sidecar's `/api/v1/report` while `serve` holds the embedded store (or
from `--server`), else from the store itself, as the other read commands do.
"""

from __future__ import annotations

from pathlib import Path

import click

from agenttrail.collector.cli import store_options
from agenttrail.evaluators.cli.read import read_rows, server_option, usage_errors


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
    from agenttrail.evaluators.monitoring.service import report_read, write_monitoring_report

    with usage_errors():
        query, read = report_read(since=since, until=until, agent=agent, bucket=bucket, worst=worst)
    rows = read_rows(store, database, config_file, server, read)
    written = write_monitoring_report(query, rows, output_format, out)
    if not written.agents:
        click.echo(
            f"no agent runs between {written.since:%Y-%m-%d %H:%M} and {written.until:%Y-%m-%d %H:%M} UTC",
            err=True,
        )
    for path in written.paths:
        click.echo(f"wrote {path}")
