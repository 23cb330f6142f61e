"""What `agenttrail evaluate` does, as functions tests and other callers can use without click:
build the judges its ``--judge`` values name, then read a dataset, run the agent on it if one is
given, and evaluate every row.

Errors are the wing's: ConfigError for judges (before any row is read), DatasetError for the
dataset, AgentLoadError for the agent, JudgeClash when a judge reports a name twice; the command
maps each to its exit code (see cli/offline.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agenttrail.collector.errors import AgentTrailError, ConfigError
from agenttrail.evaluators.judges.base import Judge
from agenttrail.evaluators.judges.registry import (
    JUDGE_TYPES,
    SCHEDULING_KEYS,
    ClientPool,
    JudgeDefinition,
    parse_judge_definitions,
)
from agenttrail.evaluators.metrics import ConfiguredMetric
from agenttrail.evaluators.offline.datasets import DatasetRow, RowError, load_dataset
from agenttrail.evaluators.offline.evaluate import EvaluationReport, evaluate_rows, parse_metric_specs
from agenttrail.evaluators.offline.runnable import run_agent_over_dataset
from agenttrail.evaluators.scoring.references import ReferenceEntry


class JudgeClash(AgentTrailError, ValueError):
    """Two judges, or a judge and a metric, report under one name; rename one or drop the metric."""


@dataclass(frozen=True, slots=True)
class OfflineJudges:
    """The judges to run and how many rows to judge at once (the largest judge concurrency)."""

    judges: list[Judge]
    workers: int = 1


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


def saved_sets_store(store: str | None, database: str | None, opened: list[Any]) -> Callable[[], Any] | None:
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


def build_offline_judges(
    specs: Sequence[str],
    defaults: dict[str, str],
    *,
    store: str | None = None,
    database: str | None = None,
    pool: ClientPool | None = None,
) -> OfflineJudges:
    """The judges ``--judge`` values name, with model settings from `defaults` where a definition
    has none; a saved criteria set is read now from `store` (so a bad name fails before any row)
    and the store is closed again. ConfigError / AgentTrailError say what is wrong."""
    opened: list[Any] = []
    pool = pool or ClientPool(store_factory=saved_sets_store(store, database, opened))
    try:
        definitions = judge_definitions(tuple(specs), defaults)
        judges: list[Judge] = [pool.build(definition, "--judge") for definition in definitions]
        for judge in judges:
            _ = judge.version  # a saved criteria set is read here, so a bad name fails before any row
    finally:
        for opened_store in opened:
            opened_store.close()
    workers = max((definition.settings.concurrency for definition in definitions), default=1)
    return OfflineJudges(judges, workers)


def with_references(
    rows: Sequence[DatasetRow | RowError], references: Mapping[str, ReferenceEntry]
) -> list[DatasetRow | RowError]:
    """Each row without a reference trajectory given its task's reference, with the task's metric
    settings (its metric specs and options, below the row's own `options`) and expected response
    (when the row has none): the task as `agenttrail trajectories --format json` rows carry it, or
    a row's `task` field. Rows with their own reference keep it."""
    filled: list[DatasetRow | RowError] = []
    for row in rows:
        task = row.extra.get("task") if isinstance(row, DatasetRow) else None
        entry = references.get(task) if isinstance(task, str) else None
        if isinstance(row, DatasetRow) and row.reference is None and entry is not None:
            expected = row.expected_response if row.expected_response is not None else entry.expected_response
            row = dataclasses.replace(
                row, reference=list(entry.reference), expected_response=expected, task_settings=entry
            )
        filled.append(row)
    return filled


def evaluate_dataset(
    dataset: Path,
    metrics: Sequence[str | ConfiguredMetric] = (),
    judging: OfflineJudges | None = None,
    *,
    agent: Callable[..., Any] | str | None = None,
    references: Mapping[str, ReferenceEntry] | None = None,
) -> EvaluationReport:
    """Read `dataset`, replace each row's prediction by the agent's traced run when `agent` is
    given, and score every row (bad rows are kept in the report as errors). No `metrics`: the
    defaults for the rows (see offline/evaluate.py). `references` (task -> entry, e.g. the
    store's current ones) fill the rows that have no reference of their own (`with_references`)."""
    judging = judging or OfflineJudges([])
    parsed = parse_metric_specs(metrics)  # a bad spec is a ValueError, before the dataset is read
    rows = load_dataset(dataset)
    if references:
        rows = with_references(rows, references)
    if agent is not None:
        rows = run_agent_over_dataset(agent, rows)
    try:
        return evaluate_rows(rows, metrics or parsed, judges=judging.judges, judge_workers=judging.workers)
    except ValueError as exc:  # a judge metric that is also a metric, or reported twice
        raise JudgeClash(str(exc)) from exc
