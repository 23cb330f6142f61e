"""`agenttrail stats` and `agenttrail drift` (their read routes and the sidecar's drift monitor
are monitoring/install.py's). scipy loads only where drift is computed here. `drift` reads the
`drift:` section as serve does (env AGENTTRAIL_DRIFT_<KEY> over the file).
"""

from __future__ import annotations

from typing import Any

import click

from agenttrail.collector.cli import cli_error, emit_rows, store_options
from agenttrail.collector.durations import format_duration
from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.queries import QueryError
from agenttrail.evaluators import config_sections
from agenttrail.evaluators.cli.read import format_option, read_rows, server_option, usage_errors
from agenttrail.evaluators.monitoring.display import (
    STATUS_MARKS,
    drift_summary,
    format_effect,
    format_evidence,
    format_value,
)
from agenttrail.evaluators.monitoring.stats import GROUPS


@click.command()
@store_options
@click.option(
    "--since", default="24h", show_default=True, help="Start: ISO 8601 or a duration back (2h, 7d)."
)
@click.option("--until", help="End, same forms as --since [default: now].")
@click.option("--agent", help="Only this agent.")
@click.option("--task", help="Only this task.")
@click.option("--bucket", default="1h", show_default=True, help="Time bucket, 1m to 1d (5m, 1h, 1d).")
@click.option("--by", default="", help=f"Also group by, comma-separated: {', '.join(GROUPS)}.")
@click.option("--metric", multiple=True, help="Only these evaluation metrics (repeat or comma-separate).")
@format_option
@server_option
def stats(
    store: str | None,
    database: str | None,
    config_file: str | None,
    since: str,
    until: str | None,
    agent: str | None,
    task: str | None,
    bucket: str,
    by: str,
    metric: tuple[str, ...],
    output_format: str,
    server: str | None,
) -> None:
    """Per agent and time bucket: runs, failure rate, latency percentiles, tool errors, tokens, scores."""
    from agenttrail.evaluators.monitoring.service import stats_read

    with usage_errors():
        query, read = stats_read(
            since=since, until=until, agent=agent, task=task, bucket=bucket, by=by, metrics=metric
        )
    rows = read_rows(store, database, config_file, server, read)
    emit_rows(
        rows,
        output_format,
        empty="no runs in that period",
        headers=[
            "bucket start",
            "agent",
            *query.by,
            "runs",
            "fail",
            "p50",
            "p95",
            "p99",
            "tokens in/out",
            "tool errors",
            "scores (mean±sd n)",
        ],
        cells=lambda row: (
            row["bucket_start"][:16].replace("T", " "),
            row["agent"],
            *(row[name] or "-" for name in query.by),
            row["runs"],
            _percent(row["failure_rate"]),
            *(format_duration(row[f"latency_{p}_s"]) for p in ("p50", "p95", "p99")),
            f"{row['input_tokens']}/{row['output_tokens']}",
            _tool_errors(row["tools"]),
            _scores(row["metrics"]),
        ),
    )


def _percent(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.1%}"


def _tool_errors(tools: dict[str, dict[str, Any]]) -> str:
    failing = [f"{name} {t['errors']}/{t['calls']}" for name, t in sorted(tools.items()) if t["errors"]]
    return ", ".join(failing) or "-"


def _scores(metrics: dict[str, dict[str, Any]]) -> str:
    return (
        "; ".join(
            f"{name} {m['mean']:.3f}±{m['std']:.3f} n={m['count']}"
            for name, m in sorted(metrics.items())
            if m["count"]
        )
        or "-"
    )


@click.command()
@store_options
@click.option("--recent", default="1h", show_default=True, help="The recent window, ending now (or --now).")
@click.option(
    "--baseline", "rolling", help="Baseline: the window of this length just before the recent one [24h]."
)
@click.option(
    "--baseline-from", help="Baseline: a fixed period from this time (ISO 8601 or a duration back)."
)
@click.option("--baseline-to", help="End of the fixed baseline period.")
@click.option(
    "--baseline-version", help="Baseline: runs of this agent version (within --baseline-from/to if given)."
)
@click.option("--agent", help="Only this agent.")
@click.option("--task", help="Only runs of this task.")
@click.option(
    "--metric",
    multiple=True,
    help="Only these metrics: failure_rate, latency, trajectory_length, tool_distribution, a score.",
)
@click.option("--now", help="End the recent window here instead of now (ISO 8601), to re-check the past.")
@click.option(
    "--min-samples",
    type=click.IntRange(min=2),
    help="Fewest values per window to call drift [config, else 30].",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    help="Significance level after Benjamini-Hochberg [config, else 0.01].",
)
@click.option(
    "--all", "show_all", is_flag=True, hidden=True, help="Kept for scripts: every test is listed now."
)
@format_option
@server_option
def drift(
    store: str | None,
    database: str | None,
    config_file: str | None,
    recent: str,
    rolling: str | None,
    baseline_from: str | None,
    baseline_to: str | None,
    baseline_version: str | None,
    agent: str | None,
    task: str | None,
    metric: tuple[str, ...],
    now: str | None,
    min_samples: int | None,
    alpha: float | None,
    show_all: bool,
    output_format: str,
    server: str | None,
) -> None:
    """Compare each agent's recent window with a baseline, metric by metric, and call drift."""
    from agenttrail.evaluators.monitoring.service import drift_read

    try:
        read = drift_read(
            config_sections.load_drift(config_file),
            recent=recent,
            baseline=rolling,
            baseline_from=baseline_from,
            baseline_to=baseline_to,
            baseline_version=baseline_version,
            agent=agent,
            task=task,
            metrics=metric,
            now=now,
            min_samples=min_samples,
            alpha=alpha,
        )
    except QueryError as exc:
        raise click.BadParameter(str(exc)) from exc
    except AgentTrailError as exc:
        raise cli_error(exc) from exc
    rows = read_rows(store, database, config_file, server, read)
    from agenttrail.evaluators.monitoring.service import drift_first

    if output_format == "table":
        asked = {
            "agent": agent,
            "task": task,
            "metric": ",".join(metric),
            "baseline-version": baseline_version,
        }
        click.echo(drift_summary(rows, asked))  # first: the answer before the detail
        if not rows:
            return
    emit_rows(
        drift_first(rows) if output_format == "table" else rows,
        output_format,
        empty="",
        headers=[
            "",
            "agent",
            "metric",
            "test",
            "p (adjusted) / alarm",
            "effect",
            "n base/recent",
            "base -> recent",
        ],
        cells=lambda r: (
            STATUS_MARKS.get(r["status"], r["status"]),
            r["agent"],
            r["metric"],
            r["test"],
            format_evidence(r),
            format_effect(r["effect"], r["effect_size"]),
            f"{r['baseline_n']}/{r['recent_n']}",
            " -> ".join(format_value(r["metric"], r[key]) for key in ("baseline_value", "recent_value")),
        ),
    )
