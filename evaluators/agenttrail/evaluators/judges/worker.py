"""The online judge worker: runs the configured LLM judges on newly assembled runs.

Per judge, its queue is the recent runs with no final decision under the judge's name and
version, so a new judge version judges them again and keeps the old version's results. Calls
run on a thread pool per judge, as wide as the judge client's concurrency. When a judge's
budget is spent the judge pauses until the budget's window turns over: its runs stay pending,
one WARNING says so, and `/healthz` shows it under "judges".

A reloaded `judges:` section (`agenttrail judges reload`, SIGHUP) is handed over with
`replace_judges` and taken by the worker's own thread between batches, so a batch never loses
its thread pool half-way.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from agenttrail.collector.queries import TRAJECTORY_JSON_COLUMNS, trajectory_to_json
from agenttrail.collector.store import Store
from agenttrail.evaluators.judges.base import BudgetExhausted
from agenttrail.evaluators.judges.combined import is_response_judge, store_combined
from agenttrail.evaluators.judges.runs import BatchOutcome, OnlineJudge, decide_runs, pause_text
from agenttrail.evaluators.scoring.run_queue import RECENT, RunQueueWorker, pending_runs

log = logging.getLogger(__name__)

WAITING_RECHECK_S = 60.0  # a waiting session run is looked at again at least this often


@dataclass
class JudgeCounters:
    cycles: int = 0
    failed_cycles: int = 0
    yielded_cycles: int = 0  # skipped while ingestion had a backlog
    last_error: str = ""
    per_judge: dict[str, BatchOutcome] = field(default_factory=dict)  # totals since start


class JudgeWorker(RunQueueWorker):
    """Judges runs in a background thread; `run_once` does one batch per judge (tests call it)."""

    name = "judges"

    def __init__(
        self,
        store_factory: Callable[[], Store],
        judges: Sequence[OnlineJudge],
        *,
        lookback_s: int = 86_400,
        poll_interval_s: float = 0.5,
        batch_size: int | None = None,
        worker_id: str | None = None,
        heartbeat_s: float = 1.0,
        clock: Callable[[], float] = time.time,
        ingest_busy: Callable[[], bool] = lambda: False,
    ) -> None:
        super().__init__(
            store_factory,
            what="judge cycle",
            thread_name="agenttrail-judges",
            poll_interval_s=poll_interval_s,
            worker_id=worker_id,
            heartbeat_s=heartbeat_s,
        )
        self.judges = tuple(judges)
        self.lookback_s = lookback_s
        # A batch waits for its slowest call and then writes once: many waves of calls per batch
        # keep the judge slots busy (measured: 48 judged runs/s at 64, 200 ms and 16 in flight).
        self.batch_size = batch_size or max(64, 16 * max((j.concurrency for j in judges), default=1))
        self._clock = clock
        self._ingest_busy = ingest_busy
        self._responses = [j.name for j in self.judges if is_response_judge(j.judge)]
        self.pauses: dict[str, BudgetExhausted] = {}  # judge name -> the budget error that paused it
        self.counters = JudgeCounters(per_judge={j.name: BatchOutcome() for j in self.judges})
        self._executors = {j.name: _executor(j) for j in self.judges}
        self._replacement: tuple[OnlineJudge, ...] | None = None
        # Session judges: runs of conversations that may go on, left out of the pending query
        # until they may be quiet (at most WAITING_RECHECK_S), so a batch of them cannot hold the
        # queue while other runs wait behind it.
        self._waiting: dict[str, dict[tuple[str, str], float]] = {j.name: {} for j in self.judges}
        self._replace_lock = threading.Lock()

    def replace_judges(self, judges: Sequence[OnlineJudge]) -> None:
        """Judge with `judges` from the next batch on (a reload; validated by the caller)."""
        with self._replace_lock:
            self._replacement = tuple(judges)
        self.wake()

    def _take_replacement(self) -> None:
        with self._replace_lock:
            replacement, self._replacement = self._replacement, None
        if replacement is None:
            return
        old = {judge.name: judge for judge in self.judges}
        executors: dict[str, ThreadPoolExecutor] = {}
        for judge in replacement:
            kept = old.get(judge.name)
            if kept is not None and kept.concurrency == judge.concurrency:
                executors[judge.name] = self._executors.pop(judge.name)
            else:
                executors[judge.name] = _executor(judge)
            if kept is None or getattr(kept.judge, "client", None) is not getattr(
                judge.judge, "client", None
            ):
                self.pauses.pop(judge.name, None)  # a new client has a budget of its own
            self.counters.per_judge.setdefault(judge.name, BatchOutcome())
        for executor in self._executors.values():  # judges removed, or with another concurrency
            executor.shutdown(wait=False, cancel_futures=True)
        for name in set(old) - {judge.name for judge in replacement}:
            self.pauses.pop(name, None)
        self._executors = executors
        self.judges = replacement
        self._heartbeat(force=True)

    def queue_keys(self) -> list[str]:
        return [judge.queue_key for judge in self.judges]

    def count_failure(self, message: str) -> None:
        self.counters.failed_cycles += 1
        self.counters.last_error = message

    def stop(self, timeout_s: float = 10.0) -> None:
        super().stop(timeout_s)
        for executor in self._executors.values():
            executor.shutdown(wait=False, cancel_futures=True)

    def paused(self, name: str) -> BudgetExhausted | None:
        """The pause in force for this judge, if any (a pause past its resume time ends here)."""
        pause = self.pauses.get(name)
        if pause is not None and self._clock() >= pause.resume_at:
            if self.pauses.pop(name, None) is not None:  # the HTTP thread asks too
                log.info("judge %r resumes: its budget window has turned over", name)
            return None
        return pause

    def status(self) -> dict[str, str]:
        """For /healthz: each judge's state ("ok", or why and until when it is paused)."""
        result = {}
        for judge in self.judges:
            pause = self.paused(judge.name)
            result[judge.name] = f"paused: {pause_text(pause)}" if pause else "ok"
        return result

    def run_once(self) -> int:
        """One batch for each judge not paused; returns how many runs left the queues."""
        self._take_replacement()
        self.counters.cycles += 1
        if not self.judges:  # none configured (yet): a reload may add some
            return 0
        self._heartbeat()
        if self._ingest_busy():
            # Ingestion first: judging shares this process's CPU, and runs can wait a little.
            self.counters.yielded_cycles += 1
            return 0
        shards = self.shards()
        decided = 0
        for online in self.judges:
            if self.stopping:
                break
            if self.paused(online.name):
                continue
            now = self._clock()
            waiting = self._waiting.setdefault(online.name, {})
            for key in [key for key, until in waiting.items() if until <= now]:
                del waiting[key]
            where = RECENT
            params: dict[str, Any] = {"lookback": self.lookback_s}
            if waiting:
                where += " AND (t.TraceId, t.RootSpanId) NOT IN {waiting:Array(Tuple(String, String))}"
                params["waiting"] = list(waiting)
            rows = pending_runs(
                self.store,
                online.queue_key,
                TRAJECTORY_JSON_COLUMNS,
                where=where,
                params=params,
                shard=shards[online.queue_key],
                limit=self.batch_size,
            )
            if not rows:
                continue
            outcome = decide_runs(
                self.store,
                online,
                [trajectory_to_json(row) for row in rows],
                self._executors[online.name],
                references=self.references(),
                worker_id=self.worker_id,
                now=now,
            )
            self.counters.per_judge[online.name].add(outcome)
            recheck = now + WAITING_RECHECK_S
            waiting.update({key: min(until, recheck) for key, until in outcome.waiting.items()})
            # multiply_score / avg_score once tool correctness and a response score are both stored
            store_combined(self.store, [row[0] for row in rows], self._responses)
            decided += outcome.decided
            if outcome.pause is not None:
                self._pause(online.name, outcome.pause)
        return decided

    def _pause(self, name: str, pause: BudgetExhausted) -> None:
        self.pauses[name] = pause
        log.warning(
            "judge %r paused: %s; its runs stay pending and are judged when the budget allows",
            name,
            pause_text(pause),
        )


def _executor(judge: OnlineJudge) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(judge.concurrency, thread_name_prefix=f"agenttrail-judge-{judge.name}")
