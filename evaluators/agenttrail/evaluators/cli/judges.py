"""`agenttrail audit`, `backfill` and `judges`: what the evaluators decided, judging past runs,
and the judges in force.

Each works the same with and without `serve` holding the embedded store. `audit` and `judges
list` read through the sidecar's read API. `backfill` runs in the sidecar as a job (the CLI
starts it through the admin API, prints its progress and cancels it on Ctrl-C), with the judge
the sidecar has in force; the CLI sends the fingerprint of the judge in its own config file, so
an edit not yet reloaded is an error, not a silent backfill with the old judge. `judges reload`
makes the sidecar read its config file's judges section again (as SIGHUP does).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agenttrail.collector.cli import (
    SidecarApi,
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
from agenttrail.evaluators.cli.common import open_store
from agenttrail.evaluators.composition import ALL_MIGRATIONS

if TYPE_CHECKING:
    from agenttrail.collector.queries import TrajectoryFilter
    from agenttrail.evaluators.judges.config import JudgeSpec


@click.command()
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
        from agenttrail.evaluators.judges.config import JudgesConfig
        from agenttrail.evaluators.judges.registry import ClientPool
        from agenttrail.evaluators.judges.setup import audit_subjects, build_online_judges
        from agenttrail.evaluators.scoring.audit import audit_run
        from agenttrail.evaluators.scoring.worker import EvaluatorConfig

        evaluator = EvaluatorConfig.from_file(config_file)
        judges = JudgesConfig.from_file(config_file)
        pool = ClientPool(store_factory=lambda: source)  # a saved criteria set's version: this store's
        subjects = audit_subjects(evaluator, judges, build_online_judges(judges, pool))
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
    from agenttrail.evaluators.judges.config import JudgesConfig

    runs = run_filter(since, until, agent, task, None, limit)
    if not config_file:
        raise click.ClickException("backfill needs the config file that defines the judge: pass --config")
    try:
        spec = JudgesConfig.from_file(config_file).get(judge_name)
    except AgentTrailError as exc:
        raise cli_error(exc) from exc
    api = running_sidecar(config_from({"store": store, "database": database}, config_file), None)
    if api is not None:
        report = _backfill_in_sidecar(api, spec, runs, dry_run)
    else:
        report = _backfill_here(spec, runs, dry_run, store, database, config_file)
    name = f"{report['judge']}@{report['version']}"
    if dry_run:
        would = report["would"]
        total = sum(would.values())
        click.echo(
            f"dry run: {total} run(s) not yet decided by {name}: {would.get('judge', 0)} would be judged, "
            f"{would.get('filtered', 0)} filtered, {would.get('sampled_out', 0)} sampled out"
        )
        return
    counts = report["decisions"]
    click.echo(
        f"backfill {name}: {report['decided']} run(s) decided: {counts.get('done', 0)} judged, "
        f"{counts.get('error', 0)} error(s), {counts.get('filtered', 0)} filtered, "
        f"{counts.get('sampled_out', 0)} sampled out; "
        f"{report['prompt_tokens']} prompt + {report['completion_tokens']} completion tokens, "
        f"cost {report['cost']:.4f}"
    )
    if report["paused"]:
        raise click.ClickException(
            f"stopped: {report['paused']}; {counts.get('budget_paused', 0)} run(s) stay pending, "
            "run the same command again then to continue"
        )


def _backfill_here(
    spec: JudgeSpec,
    runs: TrajectoryFilter,
    dry_run: bool,
    store: str | None,
    database: str | None,
    config_file: str | None,
) -> dict[str, Any]:
    """No sidecar holds the store: open it and judge from this process."""
    from agenttrail.evaluators.admin.backfill import backfill
    from agenttrail.evaluators.judges.registry import ClientPool
    from agenttrail.evaluators.judges.setup import build_online_judge

    target = open_store(store, database, config_file)
    try:
        try:  # a saved criteria set is read from the store being backfilled
            online = build_online_judge(spec, ClientPool(store_factory=lambda: target))
        except AgentTrailError as exc:
            raise cli_error(exc) from exc
        try:
            report = backfill(
                target, online, runs, dry_run=dry_run, progress=lambda r: _progress(r.to_json())
            )
        except AgentTrailError as exc:
            raise click.ClickException(str(exc)) from exc
    finally:
        target.close()
    return report.to_json()


def _backfill_in_sidecar(
    api: SidecarApi, spec: JudgeSpec, runs: TrajectoryFilter, dry_run: bool
) -> dict[str, Any]:
    """The sidecar holds the store: start the job there, follow it, cancel it on Ctrl-C."""
    from agenttrail.evaluators.routes import ADMIN_PREFIX as ADMIN

    body = {"judge": spec.name, "fingerprint": spec.fingerprint, "runs": runs.to_params(), "dry_run": dry_run}
    job = api.post_json(f"{ADMIN}/backfill", body)
    path = f"{ADMIN}/backfill/{job['id']}"
    click.echo(
        f"backfill runs in the sidecar at {api.base_url}, which holds the store (job {job['id']})", err=True
    )
    decided = 0
    try:
        while job["state"] == "running":
            time.sleep(0.3)
            job = api.get_lines(path, {})[0]
            if job["report"]["decided"] != decided:
                decided = job["report"]["decided"]
                _progress(job["report"])
    except KeyboardInterrupt:
        api.post_json(f"{path}/cancel", {})
        raise click.ClickException(
            "interrupted: the sidecar stops this backfill after its current batch; the runs decided so far "
            "stay decided, and the same command continues with the rest"
        ) from None
    if job["state"] == "failed":
        raise click.ClickException(f"the backfill failed in the sidecar: {job['error']}")
    if job["state"] == "cancelled":
        raise click.ClickException(
            f"the sidecar cancelled the backfill (is serve stopping?) after {job['report']['decided']} "
            "run(s); the same command continues with the rest"
        )
    report: dict[str, Any] = job["report"]
    return report


@click.group()
def judges() -> None:
    """The LLM judges of the config file: list those in force, reload an edited judges section."""


@judges.command("list")
@store_options
@click.option("--format", "output_format", type=click.Choice(["table", "json"]), default="table")
@click.option("--server", help="Ask a running sidecar's HTTP API at this URL (http://host:4318).")
def judges_list(
    store: str | None, database: str | None, config_file: str | None, output_format: str, server: str | None
) -> None:
    """The judges with their versions: those in force in the running sidecar, else the config file's."""
    from agenttrail.evaluators.routes import JUDGES_ROUTE

    config = config_from({"store": store, "database": database}, config_file)
    api = running_sidecar(config, server)
    rows = api.get_lines(JUDGES_ROUTE, {}) if api is not None else _checked(config_file)
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


