"""From an accepted request to stored spans: check, spool, batch, insert, announce.

Receivers call `IngestPipeline.accept` on their own threads; it parses the request, checks and
normalises its spans (`canonical`: bad spans are removed and reported, not raised), refuses when
the queue is full or the spool cannot be written, and spools the canonical record (the durable
acknowledgement; `spool_gate`, shared with the gRPC receiver process). At most `INGEST_SLOTS`
requests do that at once; one that would wait for a slot past `max_wait_s` from its arrival is
refused with a retry hint, not acknowledged late. One writer thread cuts batches of up to
`batch_max_rows` spans or `flush_interval_s` seconds: it seals the spool segment and has ClickHouse
decode and insert it in one statement (`otlp_sql`), records the traces' arrival (what assembly
resumes from after a restart) and tells the assembler. A store that cannot decode protobuf, or a
segment it refuses, gets rows rendered in Python instead (`otlp_decode.decode_request`).

A segment the store refuses on both paths is retried a few times (a refusal can be passing,
e.g. too many parts), then stored record by record; a record refused even alone goes to the
quarantine (`quarantine`) with the reason, and the writer goes on. Only an unreachable store
holds everything back (and makes the receivers answer 503 once the queue is full).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenttrail.collector.background import lower_this_thread
from agenttrail.collector.canonical import STORABLE, SpanLimits, canonicalize
from agenttrail.collector.errors import (
    OverloadedError,
    StoreError,
    StoreLocked,
    StoreRefused,
    StoreUnavailable,
)
from agenttrail.collector.ingest_slots import INGEST_SLOTS, IngestSlots, SlotWaitRefused
from agenttrail.collector.otlp_decode import (
    FORMAT_JSON,
    FORMAT_PROTOBUF,
    OTEL_TRACES_COLUMNS,
    DecodedBatch,
    OtlpDecodeError,
    decode_protobuf,
    parse_json,
    parse_protobuf,
)
from agenttrail.collector.otlp_sql import SPOOL_SOURCE, format_settings, span_rows_select
from agenttrail.collector.quarantine import Quarantine
from agenttrail.collector.rows import ArrivalRow
from agenttrail.collector.spool import Spool, encode_records
from agenttrail.collector.spool_gate import SpoolGate, SpoolWriteRefused
from agenttrail.collector.store import Store

log = logging.getLogger(__name__)

# Called after spans are stored: trace id -> whether an agent span arrived, and the arrival time.
ArrivalListener = Callable[[dict[str, bool], float], None]


@dataclass(slots=True)
class IngestCounters:
    """Monotonic counters for health checks and metrics."""

    accepted_spans: int = 0
    rejected_spans: int = 0
    refused_requests: int = 0
    normalized_spans: int = 0
    stored_spans: int = 0
    store_failures: int = 0
    replayed_segments: int = 0
    quarantined_records: int = 0
    quarantined_spans: int = 0  # of accepted spans: stored_spans + quarantined_spans = accepted
    spool_write_errors: int = 0
    refused_waits: int = 0  # of refused_requests: would have waited past max_wait_s for a slot


# Spans at most in one spool segment, so in one insert. Each insert pays ~0.1 CPU-s of query
# analysis and start-up whatever its size, and its memory is bounded by the blocks below, not by
# the segment: 20,000 spans a segment cost ~30% more CPU per span than 50,000 while the writer
# is behind (docs/performance.md, "Ingest: where an insert's CPU goes").
BATCH_MAX_SPANS = 50_000
# How often a segment the store refuses (on both paths) is tried whole before it is split.
REFUSED_TRIES = 3
# Spans ClickHouse writes as one part when it decodes a spool segment: an insert's memory grows
# with its parts (bench: ~95 MiB at 8,192 spans a part, 262 MiB for a 20,000-span part).
INSERT_BLOCK_SPANS = 8192
# Protobuf bytes ClickHouse reads from a segment at a time (about 4,000 agent spans).
READ_BLOCK_BYTES = 2 * 1024 * 1024
# ClickHouse's threads for a spool insert on the embedded engine (a 50,176-span segment: 44 MiB
# with one, 82-86 with the machine's two).
EMBEDDED_INSERT_THREADS = 1


class IngestPipeline:
    def __init__(
        self,
        store: Store | None,
        spool_dir: Path,
        *,
        batch_max_rows: int = BATCH_MAX_SPANS,
        flush_interval_s: float = 0.2,
        max_queue_rows: int = 200_000,
        spool_fsync: bool = False,
        on_stored: ArrivalListener | None = None,
        clickhouse_decoding: bool = True,
        limits: SpanLimits | None = None,
        refused_tries: int = REFUSED_TRIES,
        insert_block_rows: int = INSERT_BLOCK_SPANS,
        max_wait_s: float = 0.5,
        slots: int = INGEST_SLOTS,
    ) -> None:
        self._store = store
        self._clickhouse_decoding_wanted = clickhouse_decoding
        self._slots = IngestSlots(slots, max_wait_s)
        self.limits = limits or SpanLimits()
        # The clock window bounds the day partitions one insert touches; ClickHouse's default
        # guard (100) would refuse a batch of old replayed data or a client with a broken clock.
        partitions: dict[str, str | int] = {
            "max_partitions_per_insert_block": self.limits.partitions_per_insert()
        }
        self._insert_settings = partitions
        # ClickHouse reads a segment in blocks of a few MiB of protobuf and writes a part each
        # time insert_block_rows spans have gathered: left to its defaults it squashes the whole
        # segment into one part, and one insert of 20,000 spans then needed 262 MiB (8,192: 95).
        self._blocks: dict[str, str | int] = {
            "input_format_max_block_size_bytes": READ_BLOCK_BYTES,
            "min_insert_block_size_rows": insert_block_rows,
        }
        self._format_settings: dict[str, str | int] = {}
        self._spool = Spool(spool_dir, fsync=spool_fsync)
        # What earlier runs left, taken before this run spools anything: replay() stores these
        # and only these, so a segment this run opened or sealed (the receivers may acknowledge
        # before the store is attached) is never stored by replay and again by the writer.
        self._earlier_segments = self._spool.segments()
        self._gate = SpoolGate(self._spool, max_queue_rows)
        self.quarantine = Quarantine(spool_dir)
        self._refused_tries = refused_tries
        self.clickhouse_decoding = False  # whether ClickHouse decodes spool segments: attach()
        self._batch_max_rows = batch_max_rows
        self._flush_interval_s = flush_interval_s
        self._on_stored = on_stored
        self._cond = threading.Condition()
        self._pending: list[DecodedBatch] = []  # the open spool segment's requests
        self._open_rows = 0  # their spans
        # Segments sealed at batch_max_rows, waiting for the writer: one insert never reads more
        # than about batch_max_rows spans, so a replay or an upload to a server (the segment is
        # the request body) stays bounded while the writer falls behind under overload.
        self._sealed: collections.deque[tuple[Path, DecodedBatch]] = collections.deque()
        self._leftovers: collections.deque[Path] = collections.deque()  # requeue(): stored next
        self._pending_rows = 0  # spans accepted and not yet taken by the writer (open + sealed)
        self._first_pending_at = 0.0
        self._in_flight_rows = 0  # taken by the writer, not yet stored
        self._stopping = False
        # Past this (monotonic) time a stopping writer takes no new batch: what is left stays
        # spooled for the next start, so stop() ends within its timeout even under overload.
        self._stop_taking_at = 0.0
        self._store_down = False
        self._store_error = ""
        self._refusing = ""  # the store refuses the segment being stored: why
        self._last_arrival = 0.0
        self._thread: threading.Thread | None = None
        self.counters = IngestCounters()
        if store is None:  # acknowledged into the spool only, until attach()
            self._store_down = True
            self._store_error = "the store is not open yet"
        else:
            self.attach(store)

    def attach(self, store: Store, on_stored: ArrivalListener | None = None) -> None:
        """Give a pipeline built without a store (serve waiting for its ClickHouse server) the
        store it writes to, and `on_stored` if given; then replay() and start() as usual."""
        self._store = store
        if on_stored is not None:
            self._on_stored = on_stored
        blocks = dict(self._blocks)
        if store.location.embedded:
            # One thread on the sidecar's own engine: each of ClickHouse's parsing and insert
            # threads holds blocks of its own, half the insert's memory at the same CPU
            # (docs/performance.md "rss22"); a server keeps its cores for its other clients' work.
            blocks["max_threads"] = EMBEDDED_INSERT_THREADS
        self._format_settings = {**format_settings(store.location), **self._insert_settings, **blocks}
        # Whether ClickHouse decodes spool segments: asked for, and the store can.
        self.clickhouse_decoding = self._clickhouse_decoding_wanted and self._store_can_decode()
        with self._cond:
            self._store_down = False
            self._store_error = ""

    def detach(self, why: str) -> None:
        """Undo attach() before start(): serve lost its server while starting on it and waits
        again, acknowledging into the spool; a replay() broken off resumes after the next attach."""
        assert self._thread is None, "detach() only before start()"
        with self._cond:
            self._store = None
            self._store_down = True
            self._store_error = why[:500]

    @property
    def _attached(self) -> Store:
        assert self._store is not None, "attach() a store first"
        return self._store

    def waiting_for_store(self, why: str) -> None:
        """Say why no store is attached yet (readiness shows it while the store is down)."""
        if self._store is None:
            self._store_error = why[:500]

    # -- receiver side -------------------------------------------------------------------

    def accept(
        self, body: bytes, body_format: int = FORMAT_PROTOBUF, *, waiting_since: float | None = None
    ) -> DecodedBatch:
        """Check, spool and queue one request. Raises OtlpDecodeError or OverloadedError.

        Returns the check so the receiver can report rejected spans. `waiting_since` (monotonic)
        is when the receiver had the request: one that cannot start within `max_wait_s` of it
        (every slot busy) is refused with a retry hint before any work, never queued for seconds.
        """
        try:
            return self._slots.run(lambda: self._accept(body, body_format), waiting_since)
        except OverloadedError as exc:
            self.counters.refused_requests += 1
            self.counters.refused_waits += isinstance(exc, SlotWaitRefused)
            self.counters.spool_write_errors += isinstance(exc, SpoolWriteRefused)
            raise

    def _accept(self, body: bytes, body_format: int) -> DecodedBatch:
        request = parse_json(body) if body_format == FORMAT_JSON else parse_protobuf(body)
        batch = canonicalize(request, self.limits, wire=None if body_format == FORMAT_JSON else body)
        self.counters.rejected_spans += batch.rejected
        if not batch.accepted:
            return batch
        record = request.SerializeToString()  # what was checked, never the client's bytes
        with self._cond:
            self._gate.admit(
                record,
                batch.accepted,
                queued=self._pending_rows + self._in_flight_rows,
                store_down=self._store_down,
                stopping=self._stopping,
            )
            if not self._pending:
                self._first_pending_at = time.monotonic()
            self._pending.append(batch)
            self._pending_rows += batch.accepted
            self._open_rows += batch.accepted
            self.counters.accepted_spans += batch.accepted
            self.counters.normalized_spans += batch.normalized
            if self._open_rows >= self._batch_max_rows:
                segment = self._spool.seal()
                assert segment is not None
                self._sealed.append((segment, _combine(self._pending)))
                self._pending, self._open_rows = [], 0
                self._cond.notify_all()
        return batch

    def hand_in(self, segment: Path, batch: DecodedBatch) -> None:
        """Queue a segment another process spooled and sealed (the gRPC receiver process,
        `grpc_process`): the writer stores it like one of its own, then deletes it."""
        with self._cond:
            self._sealed.append((segment, batch))
            self._pending_rows += batch.accepted
            self.counters.accepted_spans += batch.accepted
            self.counters.normalized_spans += batch.normalized
            self._cond.notify_all()

    def requeue(self, segment: Path) -> None:
        """Store a segment found on disk (one the receiver process left when it died) next,
        re-checked as at replay, rather than when the writer is next idle."""
        with self._cond:
            self._leftovers.append(segment)
            self._cond.notify_all()

    @property
    def requests_in_progress(self) -> int:
        """Requests being checked and spooled now (at most the slots)."""
        return self._slots.in_progress

    @property
    def sealed_waiting(self) -> int:
        """Sealed segments queued for the writer and not yet taken."""
        return len(self._sealed)

    @property
    def store_down(self) -> bool:
        return self._store_down

    @property
    def queued_rows(self) -> int:
        with self._cond:
            return self._pending_rows + self._in_flight_rows

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Whether this pipeline can take and store requests now, and what stands in the way.

        Ready means: the store is reachable, the spool is writable and the writer runs. A
        segment the store refuses, or quarantined records, are reported but do not make the
        collector unready: they hold back nothing else.
        """
        try:
            free: int | None = shutil.disk_usage(self._spool.directory).free
        except OSError:
            free = None
        entries = self.quarantine.entries()
        disk_error = self._gate.disk_error
        detail: dict[str, Any] = {
            "store": "unreachable" if self._store_down else "ok",
            "store_error": self._store_error if self._store_down else None,
            "refusing": self._refusing or None,
            "backlog": {
                "queued_spans": self.queued_rows,
                "spool_segments": len(self._spool.segments()),
                "requests_in_progress": self._slots.in_progress,
                "requests_waiting": self._slots.waiting,
            },
            "quarantine": {
                "records": len(entries),
                "quarantined_since_start": self.counters.quarantined_records,
                "last_reason": entries[-1].reason if entries else None,
            },
            "disk": {"ok": not disk_error, "error": disk_error or None, "free_bytes": free},
            "writer": "running" if self.alive() else "stopped",
        }
        return (not self._store_down and not disk_error and self.alive()), detail

    # -- lifecycle -----------------------------------------------------------------------

    def replay(self) -> int:
        """Store what earlier runs acknowledged but did not store (the segments on disk when this
        pipeline was built). Run before `start`, once a store is attached.

        Each segment is read, its records re-checked and re-serialised (segments written by
        older versions hold client bytes), unreadable records quarantined, then stored like a
        live batch. Raises StoreUnavailable when the store cannot be reached.
        """
        replayed = 0
        while self._earlier_segments:
            segment = self._earlier_segments[0]
            if segment.exists():  # else stored by an earlier replay() that the store broke off
                self._store_leftover(segment)
                replayed += 1
            self._earlier_segments.pop(0)
        self.counters.replayed_segments += replayed
        if replayed:
            log.info("replayed %d spool segment(s) left by an earlier run", replayed)
        return replayed

    def _store_leftover(self, segment: Path, *, retry: bool = False) -> bool:
        """Store a segment this process did not write (an earlier run's, or a re-queued one)."""
        try:
            records = Spool.read(segment)
        except OSError as exc:
            self._quarantine_segment(segment, f"cannot read the segment: {exc}")
            return True
        batch = DecodedBatch()
        kept: list[bytes] = []
        for index, record in enumerate(records):
            try:
                request = parse_protobuf(record)
            except OtlpDecodeError as exc:
                self._quarantine_record(record, segment, index, f"undecodable: {exc}")
                continue
            checked = canonicalize(request, STORABLE, wire=record)
            if checked.accepted:
                kept.append(request.SerializeToString())
                batch.extend(checked)
        if encode_records(kept) != segment.read_bytes():
            Spool.rewrite(segment, kept)
        if not kept:
            Spool.remove(segment)
            return True
        return self._store_batch(segment, batch, retry=retry)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run_writer, name="agenttrail-writer", daemon=True)
        self._thread.start()

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until everything accepted so far is stored. True if it was within the timeout."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._cond.notify_all()
            while self._pending_rows or self._in_flight_rows:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._first_pending_at = 0.0  # make the writer cut a batch now
                self._cond.notify_all()
                self._cond.wait(min(remaining, 0.05))
        return True

    def stop(self, timeout_s: float = 10.0) -> None:
        """Store what is queued (within the timeout), then stop; the rest stays spooled.

        New batches are taken for the first half of the timeout only, so the batch in hand
        has the second half to finish: a writer far behind stops on time instead of being
        abandoned mid-insert.
        """
        with self._cond:
            self._stopping = True
            self._stop_taking_at = time.monotonic() + timeout_s / 2
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning("writer did not finish within %.0fs; unstored spans stay spooled", timeout_s)
        self._spool.close()

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- writer side ---------------------------------------------------------------------

    def _take_batch(self) -> tuple[Path | None, DecodedBatch | None] | None:
        with self._cond:
            while True:
                if self._stopping and time.monotonic() >= self._stop_taking_at:
                    return None  # the rest stays spooled; replay() stores it at the next start
                if self._leftovers:
                    leftover = self._leftovers.popleft()
                    if leftover.exists():  # else the idle scan below stored it first
                        return leftover, None
                    continue
                if self._sealed:
                    sealed, combined = self._sealed.popleft()
                    self._in_flight_rows = combined.accepted
                    self._pending_rows -= combined.accepted
                    return sealed, combined
                if self._pending:
                    age = time.monotonic() - self._first_pending_at
                    if self._stopping:
                        break
                    if age >= self._flush_interval_s:
                        break
                    self._cond.wait(self._flush_interval_s - age)
                elif self._stopping:
                    return None
                else:
                    self._cond.wait(0.5)
                    if not self._pending and not self._sealed and not self._stopping:
                        # Idle: a segment on disk now is a re-queued one (ours are removed once
                        # stored, and no new one is open or sealed and waiting).
                        leftovers = [p for p in self._spool.segments() if p != self._spool.active]
                        if leftovers:
                            return leftovers[0], None
            taken, self._pending = self._pending, []
            self._in_flight_rows, self._open_rows = self._open_rows, 0
            self._pending_rows -= self._in_flight_rows
            segment = self._spool.seal()
        return segment, _combine(taken)

    def _run_writer(self) -> None:
        lower_this_thread()  # background work: the receivers keep a core first (background.py)
        while True:
            item = self._take_batch()
            if item is None:
                return
            segment, batch = item
            if batch is None:
                assert segment is not None
                try:
                    self._store_leftover(segment, retry=True)
                except Exception:
                    log.exception("cannot store re-queued segment %s; it stays in the spool", segment)
                    time.sleep(1)
                continue
            stored = self._store_batch(segment, batch, retry=True)
            with self._cond:
                self._in_flight_rows = 0
                self._cond.notify_all()
            if not stored:
                return  # stopping while the store is down: the segment stays for replay

    def _store_batch(self, segment: Path | None, batch: DecodedBatch, *, retry: bool) -> bool:
        """Insert one batch. An unreachable store is retried (backing off) until it is back or
        we stop (`retry`), or raised (`retry=False`, replay at start-up); a refusal is retried
        `refused_tries` times, then the segment is stored record by record."""
        delay = 0.2
        refusals = 0
        quarantined_before = self.counters.quarantined_spans
        while True:
            try:
                if refusals >= self._refused_tries and segment is not None:
                    arrived_at = self._insert_isolated(segment, batch)
                else:
                    arrived_at = self._insert(segment, batch)
                break
            except StoreRefused as exc:
                self.counters.store_failures += 1
                refusals += 1
                name = segment.name if segment is not None else "(arrivals)"
                self._refusing = f"{name}: {str(exc)[:300]} (try {refusals} of {self._refused_tries})"
                log.warning(
                    "the store refused spool segment %s on both paths (try %d of %d): %s",
                    name,
                    refusals,
                    self._refused_tries,
                    str(exc)[:300],
                )
                if self._stopping and retry:
                    return False
                if segment is None and refusals >= self._refused_tries:
                    log.error("giving up on storing trace arrivals after %d tries: %s", refusals, exc)
                    arrived_at = time.time()
                    break
            except StoreError as exc:
                # Unreachable, locked, or failing for reasons of its own (a missing table, memory):
                # nothing about the data, so everything waits until the store works again.
                self.counters.store_failures += 1
                if not self._store_down:
                    log.error("cannot reach the span store, will retry (spans are spooled): %s", exc)
                self._store_down = True
                self._store_error = str(exc)[:500]
                if not retry:
                    raise
                if self._stopping:
                    return False
            except OSError as exc:
                # Setting a refused record aside failed (disk full?): keep the segment, retry.
                log.error("cannot quarantine records of spool segment %s, will retry: %s", segment, exc)
                if self._stopping or not retry:
                    return False
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
        if self._store_down:
            log.info("span store is reachable again")
        self._store_down = False
        self._refusing = ""
        self.counters.stored_spans += batch.accepted - (self.counters.quarantined_spans - quarantined_before)
        if segment is not None:
            Spool.remove(segment)
        if self._on_stored is not None and batch.traces:
            try:
                self._on_stored(batch.traces, arrived_at)
            except Exception:
                log.exception("arrival listener failed")
        return True

    def _insert_isolated(self, segment: Path, batch: DecodedBatch) -> float:
        """Store a refused segment's records one by one; quarantine those refused even alone.

        Each record has its own deduplication token, so a retry after an outage half-way
        stores nothing twice. Raises other StoreErrors (retried by the caller) and OSError
        when a record cannot be set aside (the segment stays)."""
        records = Spool.read(segment)
        log.warning("storing the %d records of spool segment %s one by one", len(records), segment.name)
        with tempfile.TemporaryDirectory(dir=self._spool.directory, prefix="isolate-") as tmp:
            single = Path(tmp) / "record.spool"
            for index, record in enumerate(records):
                single.write_bytes(encode_records([record]))
                try:
                    self._insert_spans(single, f"{segment.name}:{index}")
                except StoreRefused as exc:
                    self._quarantine_record(record, segment, index, f"refused by the store: {exc}")
        return self._insert_arrivals(segment.name, batch)

    def _quarantine_record(self, record: bytes, segment: Path, index: int, reason: str) -> None:
        self.quarantine.add_record(record, segment=segment, index=index, reason=reason)
        self.counters.quarantined_records += 1
        with contextlib.suppress(OtlpDecodeError):
            checked = canonicalize(parse_protobuf(record), STORABLE, wire=record)
            self.counters.quarantined_spans += checked.accepted

    def _quarantine_segment(self, segment: Path, reason: str) -> None:
        self.quarantine.add_segment(segment, reason)
        self.counters.quarantined_records += 1

    def _store_can_decode(self) -> bool:
        """Whether the store decodes a (here empty) spool segment; older servers cannot."""
        probe = self._spool.directory / "decode-probe.bin"
        probe.write_bytes(b"")
        try:
            self._insert_decoded_by_clickhouse(probe, None)
        except StoreError as exc:
            log.warning(
                "%s cannot decode OTLP protobuf (%s); spans will be rendered in Python, which is "
                "several times slower. A ClickHouse release with the format_schema_source setting "
                "decodes them itself.",
                self._attached.location.describe(),
                str(exc)[:300],
            )
            return False
        finally:
            probe.unlink(missing_ok=True)
        return True

    def _insert_decoded_by_clickhouse(self, segment: Path, token: str | None) -> None:
        self._attached.insert_select_file(
            "otel_traces",
            OTEL_TRACES_COLUMNS,
            span_rows_select,
            SPOOL_SOURCE,
            segment,
            settings=self._format_settings,
            dedup_token=token,
        )

    def _insert_spans(self, segment: Path, token: str | None) -> None:
        if self.clickhouse_decoding:
            try:
                self._insert_decoded_by_clickhouse(segment, token)
                return
            except (StoreUnavailable, StoreLocked):
                raise
            except StoreError as exc:  # whatever the reason: the Python path tells refusals apart
                log.warning(
                    "ClickHouse refused spool segment %s (%s); storing it through the Python decoder",
                    segment.name,
                    str(exc)[:300],
                )
        rows: list[tuple[Any, ...]] = []
        for record in Spool.read(segment):
            try:
                rows.extend(decode_protobuf(record).rows)
            except OtlpDecodeError as exc:
                raise StoreRefused(f"a record of spool segment {segment.name} is undecodable: {exc}") from exc
        if rows:
            self._attached.insert_rows(
                "otel_traces", OTEL_TRACES_COLUMNS, rows, dedup_token=token, settings=self._insert_settings
            )

    def _insert(self, segment: Path | None, batch: DecodedBatch) -> float:
        token = segment.name if segment is not None else None
        if segment is not None and batch.accepted:
            self._insert_spans(segment, token)
        return self._insert_arrivals(token, batch)

    def _insert_arrivals(self, token: str | None, batch: DecodedBatch) -> float:
        # Arrival times strictly increase, so "assembled through" comparisons are exact.
        arrived_at = max(time.time(), self._last_arrival + 1e-6)
        self._last_arrival = arrived_at
        stamp = f"{arrived_at:.6f}"
        self._attached.insert(
            "trace_arrivals",
            [ArrivalRow(trace_id, stamp, int(has_agent)) for trace_id, has_agent in batch.traces.items()],
            dedup_token=f"{token}:arrivals" if token else None,
        )
        return arrived_at


def _combine(batches: list[DecodedBatch]) -> DecodedBatch:
    """One batch standing for the requests of one spool segment."""
    if len(batches) == 1:
        return batches[0]
    combined = DecodedBatch()
    for batch in batches:
        combined.extend(batch)
    return combined
