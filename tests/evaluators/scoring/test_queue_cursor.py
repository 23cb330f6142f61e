"""The evaluator's queue cursor: it narrows the pending-runs query to runs assembled since the
queue was last empty (less a short lag), and never costs a run its scores: late-visible rows
within the margin (at the next margin scan), rows older than the cursor (at the next full scan)
and re-queued runs (`rescan`) are scored."""

from __future__ import annotations

import time
from typing import Any

from otlp_builders import new_trace_id
from trajectory_rows import agent_run, deleted_row, insert_trajectories, store_runs

from agenttrail.collector.schema import migrate
from agenttrail.evaluators.scoring.schema import EVALUATOR_MIGRATIONS
from agenttrail.evaluators.scoring.worker import (
    CURSOR_LAG_S,
    CURSOR_MARGIN_S,
    EvaluatorConfig,
    EvaluatorWorker,
)


def decided(store: Any) -> set[str]:
    return {row[0] for row in store.query("SELECT DISTINCT TraceId FROM evaluation_decisions")}


def new_run(store: Any, *, assembled_ago_s: float) -> str:
    trace = new_trace_id()
    run = agent_run(start=time.time() - 60, trace_id=trace, task="t", tools=["lookup"])
    store_runs(store, [run], assembled_at=time.time() - assembled_ago_s)
    return trace


def drained_worker(store: Any, **config: Any) -> EvaluatorWorker:
    """A worker whose queue is empty after one full scan, so its cursor is set."""
    migrate(store, EVALUATOR_MIGRATIONS)
    worker = EvaluatorWorker(store.clone, EvaluatorConfig(**config))
    first = new_run(store, assembled_ago_s=1)
    worker.cycle()
    assert decided(store) == {first}
    return worker


def test_a_row_that_becomes_visible_late_within_the_margin_is_scored_at_the_margin_scan(
    store: Any,
) -> None:
    """Queries between margin scans reach back the short lag only (a 30 s window grouped and
    joined every batch was most of the queue's CPU at high rates); the margin scan reaches back
    the whole margin, without a full scan."""
    assert CURSOR_MARGIN_S > 10 > CURSOR_LAG_S
    worker = drained_worker(store, full_scan_interval_s=3600)
    worker.margin_scan_interval_s = 3600
    late = new_run(store, assembled_ago_s=10)  # readable 10 s after it was assembled
    later = new_run(store, assembled_ago_s=CURSOR_MARGIN_S - 1)
    worker.cycle()
    assert not {late, later} & decided(store), "between margin scans the window is the lag's"
    worker.margin_scan_interval_s = 0  # the margin scan is due
    worker.cycle()
    assert {late, later} <= decided(store)


def test_a_runs_decision_keeps_it_decided_through_ordinary_and_margin_scans(store: Any) -> None:
    """The window's decisions are read from the window's start (less the margin) on: a run
    decided just after its assembly is not pending again, however far the window reaches."""
    worker = drained_worker(store, full_scan_interval_s=3600)
    runs = {new_run(store, assembled_ago_s=ago) for ago in (0.5, 1.5, CURSOR_MARGIN_S - 1)}
    worker.margin_scan_interval_s = 0
    worker.cycle()
    scored = worker.counters.scored_runs
    assert runs <= decided(store)
    for interval in (3600, 0):
        worker.margin_scan_interval_s = interval
        worker.cycle()
    assert worker.counters.scored_runs == scored
    counts = store.query(
        "SELECT count() FROM evaluation_decisions WHERE TraceId IN {ids:Array(String)} GROUP BY TraceId",
        {"ids": sorted(runs)},
    )
    assert counts == [(1,)] * len(runs)


