"""Turn stored spans into stored trajectories once a trace has gone quiet.

A trace is due when its agent span has arrived and nothing of the trace has arrived for
`quiet_period_s`, or, with no agent span, after `idle_timeout_s`. Spans arriving after
assembly make the trace due again: the new trajectory is a new version (ReplacingMergeTree)
with a higher `Revision`, which is how evaluators know to re-score it. Runs that disappear on
re-assembly (e.g. a late agent span replaces a fallback root) are written as deletions.

What is pending lives in memory and is rebuilt after a restart from `trace_arrivals` and
`assembled_traces`, so no trace is left unassembled. In memory it holds at most
`max_pending_traces` traces: while assembly is behind (a sustained overload stores faster than it
assembles), a batch's new traces beyond that are not held, only the range of arrival times they
came in, and are read back from `trace_arrivals` as room frees, oldest first (the same
rediscovery recover() does, for that range only). A trace whose runs were stored but not its
state (a crash between the two writes) is re-assembled as a new revision of those runs.

What a chunk looks up costs about the same on a store of millions of traces as on a fresh one
(collector migration 8): where its traces' new spans lie from `assembly_ranges`, sorted by when
ClickHouse stored them, reading only the rows stored since the round's first arrival (the
writer stores batches one after another, so every span of the round is stored after the batch
notified before it); where the spans assembled before lie, with the previous runs, from
`assembled_traces`, keyed by a hash of the id. A trace whose round began before `recover()` (a
restart: its spans may have been stored by the run before), or none of whose spans the window
holds (stored by another sidecar, or before the restart), is looked up by id in
`otel_traces_trace_id_ts`, as every trace was before.
"""

from __future__ import annotations

import collections
import json
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agenttrail.collector.assembly_sql import CHUNK_TABLE, CREATE_CHUNK_TABLE, INSERT_PLAIN, WRITTEN
from agenttrail.collector.background import BackgroundLoop
from agenttrail.collector.conventions import EVENT_ATTRIBUTES
from agenttrail.collector.errors import StoreError, StoreOutOfMemory, StoreUnavailable
from agenttrail.collector.otlp_decode import ns_to_clickhouse
from agenttrail.collector.rows import AssemblyStateRow, TrajectoryRow
from agenttrail.collector.runs import AgentRun
from agenttrail.collector.store import Store
from agenttrail.collector.trajectory import (
    TRAJECTORY_ATTRIBUTE_PREFIXES,
    TRAJECTORY_ATTRIBUTES,
    SpanEvent,
    SpanRecord,
    build_runs,
)

log = logging.getLogger(__name__)

