"""``agenttrail evaluate DATASET``: offline evaluation of a dataset file from the command line.

``evaluate_command`` is a standalone click command; the ``agenttrail`` group adds it. The
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import yaml

from agenttrail.collector.cli import EXIT_BAD_INPUT, BadInput
from agenttrail.collector.errors import AgentTrailError, ConfigError
from agenttrail.evaluators.judges.base import Judge
from agenttrail.evaluators.judges.registry import (
    JUDGE_TYPES,
    SCHEDULING_KEYS,
    ClientPool,
    JudgeDefinition,
    judge_types,
    parse_judge_definitions,
)
from agenttrail.evaluators.metrics import METRICS, ConfiguredMetric
from agenttrail.evaluators.offline.datasets import DatasetError, load_dataset
from agenttrail.evaluators.offline.evaluate import DEFAULT_METRICS, evaluate_rows, parse_metric_specs
from agenttrail.evaluators.offline.runnable import AgentLoadError, load_agent, run_agent_over_dataset


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


def _criteria_store(store: str | None, database: str | None, opened: list[Any]) -> Callable[[], Any] | None:
    """Where saved criteria sets are read from: this store (while a sidecar holds it: refused,
    saying what to do instead); without --store or --database none, and such a judge says to pass it."""
    from agenttrail.collector.cli import SidecarApi, config_from, read_via

    if not store and not database:
        return None

    def open_store() -> Any:
        source = read_via(config_from({"store": store, "database": database}, None), None)
        if isinstance(source, SidecarApi):
            raise ConfigError(
                f"the store is held by a running sidecar ({source.base_url}): export the set with "
                "`agenttrail criteria show NAME > set.yaml` and give it to the judge as file: set.yaml"
            )
        opened.append(source)
        return source

    return open_store


def judge_definitions(specs: tuple[str, ...], defaults: dict[str, str]) -> list[JudgeDefinition]:
    """Definitions from ``--judge`` values: judge types, or files of definitions. ConfigError if bad."""
    definitions: list[JudgeDefinition] = []
    for spec in specs:
        if spec in JUDGE_TYPES:
            definitions.append(
                JudgeDefinition.from_mapping({"name": spec, "type": spec}, "--judge", defaults=defaults)
            )
            continue
        path = Path(spec)
        if not path.is_file():
            raise ConfigError(
                f"--judge {spec!r} is neither a judge type ({', '.join(JUDGE_TYPES)}) nor a file of "
                "judge definitions"
            )
        try:
            document = yaml.safe_load(path.read_text(encoding="utf-8"))  # YAML reads JSON too
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read judge file {path}: {exc}") from exc
        definitions.extend(
            parse_judge_definitions(
                document, f"judge file {path}", defaults=defaults, extra_keys=SCHEDULING_KEYS
            )
        )
    names = [definition.name for definition in definitions]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(f"--judge: judge name(s) given more than once: {repeated}")
    return definitions


def _metrics_option(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> list[ConfiguredMetric]:
    try:
        return parse_metric_specs(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from exc


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
    metrics: list[ConfiguredMetric],
    agent_spec: str | None,
    judge_specs: tuple[str, ...],
    judge_model: str | None,
    judge_base_url: str | None,
    store: str | None,
    database: str | None,
    output_format: str,
    output: Path | None,
) -> None:
    """Evaluate agent trajectories in DATASET (.jsonl, .json or .csv, Vertex or GLLM/DeepEval rows)."""
    defaults = {key: value for key, value in (("model", judge_model), ("base_url", judge_base_url)) if value}
    opened: list[Any] = []
    pool = ClientPool(store_factory=_criteria_store(store, database, opened))
    try:
        definitions = judge_definitions(judge_specs, defaults)
        judges: list[Judge] = [pool.build(definition, "--judge") for definition in definitions]
        for judge in judges:
            _ = judge.version  # a saved criteria set is read here, so a bad name fails before any row
    except (ConfigError, AgentTrailError) as exc:
        raise click.BadParameter(str(exc), param_hint="'--judge'") from exc
    finally:
        for opened_store in opened:
            opened_store.close()
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
        rows = load_dataset(dataset)
    except DatasetError as exc:
        raise BadInput(f"cannot read the dataset {exc}") from exc
    if agent is not None:
        rows = run_agent_over_dataset(agent, rows)
    workers = max((definition.settings.concurrency for definition in definitions), default=1)
    try:
        report = evaluate_rows(rows, metrics, judges=judges, judge_workers=workers)
    except ValueError as exc:  # a judge metric that is also a metric
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