def test_a_full_batch_moves_the_cursor_up_to_its_last_run(store: Any) -> None:
    """A full batch is the window's oldest pending runs: the next query starts at its last run's
    assembly (less the lag) instead of reading the whole backlog's window again each batch."""
    worker = drained_worker(store, full_scan_interval_s=3600, batch_size=3)
    worker.margin_scan_interval_s = 3600
    start = worker.cursor_s
    assert start is not None
    # assembled in order after the drained query, and before the next one (a second on)
    drained_at = start + CURSOR_LAG_S
    backlog = [
        new_run(store, assembled_ago_s=time.time() - drained_at - (step + 1) / 10) for step in range(7)
    ]
    time.sleep(1)
    third = store.query(
        "SELECT toUnixTimestamp64Micro(AssembledAt) FROM trajectories WHERE TraceId = {id:String}",
        {"id": backlog[2]},
    )[0][0]
    assert worker.run_once() == 3
    assert worker.cursor_s == third / 1e6 - CURSOR_LAG_S > start
    worker.cycle()
    assert set(backlog) <= decided(store)


def test_a_row_older_than_the_cursor_waits_for_the_next_full_scan(store: Any) -> None:
    worker = drained_worker(store, full_scan_interval_s=3600)
    old = new_run(store, assembled_ago_s=CURSOR_MARGIN_S * 4)
    worker.cycle()
    assert old not in decided(store), "the cursor should have narrowed this query"
    worker.config = EvaluatorConfig(full_scan_interval_s=0)  # the full scan is due
    worker.cycle()
    assert old in decided(store)


def test_rescan_puts_requeued_runs_back_at_once(store: Any) -> None:
    """Re-scoring a task deletes its runs' decisions; `rescan` (the console calls it) makes the
    worker look at the whole lookback again instead of waiting for the next full scan."""
    worker = drained_worker(store, full_scan_interval_s=3600)
    old = new_run(store, assembled_ago_s=CURSOR_MARGIN_S * 4)
    worker.cycle()
    assert old not in decided(store)
    worker.rescan()
    worker.cycle()
    assert old in decided(store)


def test_a_full_batch_keeps_the_cursor_so_the_rest_of_the_backlog_follows(store: Any) -> None:
    """Rows assembled just after the cursor: a full batch must not move the cursor past them."""
    worker = drained_worker(store, full_scan_interval_s=3600, batch_size=3)
    worker.margin_scan_interval_s = 0  # every query reaches back the margin
    backlog = {new_run(store, assembled_ago_s=CURSOR_MARGIN_S - 1) for _ in range(7)}
    time.sleep(2)  # now a cursor moved to "asked - margin" would lie after the backlog
    assert worker.run_once() == 3
    worker.cycle()
    assert backlog <= decided(store)


def test_between_full_scans_only_a_runs_latest_row_is_pending(store: Any) -> None:
    """Between full scans the queue groups the window's rows by run instead of reading FINAL:
    a revision re-assembly replaced before it was scored, and a run re-assembly deleted, are not
    pending; the replacing revision is, once, with its own calls."""
    worker = drained_worker(store, full_scan_interval_s=3600)
    run = agent_run(start=time.time() - 60, task="t", tools=["lookup"])
    replaced = agent_run(
        start=time.time() - 60,
        trace_id=run.trace_id,
        root_span_id=run.root_span_id,
        task="t",
        tools=["lookup", "refund"],
    )
    store_runs(store, [run], revision=1, assembled_at=time.time() - 2)
    store_runs(store, [replaced], revision=2, assembled_at=time.time() - 1)
    gone = agent_run(start=time.time() - 60, task="t", tools=["lookup"])
    store_runs(store, [gone], revision=1, assembled_at=time.time() - 2)
    insert_trajectories(store, [deleted_row(gone, version=2)])
    worker.cycle()
    rows = store.query(
        "SELECT TraceId, Revision, count() FROM evaluation_decisions WHERE TraceId IN {ids:Array(String)} "
        "GROUP BY TraceId, Revision",
        {"ids": [run.trace_id, gone.trace_id]},
    )
    assert rows == [(run.trace_id, 2, 1)]
    assert worker.counters.scored_runs == 2  # the first run's, and the replacing revision's
