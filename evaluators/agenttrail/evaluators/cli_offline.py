"""``agenttrail evaluate DATASET``: offline evaluation of a dataset file from the command line.

``evaluate_command`` is a standalone click command; the ``agenttrail`` group adds it. Exit codes:
0 when the evaluation ran, even if some rows were bad (they are reported with row and field);
1 when the dataset file cannot be read at all; 2 for a bad ``--metric`` or ``--agent``, before
any row is read.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import click

from agenttrail.evaluators.datasets import DatasetError, load_dataset
from agenttrail.evaluators.metrics import METRICS, ConfiguredMetric
from agenttrail.evaluators.offline import DEFAULT_METRICS, evaluate_rows, parse_metric_specs
from agenttrail.evaluators.runnable import AgentLoadError, load_agent, run_agent_over_dataset


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
    return "\n".join(lines)


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
    output_format: str,
    output: Path | None,
) -> None:
    """Evaluate agent trajectories in DATASET (.jsonl, .json or .csv, Vertex or GLLM/DeepEval rows)."""
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
        raise click.ClickException(f"cannot read the dataset {exc}") from exc
    if agent is not None:
        rows = run_agent_over_dataset(agent, rows)
    report = evaluate_rows(rows, metrics)
    text = json.dumps(report.to_json(), indent=2) if output_format == "json" else report.to_table()
    if output_format == "json":
        for error in report.errors:
            click.echo(f"bad row: {error}", err=True)
    if output is None:
        click.echo(text)
        return
    try:
        output.write_text(text + "\n", encoding="utf-8")
    except OSError as exc:
        raise click.ClickException(f"cannot write {output}: {exc.strerror or exc}") from exc
    bad = f", {len(report.errors)} bad" if report.errors else ""
    click.echo(f"wrote {len(report.instances)} instance(s){bad} to {output}", err=True)
