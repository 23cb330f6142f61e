"""A supervised background loop: the thread plumbing the assembler and the evaluator share.

Background threads also run at a lower OS priority than the receivers when serve says so
(`background_nice`): an acknowledgement then waits less for a core behind the writer, the
assembler, the evaluator, the metrics feed and the ClickHouse threads they start (a thread
inherits its creator's nice value). Linux sets a nice value per thread; elsewhere it would
lower the whole process, so nothing is changed there.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

from agenttrail.collector.errors import StoreError

log = logging.getLogger(__name__)

# How much background threads lower their own priority as they start (0: not at all; serve sets it).
_nice = 0


def set_background_nice(increment: int) -> None:
    """The nice increment background threads started from now on apply to themselves."""
    global _nice
    _nice = increment


def lower_this_thread() -> None:
    """Run the calling (background) thread `set_background_nice`'s increment lower (Linux only)."""
    if not _nice or not sys.platform.startswith("linux"):
        return
    thread = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, thread, os.getpriority(os.PRIO_PROCESS, thread) + _nice)
    except OSError as exc:  # e.g. a container's seccomp policy: run at the receivers' priority
        log.warning("cannot lower the priority of %s: %s", threading.current_thread().name, exc)


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

    def next_wait_s(self) -> float:
        """How long to wait for a wake-up after a cycle; subclasses may back off while idle."""
        return self._poll_interval_s

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
        lower_this_thread()
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
            self._wake.wait(self.next_wait_s())
            self._wake.clear()
