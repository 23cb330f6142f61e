"""conftest.py of .ci/mutation.py's scratch tree: limits and test order for each mutant's run.

mutmut runs a mutant's tests in a forked process and calls it a timeout when a wall-clock limit
passes; on a loaded machine that also "kills" mutants whose tests were merely slow. So its
wall-clock limit is set far out (a backstop) and this plugin stops a mutant's run by CPU time
instead (SIGXCPU: mutmut's "timeout"), which a busy machine does not shorten. It also caps what
a mutant looping on a write or an append can take from a shared machine: file size (the write
fails with EFBIG) and memory (MemoryError), both failing the test.

Tests run fastest first (property tests last), so a mutant a quick test kills costs little.
"""

from __future__ import annotations

import os
import resource
import signal
import time

import pytest

CPU_SECONDS = 20  # a whole survivor's run of the CI selection takes about 3 CPU seconds
FILE_BYTES = 64 << 20  # the spool tests write records of up to 2 MiB
MEMORY_BYTES = 1 << 30  # on top of what the process holds when the run starts


def _data_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def _lower(limit: int, value: int) -> None:
    soft, hard = resource.getrlimit(limit)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    if soft == resource.RLIM_INFINITY or value < soft:
        resource.setrlimit(limit, (value, hard))


def pytest_sessionstart(session: pytest.Session) -> None:
    if "__mutmut_" not in os.environ.get("MUTANT_UNDER_TEST", ""):
        return  # mutmut's own clean, statistics and forced-failure runs
    _lower(resource.RLIMIT_CPU, int(time.process_time()) + CPU_SECONDS)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit raises EFBIG instead
    _lower(resource.RLIMIT_FSIZE, FILE_BYTES)
    _lower(resource.RLIMIT_DATA, _data_bytes() + MEMORY_BYTES)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: bool(getattr(getattr(item, "obj", None), "is_hypothesis_test", False)))
