"""The acknowledgement both OTLP receiver paths share: refuse when the queue is full, else spool.

`IngestPipeline.accept` (the receivers in serve) and `grpc_front.SpoolFront` (the gRPC receiver
process, `grpc_process: true`) both call `SpoolGate.admit` under their queue lock, so how a full
queue, a stopping collector and a spool that cannot be written (disk full, read-only, I/O error)
are refused, logged and reported is written once and reaches both.
"""

from __future__ import annotations

import logging

from agenttrail.collector.errors import OverloadedError, SpoolError
from agenttrail.collector.spool import Spool

log = logging.getLogger(__name__)

# Retry-After for a spool that cannot be written: freeing disk space takes an operator.
SPOOL_RETRY_AFTER_S = 10


class SpoolWriteRefused(OverloadedError):
    """The spool could not be written (disk full, read-only, I/O error): the request was refused
    and nothing of it was kept; the client should retry later."""


class SpoolGate:
    """The spool append that acknowledges a request, behind the queue limit; remembers a failed
    write (`disk_error`, for readiness) until the next write works."""

    def __init__(self, spool: Spool, max_queue_rows: int) -> None:
        self.spool = spool
        self.max_queue_rows = max_queue_rows
        self.disk_error = ""  # the last spool write failed: why (cleared by the next that works)

    def admit(self, record: bytes, spans: int, *, queued: int, store_down: bool, stopping: bool) -> None:
        """Spool `record` (`spans` checked spans) with `queued` spans already waiting to be
        stored. Raises OverloadedError (the queue is full, or the collector stops) before any
        write, SpoolWriteRefused when the write fails (the spool cuts the torn tail off)."""
        if queued + spans > self.max_queue_rows and queued > 0:
            reason = "the span store is unavailable" if store_down else "the ingest queue is full"
            raise OverloadedError(
                f"{reason} ({queued} spans queued, limit {self.max_queue_rows}); retry later",
                retry_after_s=5 if store_down else 1,
                store_down=store_down,
            )
        if stopping:
            raise OverloadedError("the collector is shutting down", retry_after_s=5, store_down=False)
        try:
            self.spool.append(record)
        except SpoolError as exc:
            if not self.disk_error:
                log.error("refusing requests: %s", exc)
            self.disk_error = str(exc)
            raise SpoolWriteRefused(
                f"the collector cannot write its spool ({exc}); retry later",
                retry_after_s=SPOOL_RETRY_AFTER_S,
                store_down=True,
            ) from exc
        if self.disk_error:
            log.info("the spool is writable again")
            self.disk_error = ""