# Columns added by later migrations; rows written without them (older writers, tests) get defaults.
ADDED_TRAJECTORY_COLUMNS = ("AvailableTools", "Incomplete")
ASSEMBLED_COLUMNS = TrajectoryRow._fields  # what assembly writes: every column, by name
TRAJECTORY_COLUMNS = tuple(c for c in ASSEMBLED_COLUMNS if c not in ADDED_TRAJECTORY_COLUMNS)
# ClickHouse spends about 0.2 CPU-s analysing the plain-trace query whatever its size, and then
# ~0.25 ms a run against build_runs' ~1 ms: below this many traces a chunk is cheaper in Python.
SQL_MIN_TRACES = 256
# ClickHouse memory one assembly statement may use (the plain-trace INSERT ... SELECT, the span
# read for build_runs): about 90 MiB for 1,000 agent traces under bench_overload. A chunk refused
# for it is assembled in halves, and later chunks stay smaller for a while.
ASSEMBLY_MAX_MEMORY = 256 * 1024 * 1024
# Chunks assembled within the limit before the chunk size doubles back towards its maximum.
_GROW_AFTER = 8
# Most traces per assembly statement (Assembler's max_traces_per_query; the config's
# assembly_max_traces). Bigger chunks cost less CPU a run (bench_assembly, quiet: ~3,000 runs per
# CPU-second in chunks of 1,000, ~4,200 of 2,000, ~6,500 of 4,000) but hold more memory while
# behind: under bench_overload's 4x, serve's RSS peaked at 1.94x idle with 1,000, 1.96x with
# 2,000 and 2.36-2.41x with 4,000, against issue 11's 2x.
MAX_TRACES_PER_QUERY = 2000
_SPAN_QUERY = """
SELECT TraceId, SpanId, ParentSpanId, SpanName, ServiceName, toUnixTimestamp64Nano(Timestamp),
       Duration, StatusCode, StatusMessage,
       mapFilter((k, v) -> k IN {keys:Array(String)}
                 OR arrayExists(p -> startsWith(k, p), {prefixes:Array(String)}), SpanAttributes),
       arrayMap(t -> toUnixTimestamp64Nano(t), Events.Timestamp), Events.Name,
       arrayMap(a -> mapFilter((k, v) -> k IN {event_keys:Array(String)}, a), Events.Attributes)
FROM otel_traces
WHERE TraceId IN {ids:Array(String)}
  AND Timestamp >= {since:DateTime64(9)} AND Timestamp < {until:DateTime64(9)}
"""
# Margin under the window's start, for ClickHouse's clock against ours (recover() adds the skew
# it measures) and its milliseconds: StoredAt is cut down to one.
CLOCK_MARGIN_S = 2.0
# Each trace's range among the spans stored since `since` (the round's window).
_WINDOW_RANGES = f"""
SELECT 0, TraceId, CAST([], 'Array(String)'), toUInt32(0), toUnixTimestamp64Milli(min(SpansFrom)),
       toUnixTimestamp64Milli(max(SpansUntil))
FROM assembly_ranges
WHERE StoredAt >= {{since:DateTime64(3)}} AND TraceId GLOBAL IN (SELECT TraceId FROM {CHUNK_TABLE})
GROUP BY TraceId
UNION ALL
"""
# Each trace's previous state; a hash shared with another trace brings that one's state too
# (ignored). The hash in PREWHERE: a new trace matches no row of the granules its hash selects,
# and only the hashes of those are read (a WHERE read every column of them: 70-130 ms against
# ~20 a chunk of 2,000 among 500,000 states).
_PREVIOUS_STATE = f"""
SELECT 1, TraceId, argMax(RunKeys, Version), max(Revision),
       toUnixTimestamp64Milli(argMax(SpansFrom, Version)), toUnixTimestamp64Milli(argMax(SpansUntil, Version))
FROM assembled_traces PREWHERE TraceHash GLOBAL IN (SELECT cityHash64(TraceId) FROM {CHUNK_TABLE})
GROUP BY TraceId
"""
# The range of every span of these traces, by id: for traces the window cannot answer for.
_RANGES_BY_ID = """
SELECT TraceId, toUnixTimestamp64Milli(min(SpansFrom)), toUnixTimestamp64Milli(max(SpansUntil))
FROM otel_traces_trace_id_ts WHERE TraceId IN {ids:Array(String)} GROUP BY TraceId
"""
# Traces that arrived (in `trace_arrivals`, as `arrived` filters them) after they were last
# assembled, found by their hash in assembled_traces (its key): the table keeps every trace ever
# assembled, and grouping all of it held ~2 GB at 8,000,000 states.
_ARRIVED_NOT_ASSEMBLED = """
WITH arrived AS (SELECT TraceId, ArrivedAt, HasAgent FROM trace_arrivals WHERE {where})
SELECT a.TraceId, toUnixTimestamp64Micro(a.last_arrival) AS last_us, a.has_agent
FROM (
    SELECT TraceId, max(ArrivedAt) AS last_arrival, max(HasAgent) AS has_agent FROM arrived GROUP BY TraceId
) AS a
LEFT JOIN (
    SELECT TraceId, max(AssembledThrough) AS done FROM assembled_traces
    PREWHERE TraceHash IN (SELECT cityHash64(TraceId) FROM arrived)
    GROUP BY TraceId
) AS s ON a.TraceId = s.TraceId
WHERE a.last_arrival > s.done
"""
# What recover() resumes: the lookback's traces.
_RECOVERY_QUERY = _ARRIVED_NOT_ASSEMBLED.replace(
    "{where}", "ArrivedAt >= now64(6) - toIntervalSecond({lookback:UInt32})"
)
# Of those, what recover() holds: the oldest by last arrival, as many as the bound allows. The
# rest never reach Python (a list of every trace of a day's lookback was read before the bound
# applied): ClickHouse returns them as ranges of their last arrivals, `step` traces each, the
# ranges read back from trace_arrivals as room frees. Ties at the boundary (a batch's traces
# share their arrival) fall in both; a range's read-back keeps a trace held already.
_RECOVERY_HELD = "SELECT * FROM (" + _RECOVERY_QUERY + ") ORDER BY last_us LIMIT {room:UInt64}"
_RECOVERY_RANGES = (
    "SELECT min(last_us), max(last_us), count() FROM ("
    "SELECT last_us, row_number() OVER (ORDER BY last_us) AS position FROM (" + _RECOVERY_QUERY + ")"
    ") WHERE position > {room:UInt64} GROUP BY intDiv(position - {room:UInt64} - 1, {step:UInt64}) "
    "ORDER BY 1"
)
# What an overflow range holds: the traces of batches notified between two arrival times, each
# with its last arrival since (a later batch of the trace, in a later range, is assembled with
# this one, not as a second revision).
_OVERFLOW_QUERY = _ARRIVED_NOT_ASSEMBLED.replace(
    "{where}",
    "ArrivedAt >= {since:DateTime64(6)} AND TraceId IN (SELECT TraceId FROM trace_arrivals "
    "WHERE ArrivedAt >= {since:DateTime64(6)} AND ArrivedAt <= {until:DateTime64(6)})",
)
# Traces held in memory at most (Assembler's max_pending_traces; the config's
# assembly_max_pending_traces): ~300 bytes of Python each (the id, the entry, the dict's slot).
# Under bench_overload's 4x the backlog grew by ~2,800 traces a second, 115,000 after 40 s.
MAX_PENDING_TRACES = 20_000
# Recovered traces whose runs are stored but whose state is not: a crash came between the two
# writes. Their next assembly is a re-assembly of these runs (Revision + 1, deletions for runs
# that vanished), not a second first assembly, which would leave the first runs counted.
_STORED_WITHOUT_STATE = """
SELECT TraceId, groupArray(RootSpanId), max(Revision) FROM trajectories FINAL
WHERE TraceId IN {ids:Array(String)}
  AND TraceId NOT IN (SELECT TraceId FROM assembled_traces WHERE TraceId IN {ids:Array(String)})
GROUP BY TraceId
"""

