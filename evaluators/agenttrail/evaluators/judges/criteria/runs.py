"""Where criteria commands get their runs: the store (by filter) or a file of trajectories.

A file holds the `agenttrail trajectories --format json` shape: one object per line (JSON
lines) or one JSON array. Runs are split into successful and failed by their failure flag, or
by a score threshold on a stored metric (a run scoring at least the threshold succeeded).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from agenttrail.collector.queries import TrajectoryFilter, query_trajectories
from agenttrail.collector.store import Store
from agenttrail.evaluators.judges.base import JudgeInput
from agenttrail.evaluators.judges.criteria.model import CriteriaError


@dataclass(frozen=True, slots=True)
class Run:
    """One trajectory as criteria commands need it: what a judge sees plus the keys of its scores."""

    judge_input: JudgeInput
    root_span_id: str = ""
    start_s: float = 0.0
    revision: int = 0

    @property
    def trace_id(self) -> str:
        return self.judge_input.trace_id

    @property
    def failed(self) -> bool:
        return self.judge_input.failure


def run_from_json(document: Mapping[str, Any], where: str = "run") -> Run:
    """A run in the `trajectories --format json` shape (only `tool_calls` or `output` is needed)."""
    if not isinstance(document, Mapping):
        raise CriteriaError(f"{where}: expected a trajectory object, got {type(document).__name__}")
    calls = document.get("tool_calls") or []
    if not isinstance(calls, list) or not all(isinstance(call, Mapping) for call in calls):
        raise CriteriaError(f"{where}: 'tool_calls' must be a list of objects")
    start = document.get("start")
    start_s = 0.0
    if isinstance(start, str) and start:
        try:
            start_s = datetime.fromisoformat(start.replace("Z", "+00:00")).timestamp()
        except ValueError as exc:
            raise CriteriaError(f"{where}: 'start' {start!r} is not ISO 8601") from exc
    return Run(
        JudgeInput.from_trajectory(document),
        root_span_id=str(document.get("root_span_id") or ""),
        start_s=start_s,
        revision=int(document.get("revision") or 0),
    )


def load_runs_file(path: str | Path) -> list[Run]:
    """Trajectories from a JSON-lines file or a JSON array; a bad line is an error naming it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CriteriaError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if text.lstrip().startswith("["):
        try:
            documents = json.loads(text)
        except ValueError as exc:
            raise CriteriaError(f"{path}: not valid JSON ({exc})") from exc
        return [run_from_json(doc, f"{path}[{i}]") for i, doc in enumerate(documents)]
    runs = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            document = json.loads(line)
        except ValueError as exc:
            raise CriteriaError(f"{path} line {number}: not valid JSON ({exc})") from exc
        runs.append(run_from_json(document, f"{path} line {number}"))
    return runs


def load_store_runs(store: Store, where: TrajectoryFilter) -> list[Run]:
    return [run_from_json(document) for document in query_trajectories(store, where)]


@dataclass(frozen=True, slots=True)
class SuccessRule:
    """How to tell a successful run: the failure flag, or `metric` >= `threshold` in the scores."""

    metric: str | None = None
    threshold: float = 1.0

    def describe(self) -> str:
        return f"{self.metric} >= {self.threshold:g}" if self.metric else "failure flag"


@dataclass(frozen=True, slots=True)
class LabelledRuns:
    successful: list[Run]
    failed: list[Run]
    unlabelled: list[Run]  # no score for the rule's metric


_LATEST_SCORES = """
SELECT TraceId, argMax(Score, CreatedAt) FROM scores FINAL
WHERE Metric = {metric:String} AND TraceId IN {ids:Array(String)} AND Score IS NOT NULL
GROUP BY TraceId
"""


def latest_scores(store: Store, metric: str, trace_ids: Sequence[str]) -> dict[str, float]:
    """The newest score of `metric` for each of these runs that has one."""
    rows = store.query(_LATEST_SCORES, {"metric": metric, "ids": list(trace_ids)})
    return {trace: float(score) for trace, score in rows}


def split_runs(runs: Sequence[Run], rule: SuccessRule, scores: Mapping[str, float]) -> LabelledRuns:
    """Successful, failed and (for a metric rule) unscored runs, in the order given.

    `scores` holds the rule metric's score per trace id (unused for the failure-flag rule).
    """
    if rule.metric is None:
        return LabelledRuns([r for r in runs if not r.failed], [r for r in runs if r.failed], [])
    labelled = LabelledRuns([], [], [])
    for run in runs:
        score = scores.get(run.trace_id)
        if score is None:
            labelled.unlabelled.append(run)
        else:
            (labelled.successful if score >= rule.threshold else labelled.failed).append(run)
    return labelled
