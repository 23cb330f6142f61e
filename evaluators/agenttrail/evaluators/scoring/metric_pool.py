"""The evaluator's per-run Python (parse the calls, compute the metrics), in serve's thread or in
worker processes.

In `serve` every Python thread shares one GIL with the OTLP receivers, so each millisecond the
evaluator computes is one an acknowledgement may wait for. With `evaluators.processes` > 0 the
metrics are computed in that many spawned processes (each imports the metrics and little else):
serve sends them the stored calls of each run and the references in force, and writes the
scores and decisions itself as before, so what is stored does not depend on where it was
computed (`score_run` is the one function both paths call).
"""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, NamedTuple

from agenttrail.collector.runs import predicted_calls
from agenttrail.evaluators.metrics import ConfiguredMetric, compute_metrics
from agenttrail.evaluators.scoring.name_only import (
    NameCounts,
    count_names,
    name_only_metrics,
    outcome_from_counts,
    stored_names,
)
from agenttrail.evaluators.scoring.references import ReferenceEntry

# A pool task this size is a few ms of metrics: large enough that sending it costs little,
# small enough that a batch of 2,000 runs spreads over every process.
CHUNK_RUNS = 250


class RunToScore(NamedTuple):
    """What scoring one run reads: its stored calls (`trajectories.ToolCalls`), task, latency and
    whether it failed."""

    tool_calls: str
    task: str
    latency_s: float
    failed: bool


Outcome = dict[str, float | None] | str
"""A run's metric values, or why it could not be scored (the decision's detail)."""


def score_run(
    run: RunToScore, entry: ReferenceEntry | None, specs: Sequence[ConfiguredMetric] | Exception
) -> Outcome:
    """One run's metrics against its task's reference (`entry`, None if the task has none) with
    the task's metrics (`task_specs`); a run that cannot be scored gives the reason instead."""
    try:
        predicted = predicted_calls(json.loads(run.tool_calls))
        if entry is None:
            return compute_metrics(predicted, None, [], latency_s=run.latency_s, failure=run.failed)
        if isinstance(specs, Exception):  # the task's metrics are wrong: every run says so
            return f"cannot score: {specs}"
        return compute_metrics(
            predicted, list(entry.reference), specs, latency_s=run.latency_s, failure=run.failed
        )
    except (ValueError, TypeError) as exc:
        return f"cannot score: {exc}"


def task_specs(entry: ReferenceEntry, metrics: Iterable[str]) -> list[ConfiguredMetric] | Exception:
    """The metrics a task's runs are scored with (once per batch, not per run), or the error
    every run of the task then reports."""
    try:
        return entry.configured_metrics(metrics)
    except (ValueError, TypeError) as exc:
        return exc


def score_runs(
    runs: Sequence[RunToScore], references: Mapping[str, ReferenceEntry], metrics: Sequence[str]
) -> list[Outcome]:
    """Each run's outcome, in order; `references` by task (a pool task's whole input). A task
    whose reference matches by name alone is scored from its runs' tool names (name_only.py),
    each distinct sequence of names counted once a batch."""
    specs: dict[str, list[ConfiguredMetric] | Exception] = {}
    by_name: dict[str, tuple[tuple[ConfiguredMetric, ...], tuple[str, ...]] | None] = {}
    counted: dict[tuple[str, tuple[str, ...]], NameCounts] = {}
    outcomes: list[Outcome] = []
    for run in runs:
        entry = references.get(run.task) if run.task else None
        if entry is None:
            if stored_names(run.tool_calls) is None:
                outcomes.append(score_run(run, None, []))
            else:  # readable calls and no reference: latency and failure alone
                outcomes.append({"latency": run.latency_s, "failure": float(run.failed)})
            continue
        if run.task not in specs:
            found = specs[run.task] = task_specs(entry, metrics)
            plan = None if isinstance(found, Exception) else name_only_metrics(entry.reference, found)
            by_name[run.task] = None if plan is None else (plan, tuple(call.name for call in entry.reference))
        task = by_name[run.task]
        names = None if task is None else stored_names(run.tool_calls)
        if task is None or names is None:
            outcomes.append(score_run(run, entry, specs[run.task]))
            continue
        counts = counted.get((run.task, names))
        if counts is None:
            counts = counted[run.task, names] = count_names(names, task[1])
        outcomes.append(outcome_from_counts(task[0], counts, run.latency_s, run.failed))
    return outcomes


class MetricPool:
    """`score_runs` in `processes` spawned worker processes; started on first use."""

    def __init__(self, processes: int) -> None:
        self.processes = processes
        self._executor: ProcessPoolExecutor | None = None

    def score(
        self, runs: Sequence[RunToScore], references: Mapping[str, ReferenceEntry], metrics: Sequence[str]
    ) -> list[Outcome]:
        """`score_runs` over the pool. A process that died breaks the pool: the error goes to the
        caller (the batch is retried, nothing was written) and the next call starts a new one."""
        if not runs:
            return []
        if self._executor is None:
            # spawn: a fork of serve would copy chDB's and grpc's threads' state into the child.
            self._executor = ProcessPoolExecutor(
                self.processes, mp_context=multiprocessing.get_context("spawn")
            )
        chunks = [runs[start : start + CHUNK_RUNS] for start in range(0, len(runs), CHUNK_RUNS)]
        try:
            futures = [
                self._executor.submit(score_runs, chunk, _used(chunk, references), tuple(metrics))
                for chunk in chunks
            ]
            return [outcome for future in futures for outcome in future.result()]
        except Exception:
            self.close()
            raise

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


def _used(runs: Iterable[RunToScore], references: Mapping[str, ReferenceEntry]) -> dict[str, Any]:
    """The references the chunk's runs need (only those are sent)."""
    return {run.task: references[run.task] for run in runs if run.task in references}
