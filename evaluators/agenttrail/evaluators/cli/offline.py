"""``agenttrail evaluate DATASET``: offline evaluation of a dataset file from the command line.

``evaluate_command`` is a standalone click command over ``offline/service.py`` (which tests call
without click); the ``agenttrail`` group adds it. The
dataset may be the output of ``agenttrail trajectories --format json`` (see ``datasets``). Exit
codes (the CLI's, see agenttrail.collector.cli): 0 every row was scored; 1 some judge calls
failed (the report says which); 2 a bad ``--metric``, ``--agent`` or ``--judge``, before any row
is read; 3 the dataset file cannot be read at all, or some rows are bad (the report is still
printed in full, the bad rows named with row and field).

``--judge`` takes a judge type (``--judge task_completion``, named after its type, default
options) or a YAML/JSON file of judge definitions: a list, or the sidecar config file's
``judges:`` list (keys only the online scheduler reads, such as ``sample_rate``, are ignored).
Model settings missing from a definition come from ``--judge-model`` / ``--judge-base-url``
(env ``AGENTTRAIL_JUDGE_MODEL`` / ``AGENTTRAIL_JUDGE_BASE_URL``); the key from
``OPENAI_API_KEY`` unless a definition names another ``api_key_env``. A ``type: criteria`` judge
naming a saved set (``criteria_set:``) reads it from the store ``--store`` / ``--database`` name.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import click

from agenttrail.collector.cli import EXIT_BAD_INPUT, BadInput
from agenttrail.collector.errors import AgentTrailError, ConfigError
from agenttrail.evaluators.judges.registry import judge_types
from agenttrail.evaluators.metrics import METRICS
from agenttrail.evaluators.offline.datasets import DatasetError
from agenttrail.evaluators.offline.evaluate import DEFAULT_METRICS, parse_metric_specs
from agenttrail.evaluators.offline.runnable import AgentLoadError, load_agent
from agenttrail.evaluators.offline.service import JudgeClash, build_offline_judges, evaluate_dataset
from agenttrail.evaluators.scoring.references import ReferenceEntry


def _epilog() -> str:
    """The catalogue, metrics with the same parameters on one line (``\b`` keeps click from rewrapping)."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for spec in METRICS.values():
        usage = tuple(param.usage + (" (required)" if param.required else "") for param in spec.params)
        groups.setdefault(usage, []).append(spec.name)
    lines = ["\b", "Metrics (--metric NAME or NAME:KEY=VALUE,KEY=VALUE):"]
    for usage, names in groups.items():
        lines.extend(textwrap.wrap(", ".join(names), 96, initial_indent="  ", subsequent_indent="  "))
        described = ", ".join(usage) if usage else "no parameters; always reported"
        lines.extend(textwrap.wrap(described, 96, initial_indent="      ", subsequent_indent="      "))
    lines.append("Judges (--judge TYPE, or --judge FILE of definitions):")
    for kind, summary in judge_types().items():
        lines.extend(textwrap.wrap(f"{kind}: {summary}", 96, initial_indent="  ", subsequent_indent="      "))
    return "\n".join(lines)


