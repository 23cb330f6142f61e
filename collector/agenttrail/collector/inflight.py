"""The in-flight byte budget both receivers share: bounded memory under overload.

A request holds its bytes (raw body, then the decompressed body) from arrival until
`IngestPipeline.accept` returns; parsing multiplies them for a while. Counting requests does
not bound that (one request may be 64 MiB, another 2 KiB); counting bytes does. A request that
would take the total past the budget is refused (HTTP 429 / gRPC UNAVAILABLE, with a retry
hint) before its body is buffered where the protocol allows, except when nothing else is in
flight, so one request as large as the body limit still gets through.
"""

from __future__ import annotations

import threading

# Seconds a refused client is asked to wait: the budget frees as soon as requests finish.
RETRY_AFTER_S = 1


class InFlightBytes:
    """A byte counter with a ceiling, shared by threads (gRPC) and the HTTP event loop."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._lock = threading.Lock()
        self._held = 0
        self.refused = 0  # requests refused because the budget was spent

    @property
    def held(self) -> int:
        return self._held

    def try_acquire(self, size: int, holding: int = 0) -> bool:
        """Take `size` more bytes for a request already `holding` some, if they fit or nothing
        else is held; False (counted) if not."""
        with self._lock:
            if self._held > holding and self._held + size > self.budget:
                self.refused += 1
                return False
            self._held += size
            return True

    def release(self, size: int) -> None:
        with self._lock:
            self._held -= size
            assert self._held >= 0, "released more in-flight bytes than were taken"