def _checked(config_file: str | None) -> list[dict[str, Any]]:
    """The config file's judges, each built as serve builds them at start (ConfigError: exit 3)."""
    from agenttrail.evaluators.judges.config import JudgesConfig
    from agenttrail.evaluators.judges.setup import build_online_judges, judge_rows

    try:
        config = JudgesConfig.from_file(config_file)
        return judge_rows(config, build_online_judges(config))
    except AgentTrailError as exc:
        raise cli_error(exc) from exc


def _names(answer: dict[str, Any], key: str) -> str:
    names: list[str] = answer[key]
    return f"{len(names)} {key}" + (f" ({', '.join(names)})" if names else "")


@judges.command("reload")
@store_options
@click.option("--server", help="Reload a running sidecar at this URL (http://host:4318).")
def judges_reload(
    store: str | None, database: str | None, config_file: str | None, server: str | None
) -> None:
    """Make the running sidecar take its config file's edited judges section, without a restart.

    The same as SIGHUP to serve. A section it refuses (exit 3, the error names the judge and key)
    leaves the judges in force as they were. With no sidecar running, checks the section as serve
    does when it starts."""
    config = config_from({"store": store, "database": database}, config_file)
    api = running_sidecar(config, server)
    if api is None:
        if not config_file:
            raise click.UsageError(
                "no sidecar is running to reload; pass --config FILE to check a judges section"
            )
        rows = _checked(config_file)
        enabled = [row["name"] for row in rows if row["enabled"]]
        click.echo(
            f"no sidecar holds the store at {config.store}: nothing to reload. {config_file}: "
            f"{len(rows)} judge(s) valid, {len(enabled)} enabled ({', '.join(enabled) or 'none'}); "
            "serve takes them when it starts"
        )
        return
    from agenttrail.evaluators.routes import ADMIN_PREFIX

    answer = api.post_json(f"{ADMIN_PREFIX}/judges/reload", {})
    if config_file and Path(config_file).resolve() != Path(answer["config_file"]):
        click.echo(
            f"note: the sidecar reads its own config file {answer['config_file']}, not {config_file}",
            err=True,
        )
    click.echo(
        f"judges reloaded from {answer['config_file']}: "
        + ", ".join(_names(answer, key) for key in ("added", "changed", "removed", "unchanged"))
    )
