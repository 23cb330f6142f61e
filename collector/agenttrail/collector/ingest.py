"""From an accepted request to stored spans: check, spool, batch, insert, announce.

Receivers call `IngestPipeline.accept` on their own threads; it parses the request and checks
its spans (bad spans are counted, not raised), refuses when the queue is full, and spools the
body (the durable acknowledgement). One writer thread cuts batches of up to `batch_max_rows`
spans or `flush_interval_s` seconds: it seals the spool segment and has ClickHouse decode and
insert it in one statement (`otlp_sql`), records the traces' arrival (what assembly resumes
from after a restart) and tells the assembler. A store that cannot decode protobuf, or a
segment it refuses, gets rows rendered in Python instead (`otlp_decode.decode_request`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenttrail.collector.errors import OverloadedError, StoreError, StoreLocked, StoreUnavailable
from agenttrail.collector.otlp_decode import (
    FORMAT_JSON,
    FORMAT_PROTOBUF,
    OTEL_TRACES_COLUMNS,
    DecodedBatch,
    OtlpDecodeError,
    check_request,
    decode_protobuf,
    parse_json,
    parse_protobuf,
)
from agenttrail.collector.otlp_sql import SPOOL_SOURCE, format_settings, span_rows_select
from agenttrail.collector.spool import Spool
from agenttrail.collector.store import Store

log = logging.getLogger(__name__)

# Called after spans are stored: trace id -> whether an agent span arrived, and the arrival time.
ArrivalListener = Callable[[dict[str, bool], float], None]

_ARRIVAL_COLUMNS = ("TraceId", "ArrivedAt", "HasAgent")


@dataclass(slots=True)
class IngestCounters:
    """Monotonic counters for health checks and metrics."""

    accepted_spans: int = 0
    rejected_spans: int = 0
    refused_requests: int = 0
    stored_spans: int = 0
    store_failures: int = 0
    replayed_segments: int = 0


class IngestPipeline:
    def __init__(
        self,
        store: Store,
        spool_dir: Path,
        *,
        batch_max_rows: int = 20_000,
        flush_interval_s: float = 0.2,
        max_queue_rows: int = 200_000,
        spool_fsync: bool = False,
        on_stored: ArrivalListener | None = None,
        clickhouse_decoding: bool = True,
    ) -> None:
        self._store = store
        self._format_settings = format_settings(store.location)
        self._spool = Spool(spool_dir, fsync=spool_fsync)
        # Whether ClickHouse decodes spool segments: asked for, and the store can.
        self.clickhouse_decoding = clickhouse_decoding and self._store_can_decode()
        self._batch_max_rows = batch_max_rows
        self._flush_interval_s = flush_interval_s
        self._max_queue_rows = max_queue_rows
        self._on_stored = on_stored
        self._cond = threading.Condition()
        self._pending: list[DecodedBatch] = []
        self._pending_rows = 0
        self._first_pending_at = 0.0
        self._in_flight_rows = 0  # taken by the writer, not yet stored
        self._stopping = False
        self._store_down = False
        self._last_arrival = 0.0
        self._thread: threading.Thread | None = None
        self.counters = IngestCounters()

    # -- receiver side -------------------------------------------------------------------

    def accept(self, body: bytes, body_format: int = FORMAT_PROTOBUF) -> DecodedBatch:
        """Check, spool and queue one request. Raises OtlpDecodeError or OverloadedError.

        Returns the check so the receiver can report rejected spans.
        """
        request = parse_json(body) if body_format == FORMAT_JSON else parse_protobuf(body)
        batch = check_request(request)
        self.counters.rejected_spans += batch.rejected
        if not batch.accepted:
            return batch
        if body_format == FORMAT_JSON:
            body = request.SerializeToString()  # the spool holds protobuf only
        with self._cond:
            queued = self._pending_rows + self._in_flight_rows
            if queued + batch.accepted > self._max_queue_rows and queued > 0:
                self.counters.refused_requests += 1
                down = self._store_down
                reason = "the span store is unavailable" if down else "the ingest queue is full"
                raise OverloadedError(
                    f"{reason} ({queued} spans queued, limit {self._max_queue_rows}); retry later",
                    retry_after_s=5 if down else 1,
                    store_down=down,
                )
            if self._stopping:
                raise OverloadedError("the collector is shutting down", retry_after_s=5, store_down=False)
            self._spool.append(body)
            if not self._pending:
                self._first_pending_at = time.monotonic()
            self._pending.append(batch)
            self._pending_rows += batch.accepted
            self.counters.accepted_spans += batch.accepted
            if self._pending_rows >= self._batch_max_rows:
                self._cond.notify_all()
        return batch

    @property
    def store_down(self) -> bool:
        return self._store_down

    @property
    def queued_rows(self) -> int:
        with self._cond:
            return self._pending_rows + self._in_flight_rows

    # -- lifecycle -----------------------------------------------------------------------

    def replay(self) -> int:
        """Store what earlier runs acknowledged but did not store. Run before `start`."""
        replayed = 0
        for segment in self._spool.segments():
            batch = DecodedBatch()
            for record in Spool.read(segment):
                try:
                    batch.extend(check_request(parse_protobuf(record)))
                except OtlpDecodeError:
                    log.exception("skipping an undecodable record in spool segment %s", segment)
            self._store_batch(segment, batch, retry=False)
            replayed += 1
        self.counters.replayed_segments += replayed
        if replayed:
            log.info("replayed %d spool segment(s) left by an earlier run", replayed)
        return replayed

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
        """Store what is queued (within the timeout), then stop; the rest stays spooled."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning("writer did not finish within %.0fs; unstored spans stay spooled", timeout_s)
        self._spool.close()

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- writer side ---------------------------------------------------------------------

    def _take_batch(self) -> tuple[Path | None, DecodedBatch] | None:
        with self._cond:
            while True:
                if self._pending:
                    age = time.monotonic() - self._first_pending_at
                    if self._stopping or self._pending_rows >= self._batch_max_rows:
                        break
                    if age >= self._flush_interval_s:
                        break
                    self._cond.wait(self._flush_interval_s - age)
                elif self._stopping:
                    return None
                else:
                    self._cond.wait(0.5)
            taken, self._pending = self._pending, []
            self._in_flight_rows, self._pending_rows = self._pending_rows, 0
            segment = self._spool.seal()
        combined = taken[0] if len(taken) == 1 else DecodedBatch()
        if len(taken) > 1:
            for batch in taken:
                combined.extend(batch)
        return segment, combined

    def _run_writer(self) -> None:
        while True:
            item = self._take_batch()
            if item is None:
                return
            segment, batch = item
            stored = self._store_batch(segment, batch, retry=True)
            with self._cond:
                self._in_flight_rows = 0
                self._cond.notify_all()
            if not stored:
                return  # stopping while the store is down: the segment stays for replay

    def _store_batch(self, segment: Path | None, batch: DecodedBatch, *, retry: bool) -> bool:
        """Insert one batch; with `retry`, keep trying (backing off) until it is stored or we stop."""
        delay = 0.2
        while True:
            try:
                arrived_at = self._insert(segment, batch)
                break
            except StoreError as exc:
                self.counters.store_failures += 1
                if not self._store_down:
                    log.error("cannot store spans, will retry (they are spooled): %s", exc)
                self._store_down = True
                if not retry or self._stopping:
                    if not retry:
                        raise
                    return False
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
        if self._store_down:
            log.info("span store is reachable again")
        self._store_down = False
        self.counters.stored_spans += batch.accepted
        if segment is not None:
            Spool.remove(segment)
        if self._on_stored is not None and batch.traces:
            try:
                self._on_stored(batch.traces, arrived_at)
            except Exception:
                log.exception("arrival listener failed")
        return True

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
                self._store.location.describe(),
                str(exc)[:300],
            )
            return False
        finally:
            probe.unlink(missing_ok=True)
        return True

    def _insert_decoded_by_clickhouse(self, segment: Path, token: str | None) -> None:
        self._store.insert_select_file(
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
            except StoreError as exc:
                log.warning(
                    "ClickHouse refused spool segment %s (%s); storing it through the Python decoder",
                    segment.name,
                    str(exc)[:300],
                )
        rows: list[tuple[Any, ...]] = []
        for record in Spool.read(segment):
            try:
                rows.extend(decode_protobuf(record).rows)
            except OtlpDecodeError:
                log.exception("skipping an undecodable record in spool segment %s", segment)
        if rows:
            self._store.insert_rows("otel_traces", OTEL_TRACES_COLUMNS, rows, dedup_token=token)

    def _insert(self, segment: Path | None, batch: DecodedBatch) -> float:
        token = segment.name if segment is not None else None
        if segment is not None and batch.accepted:
            self._insert_spans(segment, token)
        # Arrival times strictly increase, so "assembled through" comparisons are exact.
        arrived_at = max(time.time(), self._last_arrival + 1e-6)
        self._last_arrival = arrived_at
        stamp = f"{arrived_at:.6f}"
        self._store.insert_rows(
            "trace_arrivals",
            _ARRIVAL_COLUMNS,
            [(trace_id, stamp, int(has_agent)) for trace_id, has_agent in batch.traces.items()],
            dedup_token=f"{token}:arrivals" if token else None,
        )
        return arrived_at
