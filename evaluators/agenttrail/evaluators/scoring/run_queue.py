"""What the evaluator worker and the judge worker share: a queue that is a query.

A run is pending for an evaluator when the run's current revision has no decision under the
evaluator's queue key (its version, qualified by name for judges) in `evaluation_decisions`.
Workers that serve the same key heartbeat into `evaluator_heartbeats` and split the pending
runs between them by trace-id hash. A `budget_paused` decision is not final: the run stays
pending and is picked up again when the judge's budget allows.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from agenttrail.collector.background import BackgroundLoop
from agenttrail.collector.store import Store
from agenttrail.evaluators.scoring.reference_store import StoredReference, latest_references
from agenttrail.evaluators.scoring.schema import HeartbeatRow


class DecisionRow(NamedTuple):
    """An `evaluation_decisions` row: what one evaluator (or judge) decided about one run revision."""

    TraceId: str
    RootSpanId: str
    Evaluator: str
    EvaluatorVersion: str  # the queue key: the evaluator's version, qualified by name for judges
    Revision: int
    Decision: str  # scored, sampled_out, filtered, error, budget_paused...
    Detail: str
    WorkerId: str
    DecidedAt: str  # `seconds.fraction` text (now_stamp)


DECISION_COLUMNS = DecisionRow._fields
# Decisions that leave a run in the queue (recorded so the audit can say why it waits).
NOT_FINAL = ("budget_paused",)

# Which runs are pending: their keys only. FINAL merges every part's rows at once, a block of
# each part's columns at a time, so with the runs' tool calls among them one batch held ~90 MiB
# under overload (20 parts of 2,500 runs: 100 MiB; the keys alone: 3-4 MiB).
_PENDING = """
SELECT t.TraceId, t.RootSpanId, t.Revision
FROM trajectories AS t FINAL
LEFT ANTI JOIN (
    SELECT TraceId AS DecidedTrace, RootSpanId AS DecidedRoot, Revision AS DecidedRevision
    FROM evaluation_decisions
    WHERE EvaluatorVersion = {{queue_key:String}} AND Decision NOT IN {{not_final:Array(String)}}
) AS d ON t.TraceId = d.DecidedTrace AND t.RootSpanId = d.DecidedRoot AND t.Revision = d.DecidedRevision
WHERE t.IsDeleted = 0 AND {where}
  AND cityHash64(t.TraceId) % {{shards:UInt32}} = {{shard:UInt32}}
ORDER BY {order}
LIMIT {{limit:UInt32}}
"""
# The same keys where `where` holds for a run's latest row whenever it holds for any of its rows
# (a lower bound on AssembledAt, which grows with Version): each run's latest row is then among
# the rows `where` selects, so they are grouped by run instead of read with FINAL. FINAL must
# read every granule that holds a key of the batch's runs (random trace ids: the whole table's
# key columns, ~60 ms a batch with 1M runs stored); `where`'s skip index leaves out what is older.
# Grouped in the table's order (the sort key's prefix), a run at a time, as FINAL merges: no hash
# table of every run in the window.
_PENDING_IN_WINDOW = """
SELECT t.TraceId, t.RootSpanId, t.Revision
FROM (
    SELECT TraceId, RootSpanId, argMax(Revision, Version) AS Revision,
        argMax(IsDeleted, Version) AS Deleted, argMax(AssembledAt, Version) AS AssembledAt
    FROM trajectories AS t
    WHERE {where} AND cityHash64(t.TraceId) % {{shards:UInt32}} = {{shard:UInt32}}
    GROUP BY TraceId, RootSpanId
    HAVING Deleted = 0
) AS t
LEFT ANTI JOIN (
    SELECT TraceId AS DecidedTrace, RootSpanId AS DecidedRoot, Revision AS DecidedRevision
    FROM evaluation_decisions
    WHERE EvaluatorVersion = {{queue_key:String}} AND Decision NOT IN {{not_final:Array(String)}}{decided}
) AS d ON t.TraceId = d.DecidedTrace AND t.RootSpanId = d.DecidedRoot AND t.Revision = d.DecidedRevision
ORDER BY {order}
LIMIT {{limit:UInt32}}
SETTINGS optimize_aggregation_in_order = 1
"""
# A window's decisions only: a decision is written after the revision it decides was assembled,
# so one for a run in the window is no older than the window's start (less the clocks' skew).
# Every decision of the queue key otherwise goes into the join: with 1M decided runs, 2,000 new
# and 16,000 in the window, 50 -> 22 ms a batch (asm24); the filter reads only `DecidedAt`.
_DECIDED_SINCE = " AND DecidedAt >= fromUnixTimestamp64Micro({decided_since_us:Int64})"
# Then the columns asked for, of those runs' rows, by trace id (the sort key) and without FINAL:
# each part's rows stream past the filter (10 MiB for the same batch); `pending_runs` keeps the
# pending revision's newest row, as FINAL would have. That row is the one FINAL gave the first
# query, so it passes the same `where`: with it, the skip indexes (`AssembledAt` for the queue
# cursor) leave out granules of runs assembled before, where a batch's random ids otherwise
# read every granule of the table (asm23: 29-31 -> 9-11 us a run with 1M runs stored).
_PENDING_ROWS = """
SELECT t.TraceId, t.RootSpanId, t.Revision, t.Version, {columns}
FROM trajectories AS t
WHERE t.TraceId IN {{pending_trace_ids:Array(String)}} AND t.IsDeleted = 0 AND {where}
"""
_MEMBERS = """
SELECT EvaluatorVersion, WorkerId FROM evaluator_heartbeats FINAL
WHERE EvaluatorVersion IN {keys:Array(String)}
  AND SeenAt >= now64(3) - toIntervalMillisecond({alive_ms:UInt32})
