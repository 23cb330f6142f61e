"""Re-scoring a task's stored runs against its current reference, through the online evaluator.

The evaluator's decisions for the task's runs are removed (a lightweight DELETE), which puts
those runs back in its queue (`run_queue`: a run is pending until it has a decision for the
evaluator's version); the worker then scores them against the current reference, replacing the
old scores (same keys). The worker only looks back `lookback_s` (a day by default), so older
runs keep their scores. The console's reference form and `agenttrail references load
--rescore` (on the store, or through serve's admin API) both come here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agenttrail.collector.store import Store

_AFFECTED = """
SELECT count() FROM trajectories FINAL
WHERE Task = {task:String} AND IsDeleted = 0
  AND AssembledAt >= now64(6) - toIntervalSecond({lookback:UInt32})
"""
_FORGET = """
DELETE FROM evaluation_decisions
WHERE EvaluatorVersion = {version:String}
  AND TraceId IN (
      SELECT TraceId FROM trajectories WHERE Task = {task:String}
        AND AssembledAt >= now64(6) - toIntervalSecond({lookback:UInt32})
  )
"""


@dataclass(frozen=True, slots=True)
class Rescore:
    task: str
    runs: int  # runs put back in the evaluator's queue
    lookback_s: int

    def to_json(self) -> dict[str, object]:
        return {"task": self.task, "runs": self.runs, "lookback_s": self.lookback_s}


def rescore_task(store: Store, task: str, *, evaluator_version: str, lookback_s: int) -> Rescore:
    """Put the task's recent runs back in the online evaluator's queue."""
    params = {"task": task, "lookback": lookback_s, "version": evaluator_version}
    rows = store.query(_AFFECTED, params)
    store.command(_FORGET, params)
    return Rescore(task, int(rows[0][0]) if rows else 0, lookback_s)


def rescore_tasks(
    store: Store, tasks: Iterable[str], *, evaluator_version: str, lookback_s: int
) -> list[Rescore]:
    """`rescore_task` for each of `tasks`, in name order (a references load re-scores its file's)."""
    return [
        rescore_task(store, task, evaluator_version=evaluator_version, lookback_s=lookback_s)
        for task in sorted(tasks)
    ]
