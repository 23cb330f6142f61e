"""`agenttrail audit` and `agenttrail backfill`: what the evaluators decided, and judging past runs.

`audit` reads, so it works while `serve` holds the embedded store (through the sidecar's
`/api/v1/decisions`). `backfill` writes scores and decisions: it opens the store itself and so
refuses while `serve` holds an embedded store (stop serve, or share a ClickHouse server); the
sidecar's read API is GET-only and a long judging job does not belong in a request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from agenttrail.collector.cli import (
    cli,
    config_from,
    emit_rows,
    read_rows,
    resolve_trace_id,
    run_filter,
    store_options,
)
from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.store import Store
from agenttrail.evaluators.cli import ALL_MIGRATIONS, open_store

if TYPE_CHECKING:
    from agenttrail.evaluators.backfill import BackfillReport


@cli.command()
@click.argument("trace_id", metavar="TRACE_ID")
@store_options
@click.option("--format", "output_format", type=click.Choice(["table", "json"]), default="table")
@click.option("--server", help="Ask a running sidecar's HTTP API at this URL (http://host:4318).")
def audit(
    trace_id: str,
    store: str | None,
    database: str | None,
    config_file: str | None,
    output_format: str,
    server: str | None,
) -> None:
    """Every evaluator's decision on a run (the deterministic one and each configured judge).

    TRACE_ID is the run's trace id or a unique prefix of it (8+ hex, as tables show).
    Decisions: scored/done, sampled_out, filtered, error, budget_paused, or pending."""
    config = config_from({"store": store, "database": database}, config_file)
    trace_id = resolve_trace_id(config, server, trace_id) or trace_id

    def on_store(source: Store) -> list[dict[str, Any]]:
        from agenttrail.evaluators.audit import audit_run
        from agenttrail.evaluators.judge_config import JudgesConfig
        from agenttrail.evaluators.judge_setup import audit_subjects, build_online_judges
        from agenttrail.evaluators.worker import EvaluatorConfig

        evaluator = EvaluatorConfig.from_file(config_file)
        judges = JudgesConfig.from_file(config_file)
        subjects = audit_subjects(evaluator, judges, build_online_judges(judges))
        return audit_run(source, trace_id, subjects, lookback_s=evaluator.lookback_s)

    rows = read_rows(config, server, "/api/v1/decisions", {"trace_id": trace_id}, on_store, ALL_MIGRATIONS)
    emit_rows(
        rows,
        output_format,
        empty=f"no run with trace id {trace_id} (not assembled yet, or never received)",
        headers=["run", "rev", "agent", "task", "evaluator", "version", "decision", "detail"],
        cells=lambda r: (
            r["root_span_id"],
            r["revision"],
            r["agent"],
            r["task"],
            r["evaluator"],
            r["version"][:24],
            r["decision"],
            r["detail"],
        ),
    )


def _progress(report: BackfillReport) -> None:
    counts = report.outcome.decisions
    click.echo(
        f"backfill {report.judge}: {report.decided} runs decided "
        f"({counts['done']} judged, {counts['error']} errors, {counts['filtered']} filtered, "
        f"{counts['sampled_out']} sampled out)",
        err=True,
    )


@cli.command("backfill")
@click.option(
    "--judge", "judge_name", required=True, help="The configured judge to run (its current version)."
)
@click.option("--since", required=True, help="Runs started after: ISO 8601 or a duration back (7d).")
@click.option("--until", help="Runs started before, same forms as --since.")
@click.option("--agent", help="Only this agent.")
@click.option("--task", help="Only this task.")
@click.option(
    "--limit", default=10_000, show_default=True, type=click.IntRange(min=1), help="Most runs to decide."
)
@click.option("--dry-run", is_flag=True, help="Count what would be judged; call no model, write nothing.")
@store_options
def backfill_command(
    judge_name: str,
    since: str,
    until: str | None,
    agent: str | None,
    task: str | None,
    limit: int,
    dry_run: bool,
    store: str | None,
    database: str | None,
    config_file: str | None,
) -> None:
    """Judge past runs with a new or changed judge (its current version).

    Runs already decided for that version are skipped; older versions' results are kept."""
    from agenttrail.evaluators.backfill import backfill
    from agenttrail.evaluators.judge_config import JudgesConfig
    from agenttrail.evaluators.judge_runs import pause_text
    from agenttrail.evaluators.judge_setup import build_online_judge

    runs = run_filter(since, until, agent, task, None, limit)
    if not config_file:
        raise click.ClickException("backfill needs the config file that defines the judge: pass --config")
    try:
        online = build_online_judge(JudgesConfig.from_file(config_file).get(judge_name))
    except AgentTrailError as exc:
        raise click.ClickException(str(exc)) from exc
    target = open_store(store, database, config_file)
    try:
        report = backfill(target, online, runs, dry_run=dry_run, progress=_progress)
    except AgentTrailError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        target.close()
    name = f"{online.name}@{online.version}"
    if dry_run:
        would = report.would
        total = sum(would.values())
        click.echo(
            f"dry run: {total} run(s) not yet decided by {name}: {would['judge']} would be judged, "
            f"{would['filtered']} filtered, {would['sampled_out']} sampled out"
        )
        return
    counts, outcome = report.outcome.decisions, report.outcome
    click.echo(
        f"backfill {name}: {report.decided} run(s) decided: {counts['done']} judged, "
        f"{counts['error']} error(s), {counts['filtered']} filtered, {counts['sampled_out']} sampled out; "
        f"{outcome.prompt_tokens} prompt + {outcome.completion_tokens} completion tokens, "
        f"cost {outcome.cost:.4f}"
    )
    if outcome.pause is not None:
        raise click.ClickException(
            f"stopped: {pause_text(outcome.pause)}; {counts['budget_paused']} run(s) stay pending, "
            "run the same command again then to continue"
        )
