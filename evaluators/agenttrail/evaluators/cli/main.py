"""The full `agenttrail` command: the collector's commands plus the evaluators'.

The group is built here, once: `make_cli` gives it the collector's commands, wired to the
evaluators' composition root (which sidecar `serve` builds, which migrations `schema` prints,
which config sections are the evaluators'); the command groups of the other modules in this
package load lazily by name, so `agenttrail --help` imports none of them. Importing a command
module registers nothing.
"""

from __future__ import annotations

import signal
import sys
import threading

import click

from agenttrail.collector.cli import (
    BadInput,
    Wiring,
    check_trace_found,
    cli_error,
    config_from,
    emit_rows,
    make_cli,
    read_rows,
    read_via,
    resolve_trace_id,
    run_filter_options,
    store_options,
)
from agenttrail.collector.durations import format_duration
from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.queries import QueryError
from agenttrail.collector.store import parse_store
from agenttrail.evaluators import composition, config_sections
from agenttrail.evaluators.composition import ALL_MIGRATIONS

cli = make_cli(
    Wiring(
        build_sidecar=composition.build_sidecar,
        schema_migrations=composition.ALL_MIGRATIONS,
        config_sections=composition.CONFIG_SECTIONS,
    )
)

# Commands whose modules load on use; `agenttrail --help` shows these short helps (kept equal to
# the commands' own by tests/evaluators/cli/test_cli_start.py).
LAZY_COMMANDS = {
    "alerts": (
        "agenttrail.evaluators.cli.alerts:alerts",
        "Pending and firing alerts (with --all, resolved ones too): state, since, value, rule, group.",
    ),
    "audit": (
        "agenttrail.evaluators.cli.judges:audit",
        "Every evaluator's decision on a run (the deterministic one and each configured judge).",
    ),
    "backfill": (
        "agenttrail.evaluators.cli.judges:backfill_command",
        "Judge past runs with a new or changed judge (its current version).",
    ),
    "criteria": (
        "agenttrail.evaluators.cli.criteria:criteria",
        "Discover evaluation criteria for an agent (AgentEval), check them, and save reviewed sets.",
    ),
    "drift": (
        "agenttrail.evaluators.cli.monitoring:drift",
        "Compare each agent's recent window with a baseline, metric by metric, and call drift.",
    ),
    "evaluate": (
        "agenttrail.evaluators.cli.offline:evaluate_command",
        "Evaluate agent trajectories in DATASET (.jsonl, .json or .csv, Vertex or GLLM/DeepEval rows).",
    ),
    "judges": (
        "agenttrail.evaluators.cli.judges:judges",
        "The LLM judges of the config file: list those in force, reload an edited judges section.",
    ),
    "mcp": (
        "agenttrail.evaluators.cli.mcp:mcp_command",
        "Serve the MCP tools (runs, versions, drift, alerts, metrics, read-only SQL) over stdio.",
    ),
    "report": (
        "agenttrail.evaluators.cli.report:report_command",
        "Per agent: runs, failure rate, latency percentiles and evaluation scores over time, with drift "
        "points and alert periods marked, and the worst runs with their trajectories.",
    ),
    "stats": (
        "agenttrail.evaluators.cli.monitoring:stats",
        "Per agent and time bucket: runs, failure rate, latency percentiles, tool errors, tokens, scores.",
    ),
}
for _name, (_target, _help) in LAZY_COMMANDS.items():
    cli.add_lazy_command(_name, _target, _help)


@cli.group()
def references() -> None:
    """Reference trajectories per task: load and list."""


@references.command("load")
@click.argument("file", type=click.Path(dir_okay=False, exists=True))
@click.option(
    "--rescore",
    is_flag=True,
    help="Also re-score the stored runs of every task in FILE against its reference (those "
    "assembled within the evaluator's lookback_s, a day by default): for runs that arrived first.",
)
@store_options
def references_load(
    file: str, rescore: bool, store: str | None, database: str | None, config_file: str | None
) -> None:
    """Validate a reference set (JSON, JSONL or YAML) and store a new version of each changed task.

    While `serve` holds the embedded store, the set goes through its API (POST /api/v1/admin/references),
    and with --rescore its evaluator scores the runs at once; otherwise the next evaluator on the
    store does (`agenttrail serve` or `agenttrail worker`)."""
    from agenttrail.evaluators.scoring.references import ReferenceSetError
    from agenttrail.evaluators.scoring.service import load_references

    config = config_from({"store": store, "database": database}, config_file)
    try:
        evaluator = config_sections.load_evaluators(config_file) if rescore else None  # its version
        loaded = load_references(file, lambda: read_via(config, None), ALL_MIGRATIONS, rescore=evaluator)
    except ReferenceSetError as exc:
        raise BadInput(str(exc)) from exc
    except AgentTrailError as exc:
        raise cli_error(exc) from exc
    click.echo(
        f"{len(loaded.added)} added, {len(loaded.updated)} updated (new version), "
        f"{len(loaded.unchanged)} unchanged"
    )
    if rescore:
        runs = sum(item.runs for item in loaded.rescored)
        tasks = ", ".join(f"{item.task} {item.runs}" for item in loaded.rescored)
        when = (
            "the running sidecar scores them now"
            if loaded.by_sidecar
            else "`agenttrail serve` (or `agenttrail worker`) scores them when it starts"
        )
        from agenttrail.evaluators.monitoring.timespec import format_duration as window_text  # 1d

        lookback = window_text(loaded.rescored[0].lookback_s) if loaded.rescored else "-"
        click.echo(f"re-scoring {runs} run(s) assembled in the last {lookback} ({tasks}): {when}")


