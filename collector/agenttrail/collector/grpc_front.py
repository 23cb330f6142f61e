"""The OTLP/gRPC receiver process (`grpc_process: true`): acknowledgements off serve's GIL.

This process owns the gRPC port, the requests' check (`canonicalize`) and the spool appends that
acknowledge them, in its own spool directory. It never opens the store: every
`flush_interval_s` (or at `batch_max_spans`) it seals the open segment and hands its name and its
traces to serve (`grpc_process.GrpcReceiverProcess`), whose writer stores it like one of its own.
Serve publishes its backlog and whether the store is down in shared memory, so this process
refuses (UNAVAILABLE, retry hint) exactly when serve's own pipeline would. Other gRPC services
(the evaluation API) are forwarded, bytes and metadata as they came, to serve's internal port.

Messages to serve, over a one-way pipe: ("ready", address), ("error", message),
("sealed", path, accepted, normalized, traces), ("stats", dict); then the pipe closes.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import grpc

from agenttrail.collector.canonical import SpanLimits, canonicalize
from agenttrail.collector.errors import AgentTrailError, OverloadedError
from agenttrail.collector.grpc_receiver import SERVICE, GrpcReceiver
from agenttrail.collector.inflight import InFlightBytes
from agenttrail.collector.ingest_slots import IngestSlots, SlotWaitRefused
from agenttrail.collector.otlp_decode import FORMAT_PROTOBUF, DecodedBatch, parse_protobuf
from agenttrail.collector.spool import Spool
from agenttrail.collector.spool_gate import SpoolGate, SpoolWriteRefused

log = logging.getLogger(__name__)

# Shared doubles serve writes and this process reads (multiprocessing.RawArray("d", SHARED_SIZE)).
QUEUED = 0  # spans serve has accepted and not yet stored
STORE_DOWN = 1  # 1.0 while serve cannot reach the store
SEALED_WAITING = 2  # segments queued for serve's writer and not yet taken
SHARED_SIZE = 3
# How often the process looks whether to hand over its open segment, and reports.
TICK_S = 0.02
REPORT_EVERY = 5  # ticks
# The process's counters (in its reports; serve adds them up over restarts for /healthz, /metrics).
COUNTERS = ("accepted_spans", "rejected_spans", "refused_requests", "refused_waits", "spool_write_errors")


@dataclass(frozen=True, slots=True)
class FrontSettings:
    """What the receiver process needs (picklable: it crosses a spawn)."""

    address: str
    spool_dir: str
    limits: SpanLimits
    batch_max_rows: int = 20_000
    flush_interval_s: float = 0.2
    max_queue_rows: int = 200_000
    spool_fsync: bool = False
    max_wait_s: float = 0.5
    max_body_bytes: int = 64 * 1024 * 1024
    max_inflight_bytes: int = 16 * 1024 * 1024
    bearer_token: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    forward_to: str | None = None  # serve's internal gRPC port, for services other than OTLP
    log_level: int = logging.WARNING
    stop_grace_s: float = 5.0


class SpoolFront:
    """`IngestPipeline.accept`'s receiver side without a store: check, spool, hand over."""

    def __init__(self, settings: FrontSettings, conn: Connection, shared: Any) -> None:
        self._settings = settings
        self._conn = conn
        self._shared = shared
        self._slots = IngestSlots(max_wait_s=settings.max_wait_s)
        self._spool = Spool(Path(settings.spool_dir), fsync=settings.spool_fsync)
        self._gate = SpoolGate(self._spool, settings.max_queue_rows)
        self._lock = threading.Lock()  # the spool and the open batch
        # Messages go out on a thread of their own: a pipe full while serve is busy must not
        # hold an acknowledgement (a hand-over happens under `_lock`).
        self._outbox: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._sender = threading.Thread(target=self._send_all, name="agenttrail-front-sender", daemon=True)
        self._sender.start()
        self.limiter: InFlightBytes | None = None  # the receiver's, for the reports
        self._open: list[DecodedBatch] = []
        self._open_rows = 0
        self._opened_at = 0.0
        self._stopping = False
        self.parent_gone = False
        self.counters: dict[str, int] = dict.fromkeys(COUNTERS, 0)

    def accept(
        self, body: bytes, body_format: int = FORMAT_PROTOBUF, *, waiting_since: float | None = None
    ) -> DecodedBatch:
        try:
            return self._slots.run(lambda: self._accept(body), waiting_since)
        except OverloadedError as exc:
            self.counters["refused_requests"] += 1
            self.counters["refused_waits"] += isinstance(exc, SlotWaitRefused)
            self.counters["spool_write_errors"] += isinstance(exc, SpoolWriteRefused)
            raise

    def _accept(self, body: bytes) -> DecodedBatch:
        request = parse_protobuf(body)
        batch = canonicalize(request, self._settings.limits, wire=body)
        self.counters["rejected_spans"] += batch.rejected
        if not batch.accepted:
            return batch
        record = request.SerializeToString()  # what was checked, never the client's bytes
        with self._lock:
            self._gate.admit(
                record,
                batch.accepted,
                queued=int(self._shared[QUEUED]) + self._open_rows,
                store_down=bool(self._shared[STORE_DOWN]),
                stopping=self._stopping,
            )
            if not self._open:
                self._opened_at = time.monotonic()
            self._open.append(batch)
            self._open_rows += batch.accepted
            self.counters["accepted_spans"] += batch.accepted
            if self._open_rows >= self._settings.batch_max_rows:
                self._hand_over()
        return batch

    def _hand_over(self) -> None:
        """Seal the open segment and tell serve (under `_lock`). If serve is gone the segment
        stays on disk: serve's next start stores it."""
        segment = self._spool.seal()
        batches, self._open, self._open_rows = self._open, [], 0
        if segment is None or not batches:
            return
        combined = DecodedBatch()
        for batch in batches:
            combined.extend(batch)
        self._send(("sealed", str(segment), combined.accepted, combined.normalized, combined.traces))

    def _send(self, message: tuple[Any, ...]) -> None:
        self._outbox.put(message)

    def _send_all(self) -> None:
        while (message := self._outbox.get()) is not None:
            if self.parent_gone:
                continue
            try:
                self._conn.send(message)
            except OSError:  # serve is gone (killed): stop taking requests
                self.parent_gone = True

    def finish(self) -> None:
        """Send what is queued, then no more."""
        self._outbox.put(None)
        self._sender.join(30)

    def tick(self, report: bool = True) -> None:
        """Hand over a segment open for `flush_interval_s` once serve's writer has nothing else
        waiting (as the in-process writer cuts its batch when it is free: while it is busy the
        segment grows, so a slow store gets fewer, larger inserts, not a queue of small ones);
        report the counters."""
        with self._lock:
            if (
                self._open
                and time.monotonic() - self._opened_at >= self._settings.flush_interval_s
                and not self._shared[SEALED_WAITING]
            ):
                self._hand_over()
            if not report:
                return
            self._send(
                (
                    "stats",
                    {
                        **self.counters,
                        "open_spans": self._open_rows,
                        "requests_in_progress": self._slots.in_progress,
                        "requests_waiting": self._slots.waiting,
                        "inflight_bytes": self.limiter.held if self.limiter else 0,
                        "disk_error": self._gate.disk_error or None,
                        "at": time.monotonic(),  # one clock for both processes (CLOCK_MONOTONIC)
                    },
                )
            )

    def close(self) -> None:
        """Take no more requests; hand over what is spooled (whatever the writer has waiting)."""
        with self._lock:
            self._stopping = True
            self._hand_over()
            self._spool.close()


