"""What every evaluator decided about a run: the query behind `agenttrail audit` and
`GET /api/v1/decisions?trace_id=...`.

A stored decision is one of scored/done, sampled_out, filtered, error, budget_paused. A run
with no decision for an evaluator's current version is `pending`, computed here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from agenttrail.collector.queries import QueryError, TrajectoryFilter, iso_utc
from agenttrail.collector.store import Store

_RUNS = """
SELECT RootSpanId, Revision, Agent, Task, toUnixTimestamp64Micro(AssembledAt)
FROM trajectories FINAL WHERE TraceId = {trace:String} AND IsDeleted = 0 ORDER BY Start, RootSpanId
"""
_DECISIONS = """
SELECT EvaluatorVersion, RootSpanId, Revision, Decision, Detail, toUnixTimestamp64Micro(DecidedAt)
FROM evaluation_decisions FINAL
WHERE TraceId = {trace:String} AND EvaluatorVersion IN {keys:Array(String)}
"""


@dataclass(frozen=True, slots=True)
class AuditSubject:
    """One evaluator (the deterministic one or a judge) as the audit lists it."""

    evaluator: str
    version: str
    queue_key: str  # its EvaluatorVersion in evaluation_decisions
    state: str = ""  # "disabled", or "paused: ..." while its budget is spent
    backfill_hint: bool = False  # a judge: runs past the lookback window can be backfilled


def audit_params(params: dict[str, str]) -> str:
    """The trace id of `/api/v1/decisions?trace_id=...`, checked."""
    unknown = set(params) - {"trace_id"}
    if unknown or not params.get("trace_id"):
        raise QueryError("give exactly one filter: trace_id=<32 hex>")
    trace_id = params["trace_id"]
    TrajectoryFilter(trace_id=trace_id)  # validates the form
    return trace_id


def audit_run(
    store: Store, trace_id: str, subjects: list[AuditSubject], *, lookback_s: int
) -> list[dict[str, Any]]:
    """One row per (run of the trace, evaluator): its decision for the run's current revision."""
    runs = store.query(_RUNS, {"trace": trace_id})
    keys = [subject.queue_key for subject in subjects]
    decided = {
        (key, root, int(revision)): (decision, detail, decided_at)
        for key, root, revision, decision, detail, decided_at in store.query(
            _DECISIONS, {"trace": trace_id, "keys": keys}
        )
    }
    window_start_us = (time.time() - lookback_s) * 1e6
    rows = []
    for root, revision, agent, task, assembled_us in runs:
        for subject in subjects:
            found = decided.get((subject.queue_key, root, int(revision)))
            if subject.state == "disabled":
                decision, detail, at = "disabled", "enabled: false in the config file", None
            elif found is not None:
                decision, detail, at = found[0], found[1], iso_utc(found[2])
            else:
                decision, detail, at = "pending", subject.state, None
                if not detail and assembled_us < window_start_us:
                    detail = "assembled before the online lookback window"
                    if subject.backfill_hint:
                        detail += f"; `agenttrail backfill --judge {subject.evaluator}` judges it"
            rows.append(
                {
                    "trace_id": trace_id,
                    "root_span_id": root,
                    "revision": int(revision),
                    "agent": agent,
                    "task": task,
                    "evaluator": subject.evaluator,
                    "version": subject.version,
                    "decision": decision,
                    "detail": detail,
                    "decided_at": at,
                }
            )
    return rows
