"""Judge past runs with one judge's current version: `agenttrail backfill`.

The online worker only looks back `lookback_s`; backfill takes any start-time range. It
decides runs exactly as the worker does (filters, shared sampling, decisions), skips runs
already decided for this version, and leaves older versions' results where they are. A spent
budget stops it: the runs left stay pending, and running it again later continues.

While `serve` holds the embedded store the same command runs here inside the sidecar, as a job
of `BackfillJobs` (backfill_jobs.py, behind api.py) that the CLI starts and polls;
`BackfillReport.to_json` is what both print from.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from agenttrail.collector.queries import TRAJECTORY_JSON_COLUMNS, TrajectoryFilter, trajectory_to_json
from agenttrail.collector.store import Store
from agenttrail.evaluators.judges.runs import BatchOutcome, OnlineJudge, decide_runs, pause_text
from agenttrail.evaluators.scoring.reference_store import latest_references
from agenttrail.evaluators.scoring.run_queue import pending_runs


@dataclass
class BackfillReport:
    judge: str
    version: str
    dry_run: bool = False
    outcome: BatchOutcome = field(default_factory=BatchOutcome)
    would: Counter[str] = field(default_factory=Counter)  # dry run: judge/filtered/sampled_out

    @property
    def decided(self) -> int:
        return self.outcome.decided

    def to_json(self) -> dict[str, Any]:
        """The report as the CLI prints it, also across the sidecar's admin API."""
        outcome = self.outcome
        return {
            "judge": self.judge,
            "version": self.version,
            "dry_run": self.dry_run,
            "decided": self.decided,
            "decisions": dict(outcome.decisions),
            "would": dict(self.would),
            "prompt_tokens": outcome.prompt_tokens,
            "completion_tokens": outcome.completion_tokens,
            "cost": outcome.cost,
            "paused": pause_text(outcome.pause) if outcome.pause is not None else None,
        }


def _where(runs: TrajectoryFilter) -> tuple[str, dict[str, object]]:
    clauses, params = runs.where_clauses("t.Start")
    params.pop("limit")
    return " AND ".join(clauses) or "1", params


def backfill(
    store: Store,
    online: OnlineJudge,
    runs: TrajectoryFilter,
    *,
    dry_run: bool = False,
    batch_size: int = 100,
    worker_id: str = "backfill",
    progress: Callable[[BackfillReport], None] | None = None,
    stopping: Callable[[], bool] = lambda: False,
) -> BackfillReport:
    """Decide up to `runs.limit` undecided runs in the filter's start range, oldest first;
    `stopping()` true ends it between batches (what was decided stays decided)."""
    report = BackfillReport(online.name, online.version, dry_run)
    where, params = _where(runs)
    if dry_run:
        rows = pending_runs(
            store,
            online.queue_key,
            "t.TraceId, t.Agent, t.Task, t.Failure",
            where=where,
            params=params,
            order="t.Start",
            limit=runs.limit,
        )
        for trace_id, agent, task, failure in rows:
            if online.spec.filtered_by(agent, task, bool(failure)):
                report.would["filtered"] += 1
            elif not online.spec.sampled(trace_id):
                report.would["sampled_out"] += 1
            else:
                report.would["judge"] += 1
        return report
    references = latest_references(store)
    with ThreadPoolExecutor(online.concurrency, thread_name_prefix="agenttrail-backfill") as executor:
        while report.decided < runs.limit and not stopping():
            rows = pending_runs(
                store,
                online.queue_key,
                TRAJECTORY_JSON_COLUMNS,
                where=where,
                params=params,
                order="t.Start",
                limit=min(batch_size, runs.limit - report.decided),
            )
            if not rows:
                break
            outcome = decide_runs(
                store,
                online,
                [trajectory_to_json(row) for row in rows],
                executor,
                references=references,
                worker_id=worker_id,
            )
            report.outcome.add(outcome)
            if progress is not None:
                progress(report)
            if outcome.pause is not None:
                break
    return report