def _forwarder(target: str) -> grpc.GenericRpcHandler[Any, Any]:
    """Forward every unary call other than OTLP's, raw bytes and metadata, to serve's port."""
    channel = grpc.insecure_channel(target)

    class Forward(grpc.GenericRpcHandler):  # type: ignore[type-arg]
        def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[Any, Any] | None:
            method: str = details.method
            if method.startswith(f"/{SERVICE}/"):
                return None
            call = channel.unary_unary(method, None, None)

            def forward(request: bytes, context: grpc.ServicerContext) -> bytes:
                given = context.invocation_metadata()
                metadata = tuple((k, v) for k, v in given if not k.startswith("grpc-"))
                try:
                    answer: bytes = call(request, metadata=metadata, timeout=context.time_remaining())
                except grpc.RpcError as exc:
                    context.abort(exc.code(), exc.details() or "")
                return answer

            return grpc.unary_unary_rpc_method_handler(forward)

    return Forward()


def main(settings: FrontSettings, conn: Connection, shared: Any) -> None:
    """The receiver process: serve OTLP/gRPC until SIGTERM or serve is gone."""
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches serve too, which stops us in order
    parent = os.getppid()
    try:
        front = SpoolFront(settings, conn, shared)
        cert = Path(settings.tls_cert).read_bytes() if settings.tls_cert else None
        key = Path(settings.tls_key).read_bytes() if settings.tls_key else None
        receiver = GrpcReceiver(
            front,
            settings.address,
            max_body_bytes=settings.max_body_bytes,
            bearer_token=settings.bearer_token,
            tls_cert=cert,
            tls_key=key,
            extra_handlers=(_forwarder(settings.forward_to),) if settings.forward_to else (),
            limiter=InFlightBytes(settings.max_inflight_bytes),
        )
        front.limiter = receiver.limiter
        receiver.start()
    except (AgentTrailError, OSError) as exc:
        conn.send(("error", str(exc)))
        raise SystemExit(1) from exc
    conn.send(("ready", receiver.address))
    ticks = 0
    while not stop.wait(min(settings.flush_interval_s, TICK_S)):
        ticks += 1
        front.tick(report=ticks % REPORT_EVERY == 0)
        if front.parent_gone or os.getppid() != parent:
            log.error("serve is gone; the receiver process stops (what it acknowledged stays spooled)")
            break
    receiver.stop(0 if front.parent_gone else settings.stop_grace_s)
    front.close()
    front.tick()
    front.finish()
    conn.close()


__all__ = ["COUNTERS", "FrontSettings", "SpoolFront", "main"]
