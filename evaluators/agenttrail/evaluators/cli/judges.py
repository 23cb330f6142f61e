"""`agenttrail audit`, `backfill` and `judges`: what the evaluators decided, judging past runs,
and the judges in force.

Each works the same with and without `serve` holding the embedded store. `audit` and `judges
list` read through the sidecar's read API. `backfill` runs in the sidecar as a job (the CLI
starts it through the admin API, prints its progress and cancels it on Ctrl-C), with the judge
the sidecar has in force; the CLI sends the fingerprint of the judge in its own config file, so
an edit not yet reloaded is an error, not a silent backfill with the old judge. `judges reload`
makes the sidecar read its config file's judges section again (as SIGHUP does).

The sections are read as serve reads them (`config_sections`: env AGENTTRAIL_<SECTION>_<KEY>
over the file), and only where the command itself uses them, not when a sidecar answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from agenttrail.collector.cli import (
    SidecarApi,
    check_trace_found,
    cli_error,
    config_from,
    emit_rows,
    read_rows,
    resolve_trace_id,
    run_filter,
    running_sidecar,
    store_options,
)
from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.store import Store
from agenttrail.evaluators import config_sections
from agenttrail.evaluators.cli.common import open_store
from agenttrail.evaluators.composition import ALL_MIGRATIONS

if TYPE_CHECKING:
    from agenttrail.evaluators.judges.config import JudgesConfig


@click.command()
@click.argument("trace_id", metavar="TRACE_ID")
@store_options
@click.option(
    "--format", "output_format", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option(
    "--server",
    help="Ask a running sidecar's HTTP API at this URL (http://host:4318), "
    "sending serve's token from AGENTTRAIL_BEARER_TOKEN.",
)
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
        from agenttrail.evaluators.judges.service import audit_decisions

        evaluator = config_sections.load_evaluators(config_file)
        return audit_decisions(source, trace_id, evaluator, _judges(config_file))

    rows = read_rows(config, server, "/api/v1/decisions", {"trace_id": trace_id}, on_store, ALL_MIGRATIONS)
    if not rows:
        check_trace_found(config, server, trace_id)
    emit_rows(
        rows,
        output_format,
        empty=f"no run with trace id {trace_id} (not assembled yet, or never received)",
        headers=["root span", "rev", "agent", "task", "evaluator", "version", "decision", "detail"],
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


def _progress(report: dict[str, Any]) -> None:
    counts = report["decisions"]
    click.echo(
        f"backfill {report['judge']}: {report['decided']} runs decided "
        f"({counts.get('done', 0)} judged, {counts.get('error', 0)} errors, "
        f"{counts.get('filtered', 0)} filtered, {counts.get('sampled_out', 0)} sampled out)",
        err=True,
    )


@click.command("backfill")
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

    Runs already decided for that version are skipped; older versions' results are kept. While
    `serve` holds the store, the sidecar runs it with the judge it has in force (after an edit,
    `agenttrail judges reload` first); Ctrl-C stops it after the current batch."""
    from agenttrail.evaluators.admin.service import backfill_judge
    from agenttrail.evaluators.judges.service import judge_spec

    runs = run_filter(since, until, agent, task, None, limit)
    try:
        spec = judge_spec(config_file, _judges(config_file), judge_name)
    except AgentTrailError as exc:
        raise cli_error(exc) from exc
    api = running_sidecar(config_from({"store": store, "database": database}, config_file), None)
    target: SidecarApi | Store = api if api is not None else open_store(store, database, config_file)

    def started(job: str) -> None:
        assert api is not None
        click.echo(
            f"backfill runs in the sidecar at {api.base_url}, which holds the store (job {job})", err=True
        )

    try:
        report = backfill_judge(target, spec, runs, dry_run=dry_run, progress=_progress, started=started)
    except KeyboardInterrupt:
        raise click.ClickException(
            "interrupted: the sidecar stops this backfill after its current batch; the runs decided so far "
            "stay decided, and the same command continues with the rest"
        ) from None
    except AgentTrailError as exc:
        raise cli_error(exc) from exc
    finally:
        if isinstance(target, Store):
            target.close()
    name = f"{report.judge}@{report.version}"
    if dry_run:
        would = report.would
        total = sum(would.values())
        click.echo(
            f"dry run: {total} run(s) not yet decided by {name}: {would.get('judge', 0)} would be judged, "
            f"{would.get('filtered', 0)} filtered, {would.get('sampled_out', 0)} sampled out"
        )
        return
    counts = report.decisions
    click.echo(
        f"backfill {name}: {report.decided} run(s) decided: {counts.get('done', 0)} judged, "
        f"{counts.get('error', 0)} error(s), {counts.get('filtered', 0)} filtered, "
        f"{counts.get('sampled_out', 0)} sampled out; "
        f"{report.prompt_tokens} prompt + {report.completion_tokens} completion tokens, "
        f"cost {report.cost:.4f}"
    )
    if report.paused:
        raise click.ClickException(
            f"stopped: {report.paused}; {counts.get('budget_paused', 0)} run(s) stay pending, "
            "run the same command again then to continue"
        )


