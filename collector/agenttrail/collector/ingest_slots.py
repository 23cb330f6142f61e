"""How many requests are checked and spooled at once, and how long one may wait to start.

The work is Python under one GIL: more requests at once only make each slower, so the rest wait
for a slot, each at most `max_wait_s` from its arrival, and are then refused with a retry hint
instead of acknowledged late. The in-process pipeline and the gRPC receiver process share this.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from agenttrail.collector.errors import OverloadedError

# Requests checked and spooled at once (both receivers).
INGEST_SLOTS = 4
# Retry-After for a request refused because it would have waited too long: slots free quickly.
WAIT_RETRY_AFTER_S = 1

_T = TypeVar("_T")


class SlotWaitRefused(OverloadedError):
    """A request would have waited past `ingest_max_wait_s` for a slot: refused before any work."""


class IngestSlots:
    def __init__(self, slots: int = INGEST_SLOTS, max_wait_s: float = 0.5) -> None:
        self._slots = threading.BoundedSemaphore(slots)
        self.count = slots
        self.max_wait_s = max_wait_s
        self.waiting = 0  # requests waiting for a slot
        self.in_progress = 0  # requests holding one
        self._lock = threading.Lock()  # not the caller's queue lock: a stalled spool write holds that

    def run(self, work: Callable[[], _T], waiting_since: float | None) -> _T:
        """`work()` once a slot is free; SlotWaitRefused if that would be past `max_wait_s` from
        `waiting_since` (monotonic; None: from now)."""
        waited = 0.0 if waiting_since is None else time.monotonic() - waiting_since
        with self._lock:
            self.waiting += 1
        try:
            started = waited < self.max_wait_s and self._slots.acquire(timeout=self.max_wait_s - waited)
        finally:
            with self._lock:
                self.waiting -= 1
                waiting = self.waiting
        if not started:
            raise SlotWaitRefused(
                f"the collector could not start on this request within {self.max_wait_s:g} s "
                f"(ingest_max_wait_s; {self.count} requests in progress, {waiting} more waiting); "
                "retry later",
                retry_after_s=WAIT_RETRY_AFTER_S,
                store_down=False,
            )
        with self._lock:
            self.in_progress += 1
        try:
            return work()
        finally:
            with self._lock:
                self.in_progress -= 1
            self._slots.release()