_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


@dataclass(slots=True)
class _Pending:
    last_arrival: float  # wall-clock arrival time of the newest stored batch with this trace
    seen_monotonic: float  # when we last heard of the trace, for the quiet period
    has_agent: bool
    # When the writer notified the batch stored before this round's first one: every span of
    # the round was stored after it. None: unknown (the round began before recover()).
    window_from: float | None


@dataclass(slots=True)
class _Overflow:
    """Batches whose new traces were not held in memory: notified from `first` to `last`
    (their arrival times, as `trace_arrivals` stores them), `traces` new traces in all."""

    first: float
    last: float
    traces: int
    window_from: float | None  # the batch notified before `first` (every round here began after it)
    reading: bool = False  # being read back: later batches start a range of their own
    recovered: bool = False  # found by recover(): its runs may be stored without their state


def even_chunk(remaining: int, most: int) -> int:
    """The size of the next chunk when `remaining` traces are due, at most `most` a chunk: as
    few chunks as that allows, of even sizes (1,001 due: one chunk, not 1,000 and then 1)."""
    chunks = -(-remaining // max(most, 1))
    return -(-remaining // chunks) if chunks else 0


def _ms3(milliseconds: int) -> str:
    """Unix milliseconds as ClickHouse's seconds text, exactly (no float in between)."""
    return f"{milliseconds // 1000}.{milliseconds % 1000:03d}"


def _ts6(seconds: float) -> str:
    return f"{seconds:.6f}"


def trajectory_row(run: AgentRun, *, revision: int, assembled_at: float, version: int) -> TrajectoryRow:
    calls = run.tool_calls
    return TrajectoryRow(
        TraceId=run.trace_id,
        RootSpanId=run.root_span_id,
        Agent=run.agent,
        AgentId=run.agent_id,
        AgentVersion=run.agent_version,
        Task=run.task,
        ConversationId=run.conversation_id,
        ServiceName=run.service_name,
        Model=run.model,
        Start=ns_to_clickhouse(run.start_ns),
        LatencyS=run.latency_s,
        Failure=int(run.failure),
        ErrorType=run.error_type,
        Input="" if run.input is None else _json(run.input),
        Output="" if run.output is None else _json(run.output),
        InputTokens=run.input_tokens,
        OutputTokens=run.output_tokens,
        ToolCount=len(calls),
        ToolNames=[call.name for call in calls],
        ToolStatuses=[call.status for call in calls],
        ToolCalls=_json([call.to_json() for call in calls]),
        SpanCount=run.span_count,
        Revision=revision,
        AssembledAt=_ts6(assembled_at),
        Version=version,
        IsDeleted=0,
        AvailableTools=_json([tool.to_json() for tool in run.available_tools]),
        Incomplete=int(run.incomplete),
    )


class Assembler(BackgroundLoop):
    def __init__(
        self,
        store: Store,
        *,
        quiet_period_s: float = 2.0,
        idle_timeout_s: float = 30.0,
        poll_interval_s: float = 0.1,
        # Most traces per assembly query. What is due is assembled in as few chunks as this
        # allows, split evenly, so chunks grow with the backlog: the SQL path costs ~0.2 CPU-s a
        # statement whatever its size (chunks of 4,000: ~5,000 runs per CPU-second in
        # bench_assembly, of 1,000: ~2,400). Its memory grows with the chunk too, which
        # max_query_memory bounds.
        max_traces_per_query: int = MAX_TRACES_PER_QUERY,
        # Most traces held in memory; a batch's new traces beyond it are read back from
        # trace_arrivals as room frees (nothing is dropped; a single batch is read back whole).
        max_pending_traces: int = MAX_PENDING_TRACES,
        recovery_lookback_s: int = 86_400,
        sql_assembly: bool = True,
        sql_min_traces: int = SQL_MIN_TRACES,
        max_query_memory: int = ASSEMBLY_MAX_MEMORY,
        # Seconds the arrival window starts before the round's first batch (at least ClickHouse's
        # millisecond); recover() adds how far the store's clock is behind.
        clock_margin_s: float = CLOCK_MARGIN_S,
    ) -> None:
        super().__init__(
            what="trajectory assembly", thread_name="agenttrail-assembler", poll_interval_s=poll_interval_s
        )
        self._store = store
        self.quiet_period_s = quiet_period_s
        self.idle_timeout_s = idle_timeout_s
        self._chunk = max_traces_per_query
        # The chunk size in use: halved when ClickHouse refuses a chunk for memory, doubled back
        # after _GROW_AFTER chunks that fit.
        self.chunk_size = max_traces_per_query
        self._fitted = 0
        self.max_query_memory = max_query_memory  # bytes; 0: no limit
        self.memory_refusals = 0
        self._recovery_lookback_s = recovery_lookback_s
        self._pending: dict[str, _Pending] = {}
        self.max_pending_traces = max(max_pending_traces, 1)
        # Arrival ranges of the new traces not held, oldest first; while any is left, every new
        # trace goes to one (so they are assembled in the order they came).
        self._overflow: collections.deque[_Overflow] = collections.deque()
        self.overflowed_traces = 0  # new traces not held in memory when notified
        self.reread_traces = 0  # traces read back from trace_arrivals for those ranges
        # The arrival time of the last batch notified (None before the first, or recover()).
        self._last_stored: float | None = None
        self.clock_margin_s = max(clock_margin_s, 0.001)
        self._clock_margin_s = self.clock_margin_s
        # Previous (run keys, revision) of recovered traces stored without state (recover()).
        self._unrecorded: dict[str, tuple[list[str], int]] = {}
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._busy = False
        # Plain traces are assembled by ClickHouse (assembly_sql) in chunks of at least
        # sql_min_traces; False: all by build_runs.
        self.sql_assembly = sql_assembly
        self.sql_min_traces = sql_min_traces
        self.assembled_runs = 0
        self.plain_runs = 0  # of which assembled by ClickHouse
        self.looked_up_by_id = 0  # traces whose range the arrival window could not give
        self.failures = 0
        # Called after trajectories were written (the evaluator wakes up on it).
        self.listeners: list[Callable[[], None]] = []

    # -- input ---------------------------------------------------------------------------

    def notify(self, traces: dict[str, bool], arrived_at: float) -> None:
        """Called by the writer after spans of these traces were stored, batch after batch in
        the order it stored them (each new round's arrival window starts at the batch before)."""
        now = time.monotonic()
        with self._lock:
            window_from = self._last_stored
            held = not self._overflow
            not_held = 0
            for trace_id, has_agent in traces.items():
                entry = self._pending.get(trace_id)
                if entry is not None:
                    entry.last_arrival = max(entry.last_arrival, arrived_at)
                    entry.seen_monotonic = now
                    entry.has_agent = entry.has_agent or has_agent
                elif held and len(self._pending) < self.max_pending_traces:
                    self._pending[trace_id] = _Pending(arrived_at, now, has_agent, window_from)
                else:
                    held = False
                    not_held += 1
            if not_held:
                self._overflow_batch(arrived_at, not_held, window_from)
            self._last_stored = arrived_at if window_from is None else max(window_from, arrived_at)

    def _overflow_batch(self, arrived_at: float, traces: int, window_from: float | None) -> None:
        """Note a batch's new traces not held (under the lock): the last range grows by it up to
        half the bound, so each range can be read back once half of it is free."""
        self.overflowed_traces += traces
        last = self._overflow[-1] if self._overflow else None
        if last is not None and not last.reading and last.traces + traces <= self.max_pending_traces // 2:
            last.last = arrived_at
            last.traces += traces
        else:
            self._overflow.append(_Overflow(arrived_at, arrived_at, traces, window_from))

    def _read_back_overflow(self) -> None:
        """Hold the oldest ranges' traces again while they fit under the bound (one range at a
        time, whatever its size, when nothing is held): from trace_arrivals, as recover() does,
        each with its quiet period counted from its last arrival."""
        while True:
            with self._lock:
                if not self._overflow:
                    return
                head = self._overflow[0]
                if self._pending and len(self._pending) + head.traces > self.max_pending_traces:
                    return
                head.reading = True
            rows = self._store.query(_OVERFLOW_QUERY, {"since": _ts6(head.first), "until": _ts6(head.last)})
            unrecorded = self._stored_without_state([row[0] for row in rows]) if head.recovered else {}
            now, wall = time.monotonic(), time.time()
            with self._lock:
                self._unrecorded.update(unrecorded)
                for trace_id, last_arrival_us, has_agent in rows:
                    last_arrival = last_arrival_us / 1e6
                    seen = now - max(0.0, wall - last_arrival)
                    entry = self._pending.get(trace_id)
                    if entry is None:
                        entry = _Pending(last_arrival, seen, bool(has_agent), head.window_from)
                        self._pending[trace_id] = entry
                    else:  # held already: it was pending when this batch came, or an earlier range had it
                        entry.last_arrival = max(entry.last_arrival, last_arrival)
                        entry.has_agent = entry.has_agent or bool(has_agent)
                        if entry.window_from is not None:
                            entry.window_from = (
                                None if head.window_from is None else min(entry.window_from, head.window_from)
                            )
                self._overflow.popleft()
                self.reread_traces += len(rows)

    def recover(self) -> int:
        """Re-queue traces that arrived but were not assembled before a restart. Runs before
        the writer stores new batches (as the sidecar starts): their rounds' windows begin now.
        Rounds begun before (recovered traces, batches replayed from the spool, whose spans may
        have been stored by the run before) are looked up by id."""
        self._measure_clock()
        lookback = {"lookback": self._recovery_lookback_s}
        with self._lock:
            room = max(self.max_pending_traces - len(self._pending), 0)
        rows = self._store.query(_RECOVERY_HELD, {**lookback, "room": room})
        ranges = self._store.query(
            _RECOVERY_RANGES, {**lookback, "room": room, "step": max(self.max_pending_traces // 2, 1)}
        )
        unrecorded = self._stored_without_state([row[0] for row in rows])
        now = time.monotonic()
        with self._lock:
            self._unrecorded.update(unrecorded)
            for entry in self._pending.values():
                entry.window_from = None
            # Every trace of the replay's ranges arrived within the lookback: it is among the rows.
            self._overflow.clear()
            for trace_id, last_arrival, has_agent in rows:
                self._pending[trace_id] = _Pending(last_arrival / 1e6, now, bool(has_agent), None)
            for first_us, last_us, traces in ranges:
                # closed (reading): new batches start ranges of their own
                self._overflow.append(
                    _Overflow(int(first_us) / 1e6, int(last_us) / 1e6, int(traces), None, True, True)
                )
                self.overflowed_traces += int(traces)
            self._last_stored = time.time()
        found = len(rows) + sum(int(traces) for _, _, traces in ranges)
        if found:
            log.info("resuming assembly of %d trace(s) from before the restart", found)
        return found

    def _stored_without_state(self, ids: list[str]) -> dict[str, tuple[list[str], int]]:
        """Of these traces, those whose runs are stored but whose state is not (see
        _STORED_WITHOUT_STATE): their run keys and revision, a chunk of ids a query."""
        unrecorded: dict[str, tuple[list[str], int]] = {}
        for start in range(0, len(ids), self._chunk):
            chunk = ids[start : start + self._chunk]
            for trace_id, keys, revision in self._store.query(_STORED_WITHOUT_STATE, {"ids": chunk}):
                unrecorded[trace_id] = (list(keys), int(revision))
        return unrecorded

    def _measure_clock(self) -> None:
        """Widen the window's margin by how far ClickHouse's clock is behind ours (a server)."""
        before = time.time()
        [(server_ms,)] = self._store.query("SELECT toUnixTimestamp64Milli(now64(3))")
        behind = (before + time.time()) / 2 - int(server_ms) / 1000
        if behind > CLOCK_MARGIN_S / 2:
            log.warning(
                "the store's clock is %.1f s behind this host's; assembly widens its look-up window by that",
                behind,
            )
        self._clock_margin_s = self.clock_margin_s + max(0.0, behind)

    @property
    def pending_count(self) -> int:
        """Traces waiting for assembly: held in memory, and in ranges not held (a trace
        notified in several of those batches counts once for each)."""
        with self._lock:
            return len(self._pending) + sum(overflow.traces for overflow in self._overflow)

    @property
    def held_count(self) -> int:
        """Traces held in memory (at most max_pending_traces, but for one batch's read back
        whole)."""
        with self._lock:
            return len(self._pending)

    # -- lifecycle -----------------------------------------------------------------------

    def wait_idle(self, timeout_s: float = 30.0) -> bool:
        """Wait until nothing is pending (tests and the demo use this)."""
        deadline = time.monotonic() + timeout_s
        with self._idle:
            while self._pending or self._overflow or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(min(remaining, 0.05))
        return True

    def cycle(self) -> None:
        self.assemble_due()

    def count_failure(self, message: str) -> None:
        self.failures += 1

    # -- work ----------------------------------------------------------------------------

    def _due(self, now: float) -> dict[str, float]:
        due: dict[str, float] = {}
        with self._lock:
            for trace_id, entry in self._pending.items():
                wait = self.quiet_period_s if entry.has_agent else self.idle_timeout_s
                if now - entry.seen_monotonic >= wait:
                    due[trace_id] = entry.last_arrival
            if due:
                self._busy = True
        return due

    def assemble_due(self) -> int:
        """Assemble every trace that is due now; returns the number of runs written."""
        if self._overflow:
            self._read_back_overflow()
        due = self._due(time.monotonic())
        if not due:
            return 0
        written = 0
        try:
            ids = list(due)
            start = 0
            while start < len(ids):
                if self.stopping:
                    break  # the rest stays pending; after a restart, recover() finds it again
                size = even_chunk(len(ids) - start, self.chunk_size)
                chunk = {trace_id: due[trace_id] for trace_id in ids[start : start + size]}
                start += len(chunk)
                written += self._assemble_isolating_failures(chunk)
                with self._lock:
                    for trace_id, through in chunk.items():
                        entry = self._pending.get(trace_id)
                        # A newer arrival during assembly keeps the trace pending.
                        if entry is not None and entry.last_arrival <= through:
                            del self._pending[trace_id]
        finally:
            with self._idle:
                self._busy = False
                self._idle.notify_all()
        return written

    def _assemble_isolating_failures(self, chunk: dict[str, float]) -> int:
        """Assemble a chunk; if ClickHouse refuses it (not an outage), retry trace by trace so
        one bad trace is logged and skipped instead of blocking all the others forever."""
        try:
            return self._assemble_within_memory(chunk)
        except StoreUnavailable:
            raise
        except StoreError as exc:
            if self.stopping:
                raise  # the store is closing under us: not a bad trace, nothing to isolate
            if len(chunk) == 1:
                self.failures += 1
                log.error("skipping trace %s: its trajectory cannot be stored: %s", next(iter(chunk)), exc)
                return 0
        written = 0
        for trace_id, through in chunk.items():
            try:
                written += self._assemble({trace_id: through})
            except StoreUnavailable:
                raise
            except StoreError as exc:
                self.failures += 1
                log.error("skipping trace %s: its trajectory cannot be stored: %s", trace_id, exc)
        return written

    def _assemble_within_memory(self, chunk: dict[str, float]) -> int:
        """Assemble a chunk within max_query_memory: a chunk ClickHouse refuses for memory is
        assembled in halves (nothing is dropped), and one trace alone without the limit."""
        try:
            written = self._assemble(chunk, self.max_query_memory)
        except StoreOutOfMemory as exc:
            self.memory_refusals += 1
            if len(chunk) == 1:
                log.warning(
                    "trace %s needs more ClickHouse memory to assemble than assembly_max_memory_bytes "
                    "(%d) allows; assembling it without the limit: %s",
                    next(iter(chunk)),
                    self.max_query_memory,
                    exc,
                )
                return self._assemble(chunk, 0)
            half = len(chunk) // 2
            if half < self.chunk_size:
                log.warning(
                    "assembling %d traces at once needs more ClickHouse memory than "
                    "assembly_max_memory_bytes (%d) allows; assembling %d at a time for now",
                    len(chunk),
                    self.max_query_memory,
                    half,
                )
                self.chunk_size, self._fitted = half, 0
            items = list(chunk.items())
            return self._assemble_within_memory(dict(items[:half])) + self._assemble_within_memory(
                dict(items[half:])
            )
        # Chunks are split evenly, so one above half the size in use tested that size.
        if 2 * len(chunk) > self.chunk_size and self.chunk_size < self._chunk:
            self._fitted += 1
            if self._fitted >= _GROW_AFTER:
                self.chunk_size, self._fitted = min(self._chunk, 2 * self.chunk_size), 0
        return written

    def _assemble(self, through: dict[str, float], max_memory: int = 0) -> int:
        """Assemble these traces; the two statements whose memory grows with the chunk run
        with ClickHouse's max_memory_usage at `max_memory` (0: none)."""
        # A SETTINGS clause, not per-statement settings: on the embedded engine those cost three
        # more statements each (read the old value, SET, SET back).
        limit = f"\nSETTINGS max_memory_usage = {int(max_memory)}" if max_memory else ""
        ids = list(through)
        # Created again each chunk (a no-op): a server drops a session's tables after a while idle.
        self._store.command(CREATE_CHUNK_TABLE)
        self._store.command(f"TRUNCATE TABLE {CHUNK_TABLE}")
        self._store.insert_rows(CHUNK_TABLE, ["TraceId"], [(trace_id,) for trace_id in ids])
        previous, ranges = self._look_up(ids)
        bounds: tuple[str, str] | None = None
        if ranges:
            # Every span of the chunk starts in [since, until), to the millisecond (whole
            # seconds for rows stored before migration 7). No wider: at 50,000 spans/s each
            # second more is ~50,000 spans more that the chunk reads.
            since = min(low for low, _ in ranges.values())
            until = max(high for _, high in ranges.values())
            bounds = _ms3(since), _ms3(until)
        if self._unrecorded:
            with self._lock:
                for trace_id in ids:
                    stored = self._unrecorded.get(trace_id)
                    if stored is not None and trace_id not in previous:
                        previous[trace_id] = stored
        now = time.time()
        version = time.time_ns()
        plain: dict[str, str] = {}
        if bounds is not None and self.sql_assembly and len(ids) >= self.sql_min_traces:
            plain = self._assemble_plain(ids, bounds, previous, now, version, limit)
        rest = [trace_id for trace_id in ids if trace_id not in plain]
        spans = self._read_spans(rest, bounds, limit) if rest and bounds is not None else {}
        trajectory_rows: list[TrajectoryRow] = []
        state_rows: list[AssemblyStateRow] = []
        for trace_id in ids:
            old_keys, old_revision = previous.get(trace_id, ([], 0))
            revision = old_revision + 1
            if trace_id in plain:
                keys = [plain[trace_id]]  # its one run is stored already
            else:
                runs = build_runs(spans.get(trace_id, []))
                keys = [run.root_span_id for run in runs]
                trajectory_rows.extend(
                    trajectory_row(run, revision=revision, assembled_at=now, version=version) for run in runs
                )
            trajectory_rows.extend(
                deletion_row(trace_id, gone, now, version) for gone in set(old_keys) - set(keys)
            )
            low, high = (_ms3(ms) for ms in ranges.get(trace_id, (0, 0)))
            done = _ts6(through[trace_id])
            state_rows.append(AssemblyStateRow(trace_id, done, keys, revision, version, low, high))
        self._store.insert("trajectories", trajectory_rows)
        # State last: a crash before it only means the trace is assembled again (recover() reads
        # the runs stored, so that is a re-assembly of them).
        self._store.insert("assembled_traces", state_rows)
        if self._unrecorded:
            with self._lock:
                for trace_id in ids:
                    self._unrecorded.pop(trace_id, None)
        runs_written = len(plain) + sum(1 for row in trajectory_rows if not row.IsDeleted)
        self.assembled_runs += runs_written
        self.plain_runs += len(plain)
        for listener in self.listeners:
            listener()
        return runs_written

    def _look_up(self, ids: list[str]) -> tuple[dict[str, tuple[list[str], int]], dict[str, tuple[int, int]]]:
        """The chunk's previous states (run keys, revision) and each trace's span range
        (Unix ms, [from, until)): the spans of this round (by the window, else by id) with the
        range assembled before. The chunk's ids are in CHUNK_TABLE."""
        with self._lock:
            windows = {trace_id: self._window_from(trace_id) for trace_id in ids}
        known = [window for window in windows.values() if window is not None]
        sql, params = _PREVIOUS_STATE, {}
        if known:
            sql = _WINDOW_RANGES + _PREVIOUS_STATE
            params = {"since": _ms3(math.floor((min(known) - self._clock_margin_s) * 1000))}
        previous: dict[str, tuple[list[str], int]] = {}
        ranges: dict[str, tuple[int, int]] = {}
        found: set[str] = set()
        stated: set[str] = set()
        for kind, trace_id, keys, revision, low, high in self._store.query(sql, params):
            if trace_id not in windows:
                continue  # another trace with the same hash
            if kind == 1:
                previous[trace_id] = (list(keys), int(revision))
                if not low:
                    continue  # copied from assembly_state (migration 8): no range stored
                stated.add(trace_id)
            else:
                found.add(trace_id)
            _widen(ranges, trace_id, int(low), int(high))
        by_id = [
            trace_id
            for trace_id, window in windows.items()
            if window is None or trace_id not in found or (trace_id in previous and trace_id not in stated)
        ]
        if by_id:
            self.looked_up_by_id += len(by_id)
            for trace_id, low, high in self._store.query(_RANGES_BY_ID, {"ids": by_id}):
                _widen(ranges, trace_id, int(low), int(high))
        return previous, ranges

    def _window_from(self, trace_id: str) -> float | None:
        entry = self._pending.get(trace_id)
        return entry.window_from if entry is not None else None

    def _assemble_plain(
        self,
        ids: list[str],
        bounds: tuple[str, str],
        previous: dict[str, tuple[list[str], int]],
        now: float,
        version: int,
        limit: str,
    ) -> dict[str, str]:
        """Store the runs of the plain traces in ClickHouse (assembly_sql); their run keys."""
        # Only re-assembled traces are listed (revision > 1); the query's default is 1.
        again = [trace_id for trace_id in ids if trace_id in previous]
        self._store.command(
            INSERT_PLAIN + limit,
            {
                "since": bounds[0],
                "until": bounds[1],
                "revision_ids": again,
                "revisions": [previous[trace_id][1] + 1 for trace_id in again],
                "assembled_at": _ts6(now),
                "version": version,
            },
        )
        return {row[0]: row[1] for row in self._store.query(WRITTEN, {"version": version})}

    def _read_spans(self, ids: list[str], bounds: tuple[str, str], limit: str) -> dict[str, list[SpanRecord]]:
        params = {
            "ids": ids,
            "since": bounds[0],
            "until": bounds[1],
            "keys": TRAJECTORY_ATTRIBUTES,
            "prefixes": TRAJECTORY_ATTRIBUTE_PREFIXES,
            "event_keys": list(EVENT_ATTRIBUTES),
        }
        spans: dict[str, list[SpanRecord]] = {}
        for row in self._store.query(_SPAN_QUERY + limit, params):
            spans.setdefault(row[0], []).append(_span_from_row(row))
        return spans


def _widen(ranges: dict[str, tuple[int, int]], trace_id: str, low: int, high: int) -> None:
    """Make a trace's range in `ranges` cover [low, high) too."""
    known = ranges.get(trace_id)
    ranges[trace_id] = (low, high) if known is None else (min(known[0], low), max(known[1], high))


def deletion_row(trace_id: str, root_span_id: str, now: float, version: int) -> TrajectoryRow:
    """The row that marks a run gone after re-assembly (IsDeleted = 1; tests store it too)."""
    stamp = _ts6(now)
    return TrajectoryRow(
        TraceId=trace_id,
        RootSpanId=root_span_id,
        Agent="",
        AgentId="",
        AgentVersion="",
        Task="",
        ConversationId="",
        ServiceName="",
        Model="",
        Start=stamp,
        LatencyS=0.0,
        Failure=0,
        ErrorType="",
        Input="",
        Output="",
        InputTokens=0,
        OutputTokens=0,
        ToolCount=0,
        ToolNames=[],
        ToolStatuses=[],
        ToolCalls="[]",
        SpanCount=0,
        Revision=0,
        AssembledAt=stamp,
        Version=version,
        IsDeleted=1,
        AvailableTools="[]",
        Incomplete=0,
    )


def _span_from_row(row: tuple[Any, ...]) -> SpanRecord:
    events = tuple(
        SpanEvent(name, int(when), attrs)
        for when, name, attrs in zip(row[10], row[11], row[12], strict=False)
    )
    return SpanRecord(
        trace_id=row[0],
        span_id=row[1],
        parent_span_id=row[2],
        name=row[3],
        service_name=row[4],
        start_ns=int(row[5]),
        duration_ns=int(row[6]),
        status_code=row[7],
        status_message=row[8],
        attributes=row[9],
        events=events,
    )