@click.group()
def judges() -> None:
    """The LLM judges of the config file: list those in force, reload an edited judges section."""


@judges.command("list")
@store_options
@click.option(
    "--format", "output_format", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option(
    "--server",
    help="Ask a running sidecar's HTTP API at this URL (http://host:4318), "
    "sending serve's token from AGENTTRAIL_BEARER_TOKEN.",
)
def judges_list(
    store: str | None, database: str | None, config_file: str | None, output_format: str, server: str | None
) -> None:
    """The judges with their versions: those in force in the running sidecar, else the config file's."""
    from agenttrail.evaluators.judges.service import list_judges

    config = config_from({"store": store, "database": database}, config_file)
    try:
        rows = list_judges(running_sidecar(config, server), lambda: _judges(config_file))
    except AgentTrailError as exc:
        raise cli_error(exc) from exc
    emit_rows(
        rows,
        output_format,
        empty="no judges configured (the config file's judges: section; see deploy/agenttrail.yaml)",
        headers=["judge", "type", "model", "enabled", "version", "sample", "agents", "tasks", "failure"],
        cells=lambda r: (
            r["name"],
            r["type"],
            r["model"],
            "yes" if r["enabled"] else "no",
            r["version"] or "-",
            r["sample_rate"],
            ",".join(r["agents"]) or "all",
            ",".join(r["tasks"]) or "all",
            r["failure"],
        ),
    )


def _judges(config_file: str | None) -> JudgesConfig:
    """The online judges as serve reads them: env over `config_file`, with judge_defaults."""
    return config_sections.load_judges(config_file).judges


def _names(names: list[str], key: str) -> str:
    return f"{len(names)} {key}" + (f" ({', '.join(names)})" if names else "")


@judges.command("reload")
@store_options
@click.option(
    "--server",
    help="Reload a running sidecar at this URL (http://host:4318), "
    "sending serve's token from AGENTTRAIL_BEARER_TOKEN.",
)
def judges_reload(
    store: str | None, database: str | None, config_file: str | None, server: str | None
) -> None:
    """Make the running sidecar take its config file's edited judges section, without a restart.

    The same as SIGHUP to serve. A section it refuses (exit 3, the error names the judge and key)
    leaves the judges in force as they were. With no sidecar running, checks the section as serve
    does when it starts."""
    from agenttrail.evaluators.judges.service import JudgesChecked, JudgesUsageError, reload_judges

    config = config_from({"store": store, "database": database}, config_file)
    try:
        outcome = reload_judges(running_sidecar(config, server), config_file, lambda: _judges(config_file))
    except JudgesUsageError as exc:
        raise click.UsageError(str(exc)) from exc
    except AgentTrailError as exc:
        raise cli_error(exc) from exc
    if isinstance(outcome, JudgesChecked):
        enabled = outcome.enabled
        click.echo(
            f"no sidecar holds the store at {config.store}: nothing to reload. {outcome.config_file}: "
            f"{len(outcome.judges)} judge(s) valid, {len(enabled)} enabled ({', '.join(enabled) or 'none'}); "
            "serve takes them when it starts"
        )
        return
    if outcome.other_file:
        click.echo(
            f"note: the sidecar reads its own config file {outcome.config_file}, not {config_file}",
            err=True,
        )
    click.echo(
        f"judges reloaded from {outcome.config_file}: "
        + ", ".join(_names(names, key) for key, names in outcome.changes.to_json().items())
    )