def _metrics_option(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    """The specs as given once they parse: a row's task settings fill only the parameters they leave out."""
    try:
        parse_metric_specs(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from exc
    return value


def _stored_references(store: str | None, database: str | None) -> dict[str, ReferenceEntry]:
    """Every task's current reference in the store (read through serve while it holds it)."""
    from agenttrail.evaluators.cli.read import read_rows
    from agenttrail.evaluators.scoring.references import ReferenceSetError, parse_reference_set
    from agenttrail.evaluators.scoring.service import references_read

    rows = read_rows(store, database, None, None, references_read())
    if not rows:
        raise click.BadParameter(
            "the store holds no references (agenttrail references load FILE)",
            param_hint="'--stored-references'",
        )
    try:
        return dict(parse_reference_set(rows, source="the stored references").entries)
    except ReferenceSetError as exc:
        raise BadInput(str(exc)) from exc


@click.command("evaluate", epilog=_epilog())
@click.argument("dataset", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    metavar="SPEC",
    callback=_metrics_option,
    help=(
        "Metric to compute, with parameters: trajectory_single_tool_use:tool_name=search, "
        "trajectory_recall:arguments=subset. Repeatable. Default: "
        f"{', '.join(DEFAULT_METRICS)} when rows have references. latency and failure always."
    ),
)
@click.option(
    "--agent",
    "agent_spec",
    metavar="MODULE:FUNCTION",
    help="Run this agent function on each row's query (prompt), traced, and evaluate what it did.",
)
@click.option(
    "--judge",
    "judge_specs",
    multiple=True,
    metavar="TYPE|FILE",
    help="LLM judge to run on each row: a judge type with default options, or a YAML/JSON file of "
    "judge definitions. Repeatable.",
)
@click.option(
    "--judge-model",
    envvar="AGENTTRAIL_JUDGE_MODEL",
    help="Judge model, where a definition names none. [env: AGENTTRAIL_JUDGE_MODEL]",
)
@click.option(
    "--judge-base-url",
    envvar="AGENTTRAIL_JUDGE_BASE_URL",
    help="OpenAI-compatible endpoint of the judge model (default: api.openai.com). "
    "[env: AGENTTRAIL_JUDGE_BASE_URL]",
)
@click.option(
    "--store",
    default=None,
    help="The store saved criteria sets are read from (a `type: criteria` judge's criteria_set): "
    "embedded store directory or http(s):// ClickHouse URL [env AGENTTRAIL_STORE].",
)
@click.option("--database", default=None, help="ClickHouse database of --store [default: agenttrail].")
@click.option(
    "--stored-references",
    is_flag=True,
    help="Rows without a reference take their task's current reference from --store (as "
    "`agenttrail references list` shows it; through serve while it holds the store), with its "
    "expected response and metric settings (its metric specs and options; a --metric spec's own "
    "parameters and a row's `options` win). The task is the row's `task` field, which "
    "`trajectories --format json` rows carry.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="A table per row plus aggregates, or the JSON report.",
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report to this file instead of standard output.",
)
def evaluate_command(
    dataset: Path,
    metrics: tuple[str, ...],
    agent_spec: str | None,
    judge_specs: tuple[str, ...],
    judge_model: str | None,
    judge_base_url: str | None,
    store: str | None,
    database: str | None,
    stored_references: bool,
    output_format: str,
    output: Path | None,
) -> None:
    """Evaluate agent trajectories in DATASET (.jsonl, .json or .csv, Vertex or GLLM/DeepEval rows)."""
    references = _stored_references(store, database) if stored_references else None
    defaults = {key: value for key, value in (("model", judge_model), ("base_url", judge_base_url)) if value}
    try:
        judging = build_offline_judges(judge_specs, defaults, store=store, database=database)
    except (ConfigError, AgentTrailError) as exc:
        raise click.BadParameter(str(exc), param_hint="'--judge'") from exc
    agent = None
    if agent_spec is not None:
        # Like `python -m`, so `--agent my_agent:run` finds my_agent.py in the current directory.
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            agent = load_agent(agent_spec)
        except AgentLoadError as exc:
            raise click.BadParameter(str(exc), param_hint="'--agent'") from exc
    try:
        report = evaluate_dataset(dataset, metrics, judging, agent=agent, references=references)
    except DatasetError as exc:
        raise BadInput(f"cannot read the dataset {exc}") from exc
    except JudgeClash as exc:
        raise click.BadParameter(str(exc), param_hint="'--judge'") from exc
    text = json.dumps(report.to_json(), indent=2) if output_format == "json" else report.to_table()
    if output_format == "json":
        for error in report.errors:
            click.echo(f"bad row: {error}", err=True)
        for line in report.judge_errors():
            click.echo(f"judge error: {line}", err=True)
    if output is None:
        click.echo(text)
    else:
        try:
            output.write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise click.ClickException(f"cannot write {output}: {exc.strerror or exc}") from exc
        bad = f", {len(report.errors)} bad" if report.errors else ""
        click.echo(f"wrote {len(report.instances)} instance(s){bad} to {output}", err=True)
    if report.errors:
        click.echo(f"error: {len(report.errors)} bad row(s) in {dataset}, not scored (see above)", err=True)
        sys.exit(EXIT_BAD_INPUT)
    if report.judge_errors():
        click.echo(f"error: {len(report.judge_errors())} judge call(s) failed (see above)", err=True)
        sys.exit(1)