ORDER BY WorkerId
"""
RECENT = "t.AssembledAt >= now64(6) - toIntervalSecond({lookback:UInt32})"
# Longest wait between idle cycles. An idle cycle (heartbeat, shards, the queue query; the
# evaluator's sweep) costs serve ~10 ms of CPU, 23 ms a second at a 0.5 s poll with nothing to
# do. Runs assembled in the same process wake the worker at once (the assembler's listeners), so
# the wait only delays runs that wake nobody here: another sidecar's on a shared store, a budget
# freed. Kept under the heartbeats' liveness window (5 heartbeats) so shards do not flap.
IDLE_WAIT_MAX_S = 2.0


class PendingBatch(NamedTuple):
    rows: list[tuple[Any, ...]]
    # Runs the keys query found: `rows` can hold fewer (a revision replaced and merged away between
    # the two reads), so a short `rows` does not say the queue was drained.
    keys: int


def pending_runs(
    store: Store,
    queue_key: str,
    columns: str,
    **options: Any,
) -> list[tuple[Any, ...]]:
    """`pending_batch`'s rows."""
    return pending_batch(store, queue_key, columns, **options).rows


def pending_batch(
    store: Store,
    queue_key: str,
    columns: str,
    *,
    where: str = RECENT,
    params: Mapping[str, Any] | None = None,
    order: str = "t.AssembledAt",
    shard: tuple[int, int] = (0, 1),
    limit: int = 500,
    lower_bound: bool = False,
    decided_since_s: float | None = None,
) -> PendingBatch:
    """Runs (latest revision) with no final decision under `queue_key`, in `order`; `where`
    filters columns of `trajectories AS t` with bound parameters from `params`. A run whose
    pending revision is replaced between the two reads comes as that revision while its rows are
    not merged away (the newer one is pending next), and is left for the next batch once they are.
    `lower_bound`: `where` holds for a run's latest row whenever it holds for any of its rows
    (`_PENDING_IN_WINDOW`); the queue's cursor and lookback are such bounds. `decided_since_s`
    (with `lower_bound`): no decision about a run `where` selects is older than this."""
    if lower_bound:
        decided = "" if decided_since_s is None else _DECIDED_SINCE
        sql = _PENDING_IN_WINDOW.format(where=where, order=order, decided=decided)
    else:
        sql = _PENDING.format(where=where, order=order)
    bound = {
        **(params or {}),
        "queue_key": queue_key,
        "not_final": list(NOT_FINAL),
        "shard": shard[0],
        "shards": shard[1],
        "limit": limit,
    }
    if decided_since_s is not None:
        bound["decided_since_us"] = int(decided_since_s * 1e6)
    keys = [tuple(key) for key in store.query(sql, bound)]
    if not keys:
        return PendingBatch([], 0)
    wanted = set(keys)
    newest: dict[tuple[Any, ...], tuple[int, tuple[Any, ...]]] = {}
    rows = store.query(
        _PENDING_ROWS.format(columns=columns, where=where),
        {**bound, "pending_trace_ids": sorted({key[0] for key in keys})},
    )
    for row in rows:
        key, version = tuple(row[:3]), row[3]
        if key in wanted and (key not in newest or version > newest[key][0]):
            newest[key] = (version, tuple(row[4:]))
    return PendingBatch([newest[key][1] for key in keys if key in newest], len(keys))