@references.command("list")
@store_options
@click.option(
    "--format", "output_format", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def references_list(
    store: str | None, database: str | None, config_file: str | None, output_format: str
) -> None:
    """The current reference of every task (through `serve` while it holds the store)."""
    from agenttrail.evaluators.scoring.service import references_read

    config = config_from({"store": store, "database": database}, config_file)
    read = references_read()
    rows = read_rows(config, None, read.route, read.params, read.local, ALL_MIGRATIONS)
    emit_rows(
        rows,
        output_format,
        empty="no references loaded (agenttrail references load FILE)",
        headers=["task", "version", "reference trajectory", "metrics", "source"],
        cells=lambda r: (
            r["task"],
            r["version"],
            " > ".join(call["name"] for call in r["reference_trajectory"]),
            ",".join(r["metrics"]) or "-",
            r["source"],
        ),
    )


@cli.command()
@store_options
@run_filter_options(default_limit=200)
@click.option("--metric", help="Only this metric.")
def scores(
    store: str | None,
    database: str | None,
    config_file: str | None,
    since: str | None,
    until: str | None,
    agent: str | None,
    task: str | None,
    metric: str | None,
    trace_id: str | None,
    limit: int,
    output_format: str,
    server: str | None,
) -> None:
    """Evaluation scores per run and metric, newest runs first."""
    from agenttrail.evaluators.scoring.service import scores_read

    config = config_from({"store": store, "database": database}, config_file)
    trace_id = resolve_trace_id(config, server, trace_id)
    try:
        read = scores_read(
            since=since, until=until, agent=agent, task=task, trace_id=trace_id, metric=metric, limit=limit
        )
    except QueryError as exc:
        raise click.BadParameter(str(exc)) from exc
    rows = read_rows(config, server, read.route, read.params, read.local, ALL_MIGRATIONS)
    if not rows:
        check_trace_found(config, server, trace_id)
    emit_rows(
        rows,
        output_format,
        empty="no scores match",
        headers=["run start", "trace", "agent", "task", "metric", "score", "label"],
        cells=lambda r: (
            r["run_start"][:23],
            r["trace_id"][:12],
            r["agent"],
            r["task"],
            r["metric"],
            _score_text(r["metric"], r["score"]),
            f"error: {r['error'][:60]}" if r.get("error") else r["label"],
        ),
    )


def _score_text(metric: str, score: float | None) -> str:
    """A score as the table shows it: the latency metric (seconds) as a duration, as every other
    duration the CLI prints ("12.5 ms"), the rest to three places."""
    if score is None:
        return "-"
    return format_duration(score) if metric == "latency" else f"{score:.3f}"


@cli.command()
@store_options
def worker(store: str | None, database: str | None, config_file: str | None) -> None:
    """Run the evaluator alone against a ClickHouse server that collectors write to."""
    from agenttrail.evaluators.scoring.service import start_worker

    config = config_from({"store": store, "database": database}, config_file)
    try:
        evaluator_config = config_sections.load_evaluators(config_file)  # env over the file
        evaluator = start_worker(config, evaluator_config, ALL_MIGRATIONS)
    except AgentTrailError as exc:
        raise cli_error(exc) from exc
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    location = parse_store(config.store, config.database).describe()
    click.echo(f"agenttrail evaluator {evaluator.version} scoring runs in {location}", err=True)
    while not stop.wait(1.0):
        if not evaluator.alive():
            click.echo("the evaluator stopped unexpectedly", err=True)
            sys.exit(1)
    evaluator.stop()


@cli.command()
@click.option(
    "--runs",
    default=300,
    show_default=True,
    type=click.IntRange(min=1, max=100_000),
    help="How many agent runs the example agent makes.",
)
@click.option("--seed", default=7, show_default=True, help="Random seed for the example agent.")
@click.option(
    "--keep",
    is_flag=False,
    flag_value="agenttrail-demo-data",
    type=click.Path(file_okay=False),
    help="Keep the demo's store (in ./agenttrail-demo-data, or this directory) and keep serving it, "
    "with the console, until Ctrl-C.",
)
@click.option(
    "--report",
    type=click.Path(dir_okay=False),
    default="agenttrail-demo-report.html",
    show_default=True,
    help="Where to write the HTML report ('' for none).",
)
def demo(runs: int, seed: int, keep: str | None, report: str) -> None:
    """Run the sidecar on a temporary embedded store and an example agent against it that degrades
    halfway: its runs are scored, the drift is found, the failure alert fires, a report is written."""
    from agenttrail.evaluators.demo.run import run_demo

    try:
        run_demo(
            runs=runs,
            seed=seed,
            keep=keep,
            serve=keep is not None,
            build=composition.build_sidecar,
            report=report or None,
        )
    except AgentTrailError as exc:
        raise cli_error(exc) from exc


def main() -> None:
    cli()
