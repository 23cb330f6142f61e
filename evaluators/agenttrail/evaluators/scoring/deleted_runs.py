"""Scores of runs that re-assembly deleted are removed, so every reader counts live runs only.

Re-assembly can replace a run by another: a fallback run (spans assembled without their agent
span) becomes part of the agent's run when the agent span arrives late, and the assembler
writes a deletion row for the old run. Its scores and judge results would otherwise keep
counting in stats, drift, alerts and `/metrics`, which read `scores` without joining runs
(that join costs 3-5x, monitoring/sources.py). The evaluator worker sweeps every few seconds
with a lightweight DELETE. It looks back an hour, so scores a worker wrote just after the
deletion (it had picked the run before) are caught by a later sweep; a run that came back
(a newer live row) keeps its scores.

The monitoring rollup `scores_by_start`, its hash sample `scores_by_start_sample` and its
latest rows `scores_latest_by_start` (monitoring/rollups.py) are filled by materialized views,
which never see a DELETE: the sweep deletes there too, after the base table, so a score
written between them is still in `scores` and the next sweep deletes it from all four.
"""

from __future__ import annotations

from agenttrail.collector.store import Store

SWEEP_LOOKBACK_S = 3600

# (run, its scores) pairs whose latest trajectory row is a deletion; the deletion markers'
# recent window (minmax index on AssembledAt) and TraceId, the key prefix of both tables,
# keep it from scanning either table.
_STALE_SCORES = """
SELECT DISTINCT TraceId, RootSpanId FROM scores
WHERE TraceId IN (
    SELECT TraceId FROM trajectories
    WHERE IsDeleted = 1 AND AssembledAt >= now64(6) - toIntervalSecond({lookback:UInt32})
)
AND concat(TraceId, ':', RootSpanId) IN (
    SELECT concat(TraceId, ':', RootSpanId) FROM trajectories
    WHERE AssembledAt >= now64(6) - toIntervalSecond({lookback:UInt32})
      AND TraceId IN (
          SELECT TraceId FROM trajectories
          WHERE IsDeleted = 1 AND AssembledAt >= now64(6) - toIntervalSecond({lookback:UInt32})
      )
    GROUP BY TraceId, RootSpanId
    HAVING argMax(IsDeleted, Version) = 1
)
"""
_DELETE = """
DELETE FROM {table}
WHERE TraceId IN {traces:Array(String)} AND concat(TraceId, ':', RootSpanId) IN {runs:Array(String)}
"""


def delete_scores_of_deleted_runs(store: Store, lookback_s: int = SWEEP_LOOKBACK_S) -> int:
    """Delete the scores of runs deleted in the last `lookback_s`; returns how many runs had some."""
    stale = store.query(_STALE_SCORES, {"lookback": lookback_s})
    if not stale:
        return 0
    runs = {
        "traces": sorted({trace_id for trace_id, _ in stale}),
        "runs": [f"{trace_id}:{root}" for trace_id, root in stale],
    }
    for table in ("scores", "scores_by_start", "scores_by_start_sample", "scores_latest_by_start"):
        store.command(_DELETE.replace("{table}", table), runs)
    return len(stale)
