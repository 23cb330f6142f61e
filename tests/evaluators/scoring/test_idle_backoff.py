"""An idle evaluator polls less: each cycle that decides nothing doubles the wait before the next
(up to `idle_wait_max_s`, within the heartbeats' liveness window), and work or a wake-up (the
assembler's, in the same process) brings it back to the poll interval, so scoring lag does not
grow with the idle wait."""

from __future__ import annotations

import threading
import time
from typing import Any

from otlp_builders import new_trace_id
from trajectory_rows import agent_run, store_runs

from agenttrail.collector.schema import migrate
from agenttrail.evaluators.scoring.schema import EVALUATOR_MIGRATIONS
from agenttrail.evaluators.scoring.worker import EvaluatorConfig, EvaluatorWorker


def decided(store: Any) -> set[str]:
    return {row[0] for row in store.query("SELECT DISTINCT TraceId FROM evaluation_decisions")}


def new_run(store: Any) -> str:
    trace = new_trace_id()
    store_runs(store, [agent_run(start=time.time() - 60, trace_id=trace, task="t", tools=["lookup"])])
    return trace


def test_idle_cycles_back_off_and_work_or_a_wake_up_resets_the_wait(store: Any) -> None:
    migrate(store, EVALUATOR_MIGRATIONS)
    worker = EvaluatorWorker(store.clone, EvaluatorConfig(poll_interval_s=0.25))
    assert worker.idle_wait_max_s == 2.0  # heartbeats every 1 s: liveness is 5 s
    waits = []
    for _ in range(5):
        worker.cycle()
        waits.append(worker.next_wait_s())
    assert waits == [0.5, 1.0, 2.0, 2.0, 2.0]
    new_run(store)
    worker.cycle()  # decided a run: back to the poll interval
    assert worker.next_wait_s() == 0.25
    worker.cycle()
    assert worker.next_wait_s() == 0.5
    worker.wake()
    assert worker.next_wait_s() == 0.25


def test_a_backed_off_worker_scores_at_once_when_woken(store: Any) -> None:
    """The sidecar wakes the evaluator after each assembly: a run written then is scored without
    waiting out the idle wait (here made far longer than the test's deadline)."""
    migrate(store, EVALUATOR_MIGRATIONS)
    worker = EvaluatorWorker(store.clone, EvaluatorConfig(poll_interval_s=0.05))
    worker.idle_wait_max_s = 3600.0
    for _ in range(20):
        worker.cycle()
    assert worker.next_wait_s() == 3600.0, "idle cycles did not back off"
    worker.start()  # its first cycle finds nothing: it now waits an hour unless woken
    try:
        time.sleep(0.5)
        trace = new_run(store)
        worker.wake()
        deadline = time.monotonic() + 30
        while trace not in decided(store) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert trace in decided(store)
    finally:
        worker.stop()


class HeldAfterAnEmptyCheck(EvaluatorWorker):
    """The real worker, held once just after a batch query found nothing: between its check and
    its wait, where a wake-up that is not kept would be lost."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hold = threading.Event()  # set: hold the next empty check
        self.checked = threading.Event()
        self.resume = threading.Event()

    def run_once(self) -> int:
        decided_runs = super().run_once()
        if not decided_runs and self.hold.is_set():
            self.hold.clear()
            self.checked.set()
            self.resume.wait()
        return decided_runs


def test_a_wake_up_between_the_check_and_the_wait_is_not_lost(store: Any) -> None:
    """A run assembled (and its wake-up sent) after the worker's query found nothing but before
    the worker waits is scored at once, not after the idle wait (an hour here): the wake-up
    outlives the cycle it arrived in."""
    migrate(store, EVALUATOR_MIGRATIONS)
    worker = HeldAfterAnEmptyCheck(store.clone, EvaluatorConfig(poll_interval_s=3600.0))
    worker.hold.set()
    worker.start()
    try:
        assert worker.checked.wait(30), "the worker's first cycle did not run"
        trace = new_run(store)
        worker.wake()  # the assembler's, while the worker is past its check
        worker.resume.set()
        deadline = time.monotonic() + 30  # a guard against hanging, not a timing figure
        while trace not in decided(store) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert trace in decided(store), "the wake-up was lost: the worker waits out its idle wait"
    finally:
        worker.resume.set()
        worker.stop()


def test_a_cycle_ends_with_the_batch_that_drained_the_queue(store: Any) -> None:
    """A batch smaller than the batch size was everything pending when it asked: the cycle ends
    there instead of asking once more (a heartbeat, the shards and the queue query for nothing);
    a full batch asks again."""
    migrate(store, EVALUATOR_MIGRATIONS)
    worker = EvaluatorWorker(store.clone, EvaluatorConfig(batch_size=2))
    worker.cycle()  # the first, empty, full scan
    traces = [new_run(store) for _ in range(3)]
    before = worker.counters.cycles
    worker.cycle()
    assert worker.counters.cycles - before == 2  # batches of 2 and 1: the second drained it
    assert set(traces) <= decided(store)
    trace = new_run(store)
    before = worker.counters.cycles
    worker.cycle()
    assert worker.counters.cycles - before == 1
    assert trace in decided(store)