def record_decisions(store: Store, rows: Sequence[DecisionRow]) -> None:
    """Decisions, written after the scores they stand for."""
    store.insert("evaluation_decisions", rows)


def now_stamp() -> tuple[float, str]:
    """The current time and its DateTime64 insert form."""
    now = time.time()
    return now, f"{now:.6f}"


class RunQueueWorker(BackgroundLoop):
    """A supervised loop over run queues: lazy store, worker id, heartbeats and shards per key.

    Subclasses implement `queue_keys()` (what they heartbeat for) and `run_once()` (one batch,
    returning how many runs were decided); `cycle` drains until nothing is pending.
    """

    def __init__(
        self,
        store_factory: Callable[[], Store],
        *,
        what: str,
        thread_name: str,
        poll_interval_s: float,
        worker_id: str | None = None,
        heartbeat_s: float = 1.0,
    ) -> None:
        super().__init__(what=what, thread_name=thread_name, poll_interval_s=poll_interval_s)
        self._store_factory = store_factory
        self._store: Store | None = None
        self.worker_id = worker_id or f"{os.uname().nodename}-{os.getpid()}-{os.urandom(3).hex()}"
        self._heartbeat_s = heartbeat_s
        self._last_heartbeat = 0.0
        self._references: dict[str, StoredReference] = {}
        self._references_at = 0.0
        # The wait after the last cycle: the poll interval after work or a wake-up, doubled
        # after each cycle that decided nothing, up to idle_wait_max_s.
        self._wait_s = poll_interval_s
        self.idle_wait_max_s = max(poll_interval_s, min(IDLE_WAIT_MAX_S, 2 * heartbeat_s))
        # Set by a `run_once` whose batch was all that was pending when it asked: the cycle ends
        # without one more (empty) batch, ~20 ms of heartbeat, shards and queue query. Runs
        # assembled since woke the worker, so the next cycle starts at once.
        self.queue_drained = False

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = self._store_factory()
        return self._store

    def queue_keys(self) -> Iterable[str]:
        raise NotImplementedError

    def run_once(self) -> int:
        raise NotImplementedError

    def start(self) -> None:
        self._heartbeat(force=True)
        super().start()

    def cycle(self) -> None:
        """Drain the queue: batches until none is pending, or one says it found the queue
        drained (`queue_drained`), or we are stopping."""
        decided = 0
        while (batch := self.run_once()) and not self._stop.is_set():
            decided += batch
            if self.queue_drained:
                break
        self._backoff(idle=not decided)

    def _backoff(self, *, idle: bool) -> None:
        self._wait_s = min(2 * self._wait_s, self.idle_wait_max_s) if idle else self._poll_interval_s

    def next_wait_s(self) -> float:
        return self._wait_s

    def wake(self) -> None:
        """Runs were assembled here: score them now, and poll at the normal interval again."""
        self._wait_s = self._poll_interval_s
        super().wake()

    def references(self) -> dict[str, StoredReference]:
        """The current reference of every task, re-read at most every 2 s."""
        if time.monotonic() - self._references_at > 2.0:
            self._references = latest_references(self.store)
            self._references_at = time.monotonic()
        return self._references

    def _heartbeat(self, *, force: bool = False) -> None:
        now = time.time()
        if force or now - self._last_heartbeat >= self._heartbeat_s:
            self.store.insert(
                "evaluator_heartbeats",
                [HeartbeatRow(self.worker_id, key, f"{now:.3f}") for key in self.queue_keys()],
            )
            self._last_heartbeat = now

    def shards(self) -> dict[str, tuple[int, int]]:
        """For each queue key: (this worker's index, live workers on the key)."""
        keys = list(self.queue_keys())
        members: dict[str, list[str]] = {key: [] for key in keys}
        alive_ms = int(self._heartbeat_s * 5000)
        for key, worker in self.store.query(_MEMBERS, {"keys": keys, "alive_ms": alive_ms}):
            members[key].append(worker)
        result = {}
        for key, workers in members.items():
            if self.worker_id not in workers:
                workers = sorted([*workers, self.worker_id])
            result[key] = (workers.index(self.worker_id), len(workers))
        return result
