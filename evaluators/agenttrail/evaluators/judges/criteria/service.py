"""What the `agenttrail criteria` commands do, as functions tests and other callers can use
without click: pick the runs (a file, the store, or the sidecar holding it), the set (a file or
a saved version) and the scores that tell successful runs, and quantify runs against a set.

A bad combination of options is a `CriteriaUsageError` naming the option; the command turns it
into click's usage error (exit 2), and any other `AgentTrailError` into a plain CLI error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agenttrail.collector.cli import SidecarApi, run_filter
from agenttrail.collector.store import Store
from agenttrail.evaluators.judges.base import ChatJudgeClient, JudgeResult
from agenttrail.evaluators.judges.criteria.install import SETS_ROUTE
from agenttrail.evaluators.judges.criteria.model import (
    CriteriaError,
    CriteriaSet,
    load_criteria_file,
    parse_criteria_set,
)
from agenttrail.evaluators.judges.criteria.quantifier import quantify_run
from agenttrail.evaluators.judges.criteria.results import store_results
from agenttrail.evaluators.judges.criteria.robustness import parallel_map
from agenttrail.evaluators.judges.criteria.runs import (
    Run,
    SuccessRule,
    latest_scores,
    load_runs_file,
    load_store_runs,
    run_from_json,
)
from agenttrail.evaluators.judges.criteria.sets import get_set


class CriteriaUsageError(CriteriaError, ValueError):
    """Options that do not go together, or a value that names nothing; `option` is the flag at
    fault when there is one."""

    def __init__(self, message: str, option: str = "") -> None:
        super().__init__(message)
        self.option = option


@dataclass(frozen=True, slots=True)
class RunsQuery:
    """Which runs: a runs file, or a filter over the store; and how to tell the successful ones."""

    runs_file: str | None
    since: str | None
    until: str | None
    agent: str | None
    task: str | None
    trace_id: str | None
    limit: int
    success_metric: str | None
    success_threshold: float

    @classmethod
    def pick(cls, options: dict[str, Any]) -> RunsQuery:
        """Take (and remove) the runs options from a command's keyword arguments."""
        return cls(*(options.pop(name) for name in cls.__dataclass_fields__))

    @property
    def rule(self) -> SuccessRule:
        return SuccessRule(self.success_metric, self.success_threshold)


def load_runs(query: RunsQuery, source: SidecarApi | Store | None) -> list[Run]:
    """Runs from the file, or from the store (or the sidecar holding it) by the filter."""
    if query.runs_file:
        return load_runs_file(query.runs_file)
    assert source is not None
    trace_id = query.trace_id.strip().lower() if query.trace_id else None
    where = run_filter(query.since, query.until, query.agent, query.task, trace_id, query.limit)
    if isinstance(source, SidecarApi):
        runs = [run_from_json(doc) for doc in source.get_lines("/api/v1/trajectories", where.to_params())]
    else:
        runs = load_store_runs(source, where)
    found = sorted({run.trace_id for run in runs})
    if trace_id and len(found) > 1:  # --trace took a prefix (as tables print ids) of several
        raise CriteriaUsageError(
            f"{trace_id!r} is the start of {len(found)} trace ids; give more of it: {', '.join(found[:10])}",
            "--trace",
        )
    return runs


def scores_by_trace(
    source: SidecarApi | Store | None, query: RunsQuery, runs: Sequence[Run]
) -> dict[str, float]:
    """Newest score of the success metric per run, for telling successful runs by score."""
    if query.success_metric is None:
        return {}
    if source is None:
        raise CriteriaUsageError("--success-metric reads scores from the store: pass --store")
    if isinstance(source, SidecarApi):
        params = {"metric": query.success_metric, "limit": str(max(10_000, 10 * len(runs)))}
        rows = sorted(source.get_lines("/api/v1/scores", params), key=lambda r: r["created_at"])
        wanted = {run.trace_id for run in runs}
        return {r["trace_id"]: r["score"] for r in rows if r["trace_id"] in wanted and r["score"] is not None}
    return latest_scores(source, query.success_metric, [run.trace_id for run in runs])


def resolve_set(
    criteria_file: str | None, set_name: str | None, set_version: int | None, source: Callable[[], Any]
) -> tuple[CriteriaSet, str]:
    """The criteria set to use and its evaluator version (a saved version, or the file's draft).
    `source` gives the store (or the sidecar's API) and is called only for a saved set."""
    if bool(criteria_file) == bool(set_name):
        raise CriteriaUsageError("give either --criteria-file or --criteria-set")
    if criteria_file:
        if set_version is not None:
            raise CriteriaUsageError("--set-version goes with --criteria-set, not a file")
        criteria_set = load_criteria_file(criteria_file)
        return criteria_set, criteria_set.draft_version
    assert set_name is not None
    target = source()
    if isinstance(target, SidecarApi):
        params = {"name": set_name, **({"version": str(set_version)} if set_version else {})}
        rows = target.get_lines(SETS_ROUTE, params)
        if not rows:
            raise CriteriaError(f"no criteria set named {set_name!r}")
        document = rows[0]
        return parse_criteria_set(document["definition"], f"criteria set {set_name}"), document["version"]
    stored = get_set(target, set_name, set_version)
    return stored.criteria_set, stored.version


@dataclass(frozen=True, slots=True)
class Quantified:
    """The results per run, as rows (`criteria quantify --format json`), and how many were stored."""

    rows: list[dict[str, Any]]
    stored: int


def quantify_runs(
    client: ChatJudgeClient,
    criteria_set: CriteriaSet,
    version: str,
    runs: Sequence[Run],
    concurrency: int,
    store: Store | None = None,
) -> Quantified:
    """Quantify each run against the set (`concurrency` at once); store the scores when `store`
    is given (one per criterion and run)."""
    results: list[list[JudgeResult]] = parallel_map(
        lambda run: quantify_run(client, criteria_set, version, run.judge_input), runs, concurrency
    )
    stored = store_results(store, list(zip(runs, results, strict=True))) if store is not None else 0
    rows = [
        {
            "trace_id": run.trace_id,
            "metric": result.metric,
            "label": result.label,
            "score": result.score,
            "explanation": result.explanation,
            "evaluator": f"{result.judge}@{result.version}",
            "error": result.error,
        }
        for run, run_results in zip(runs, results, strict=True)
        for result in run_results
    ]
    return Quantified(rows, stored)
