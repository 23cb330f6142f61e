"""serve's background threads run at a lower OS priority than the receivers (Linux: per thread)."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator

import pytest

from agenttrail.collector import background
from agenttrail.collector.background import BackgroundLoop, set_background_nice

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")


class _Probe(BackgroundLoop):
    """Notes the nice value its own thread runs at."""

    def __init__(self) -> None:
        super().__init__(what="probe", thread_name="agenttrail-probe", poll_interval_s=60)
        self.seen: list[int] = []
        self.ran = threading.Event()

    def cycle(self) -> None:
        self.seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        self.ran.set()


@pytest.fixture
def restore_nice() -> Iterator[None]:
    yield
    set_background_nice(0)


def _run_probe() -> int:
    probe = _Probe()
    probe.start()
    assert probe.ran.wait(30)
    probe.stop()
    return probe.seen[0]


def test_a_background_loop_lowers_only_its_own_thread(restore_nice: None) -> None:
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    set_background_nice(3)
    assert _run_probe() == min(base + 3, 19)
    # The thread that started it (a receiver's, in serve) keeps its priority.
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base


def test_no_increment_leaves_background_threads_as_they_are(restore_nice: None) -> None:
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    set_background_nice(0)
    assert _run_probe() == base
    assert background._nice == 0
