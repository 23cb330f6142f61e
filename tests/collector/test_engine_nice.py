"""`engine_nice`: the embedded engine's threads (every statement of serve's store clients, and
the merges) run lower in the OS's priority than the receivers, while no Python thread keeps a
lowered priority once its statement returns (it may then hold the GIL)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agenttrail.collector.config import SidecarConfig
from agenttrail.collector.sidecar import Sidecar
from agenttrail.collector.store import Store

pytestmark = pytest.mark.timeout(600)

CAP_SYS_NICE = 23  # linux/capability.h: ClickHouse sets a thread's nice only with it


def _can_nice() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_NICE & 1)
    return False


def _thread_nices() -> dict[int, int]:
    nices = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
        except OSError:
            continue  # the thread ended
        nices[int(tid)] = int(stat[stat.rindex(")") + 2 :].split()[16])  # field 19: nice
    return nices


def _session_nice(store: Store) -> int:
    return int(store.query("SELECT getSetting('os_thread_priority')")[0][0])


def test_every_store_client_of_serve_carries_it(collector_with: Callable[..., Sidecar]) -> None:
    sidecar = collector_with(engine_nice=7)
    assert sidecar.pipeline is not None
    assert sidecar.assembler is not None
    stores = [sidecar.store, sidecar.pipeline._store, sidecar.assembler._store, sidecar.new_store()]
    assert [_session_nice(store) for store in stores if store is not None] == [7, 7, 7, 7]


def test_on_by_default(collector_with: Callable[..., Sidecar]) -> None:
    assert SidecarConfig().engine_nice > 0
    assert _session_nice(collector_with().new_store()) == SidecarConfig().engine_nice


def test_zero_turns_it_off(collector_with: Callable[..., Sidecar]) -> None:
    assert _session_nice(collector_with(engine_nice=0).new_store()) == 0


@pytest.mark.skipif(not _can_nice(), reason="ClickHouse ignores the setting without CAP_SYS_NICE")
def test_a_statements_engine_threads_run_niced_and_its_caller_is_reset(
    collector_with: Callable[..., Sidecar],
) -> None:
    """While a statement runs some thread of the process (ClickHouse's, and the calling thread
    while it is inside the engine with the GIL released) runs at the nice; when the statement
    returns, the calling thread is back at 0 before it runs Python again."""
    store = collector_with(engine_nice=7).new_store()
    caller: dict[str, int] = {}

    def run() -> None:
        caller["tid"] = threading.get_native_id()
        store.query("SELECT count() FROM numbers(200000000) WHERE sipHash64(number) % 7 = 1")
        caller["nice after"] = os.getpriority(os.PRIO_PROCESS, caller["tid"])

    thread = threading.Thread(target=run)
    thread.start()
    seen: set[int] = set()
    while thread.is_alive():
        seen.update(_thread_nices().values())
        time.sleep(0.02)
    thread.join()
    assert 7 in seen
    assert caller["nice after"] == 0


def test_the_engine_merges_at_the_nice(tmp_path: Path) -> None:
    """An engine option, so only the first client of a fresh engine (a process of its own) sets it."""
    code = f"""
        from agenttrail.collector.store import Store, parse_store
        store = Store(parse_store({str(tmp_path / "store")!r}), engine_nice=7)
        print(store.query(
            "SELECT value FROM system.server_settings WHERE name = 'os_threads_nice_value_merge_mutate'"
        )[0][0])
    """
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "7"
