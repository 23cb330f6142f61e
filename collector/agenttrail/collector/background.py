"""A supervised background loop: the thread plumbing the assembler and the evaluator share."""

from __future__ import annotations

import logging
import threading

from agenttrail.collector.errors import StoreError

log = logging.getLogger(__name__)


class BackgroundLoop:
    """A daemon thread that runs `cycle()` after each wake-up or poll interval until stopped.

    A failing cycle is logged, counted and retried a second later; it never ends the thread,
    so `alive()` going false means a real bug, and `serve` exits for its supervisor to restart.
    """

    def __init__(self, *, what: str, thread_name: str, poll_interval_s: float) -> None:
        self._what = what
        self._thread_name = thread_name
        self._poll_interval_s = poll_interval_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def cycle(self) -> None:
        """One unit of work; subclasses implement it."""
        raise NotImplementedError

    def count_failure(self, message: str) -> None:
        """Record a failed cycle in the subclass's own counters."""

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    @property
    def stopping(self) -> bool:
        """stop() was called: a long cycle should end at its next safe point."""
        return self._stop.is_set()

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wake(self) -> None:
        """There is work: run a cycle now rather than at the next poll."""
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.cycle()
            except StoreError as exc:
                if self.stopping:
                    # The store closed under a cycle that outlived stop()'s wait: not a failure,
                    # and the cycle's unfinished work is found again after the next start.
                    log.info("%s stopped during a cycle: %s", self._what, exc)
                    break
                self.count_failure(str(exc))
                log.error("%s failed, will retry: %s", self._what, exc)
                self._stop.wait(1.0)
            except Exception as exc:
                self.count_failure(repr(exc))
                log.exception("%s failed unexpectedly, will retry", self._what)
                self._stop.wait(1.0)
            self._wake.wait(self._poll_interval_s)
            self._wake.clear()
