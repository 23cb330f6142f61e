"""Serve's side of the OTLP/gRPC receiver process (`grpc_process: true`, `grpc_front`).

Serve starts the process (multiprocessing's spawn), queues each segment it hands over for the
writer (`IngestPipeline.hand_in`), and publishes its backlog and the store's state for it in
shared memory every 20 ms. When the process dies (killed, crashed), what it spooled and had not
handed over moves into serve's spool, where the writer stores it as it stores any segment left
on disk, and a new process takes the port. At start-up, before the spool is replayed, the same
happens for what an earlier run's process left.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Collection
from dataclasses import replace
from multiprocessing.connection import wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agenttrail.collector.errors import ConfigError
from agenttrail.collector.grpc_front import (
    COUNTERS,
    QUEUED,
    SEALED_WAITING,
    SHARED_SIZE,
    STORE_DOWN,
    FrontSettings,
    main,
)
from agenttrail.collector.otlp_decode import DecodedBatch
from agenttrail.collector.spool import Spool

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from agenttrail.collector.ingest import IngestPipeline

log = logging.getLogger(__name__)

# The receiver process's own spool directory, inside serve's.
RECEIVER_SPOOL = "grpc-receiver"
# How long serve waits for a new receiver process to listen (spawn imports grpc and protobuf).
START_TIMEOUT_S = 120.0
# Seconds between restarts of a receiver process that keeps dying.
RESTART_DELAY_S = 1.0


def adopt_leftovers(spool_dir: Path, keep: Collection[str] = ()) -> list[Path]:
    """Move the receiver spool's segments (but `keep`: handed over and queued) into serve's
    spool, where replay or the writer stores them. Only while no receiver process runs."""
    directory = spool_dir / RECEIVER_SPOOL
    if not directory.is_dir():
        return []
    moved: list[Path] = []
    for segment in Spool(directory).segments():
        if segment.name in keep:
            continue
        if segment.stat().st_size == 0:
            segment.unlink(missing_ok=True)
            continue
        os.replace(segment, spool_dir / segment.name)
        moved.append(spool_dir / segment.name)
    if moved:
        log.info("took over %d spool segment(s) the gRPC receiver process left", len(moved))
    return moved


class GrpcReceiverProcess:
    """The receiver process, watched and restarted; one per sidecar."""

    name = "grpc receiver"

    def __init__(self, pipeline: IngestPipeline, settings: FrontSettings) -> None:
        self._pipeline = pipeline
        self._settings = settings
        self._spool_dir = Path(settings.spool_dir).parent
        self._context = multiprocessing.get_context("spawn")
        self._shared: Any = self._context.RawArray("d", SHARED_SIZE)
        self._process: multiprocessing.process.BaseProcess | None = None
        self._conn: Connection | None = None
        self._listener: threading.Thread | None = None
        self._stopping = False
        self._handed: set[str] = set()  # segment names queued for the writer, still in our directory
        self.address = settings.address
        self.stats: dict[str, Any] = {}  # the running process's last report
        self._ended: dict[str, int] = dict.fromkeys(COUNTERS, 0)  # counted by processes that ended
        self._counting = threading.Lock()  # `counters()` never sees a process counted twice or not
        self.restarts = 0

    def start(self) -> None:
        """Start the process and wait until it listens; ConfigError if it cannot."""
        self._spawn()
        self._listener = threading.Thread(target=self._listen, name="agenttrail-grpc-process", daemon=True)
        self._listener.start()

    def _spawn(self) -> None:
        receive, send = self._context.Pipe(duplex=False)
        settings = self._settings
        if self.restarts:  # the port the first process was given, not 0 again
            settings = replace(settings, address=self.address)
        process = self._context.Process(
            target=main, args=(settings, send, self._shared), name="agenttrail-grpc-receiver", daemon=True
        )
        self._publish()
        process.start()
        send.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if receive.poll(0.1):
                try:
                    message = receive.recv()
                except EOFError:
                    message = ("error", f"the gRPC receiver process exited with code {process.exitcode}")
                if message[0] == "ready":
                    self.address = message[1]
                    break
                if message[0] == "error":
                    process.join(10)
                    receive.close()
                    raise ConfigError(f"the gRPC receiver process cannot start: {message[1]}")
            elif time.monotonic() > deadline:
                process.kill()
                raise ConfigError(f"the gRPC receiver process did not listen within {START_TIMEOUT_S:.0f} s")
        self._process, self._conn = process, receive

    def _publish(self) -> None:
        self._shared[QUEUED] = float(self._pipeline.queued_rows)
        self._shared[STORE_DOWN] = 1.0 if self._pipeline.store_down else 0.0
        self._shared[SEALED_WAITING] = float(self._pipeline.sealed_waiting)

    def _listen(self) -> None:
        while True:
            conn, process = self._conn, self._process
            assert conn is not None
            assert process is not None
            try:
                while True:
                    self._publish()
                    if conn.poll(0.02):
                        self._handle(conn.recv())
            except (EOFError, OSError):
                pass
            process.join(30)
            conn.close()
            # Its last report stands for it (a killed process's last 0.1 s of counts are lost).
            with self._counting:
                for name in COUNTERS:
                    self._ended[name] += int(self.stats.get(name, 0))
                self.stats = {}
            self._handed = {name for name in self._handed if (self._receiver_dir / name).exists()}
            for segment in adopt_leftovers(self._spool_dir, self._handed):
                self._pipeline.requeue(segment)  # stored now, not when the writer is next idle
            if self._stopping:
                return
            log.error(
                "the gRPC receiver process exited (code %s); its spool is taken over, starting another",
                process.exitcode,
            )
            if not self._respawn():
                return

    def _respawn(self) -> bool:
        """Start another process (retrying); False if serve stops meanwhile."""
        while not self._stopping:
            time.sleep(RESTART_DELAY_S)
            try:
                self.restarts += 1
                self._spawn()
                return True
            except ConfigError as exc:
                log.error("%s; retrying", exc)
        return False

    @property
    def _receiver_dir(self) -> Path:
        return self._spool_dir / RECEIVER_SPOOL

    def _handle(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "sealed":
            _, path, accepted, normalized, traces = message
            batch = DecodedBatch(accepted=accepted, traces=traces, normalized=normalized)
            if len(self._handed) > 64:  # the writer deletes what it stored
                self._handed = {name for name in self._handed if (self._receiver_dir / name).exists()}
            self._handed.add(Path(path).name)
            self._pipeline.hand_in(Path(path), batch)
        elif kind == "stats":
            self.stats = message[1]

    def alive(self) -> bool:
        return self._process is not None and _running(self._process)

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until what the process acknowledged so far is handed to the writer: a report made
        after this call saying nothing is open (the pipe keeps order, so every hand-over before
        it is queued). True if within the timeout, or if no process runs."""
        asked = time.monotonic()
        deadline = asked + timeout_s
        while self.alive():
            stats = self.stats
            if stats.get("at", 0.0) > asked and not stats.get("open_spans"):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def counters(self) -> dict[str, int]:
        """The receiver processes' counters since serve started (restarts summed)."""
        with self._counting:
            return {name: self._ended[name] + int(self.stats.get(name, 0)) for name in COUNTERS}

    @property
    def open_spans(self) -> int:
        """Spans acknowledged by the process and not yet handed over."""
        return int(self.stats.get("open_spans", 0)) if self.alive() else 0

    def stop(self, timeout_s: float = 15.0) -> None:
        """Stop taking requests (in-flight ones finish), hand over what is spooled, end the process."""
        self._stopping = True
        process = self._process
        if process is not None and _running(process):
            process.terminate()  # SIGTERM: the process stops its server in order
        if self._listener is not None:
            self._listener.join(timeout_s)
        if process is not None and _running(process):
            log.warning("the gRPC receiver process did not stop within %.0f s; killing it", timeout_s)
            process.kill()
            process.join(10)
            if self._listener is not None:
                self._listener.join(10)


def _running(process: multiprocessing.process.BaseProcess) -> bool:
    """Whether the process still runs, without reaping it. `is_alive()` calls waitpid: run beside
    the listener's `join`, one of the two reaps the child and the other, if it asks between that
    and the exit code being recorded, is told "no such child" and reads the dead process as alive.
    The sentinel becomes readable when the process ends and stays so."""
    return not wait([process.sentinel], 0)
