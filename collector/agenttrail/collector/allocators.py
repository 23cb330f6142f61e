"""serve's two allocators, set before they are used: the embedded engine's jemalloc and glibc's
malloc (Python's larger objects, protobuf, grpc).

chDB (ClickHouse in-process) allocates with its own jemalloc, which keeps freed pages for
`dirty_decay_ms` (5 s as chDB is built) before returning them to the system. Under overload
(benchmarks/bench_overload.py with --memory-log) that was 100-130 MiB on average beside what
ClickHouse was using, and up to 300 MiB; at 1 s, about half. jemalloc reads its options once,
when the library loads, from the JE_MALLOC_CONF environment variable, so `serve` sets it before
anything imports chdb, unless the user set it (their value wins). Blocks of `oversize_threshold`
bytes and more (64 MiB as chDB is built) go to an arena of their own that returns them as soon as
they are freed: at 2 MiB, the column buffers of an insert's, a merge's or a query's blocks, whose
freed pages were most of what the decay kept at the peak (2 MiB: the peak under the 4x overload
1.73-1.80x idle against 1.87-1.95x, the same spans stored; docs/performance.md, "rss19").

glibc gives each new thread an arena of its own, up to 8 per core (serve has ~80 threads under
load), and after a freed mmapped block raises the size it maps apart to that block's size: a
269 KB request body is mapped once, and from then on every body lands in the arena of the
thread that read it. Under the 4x overload that left 15 arenas holding ~100 MiB, ~70 MiB of it
free but kept, each arena with its own high-water mark of bodies. Two arenas shared by all
threads and a fixed threshold of 128 KiB (bodies mapped, and unmapped when freed) kept ~45 MiB
(docs/performance.md, "rss19"), but the receivers then waited for the shared arenas' locks and
the mapping of each body: ack p50 ~1 ms (20%) slower at 3,000 spans/s, and the overload peak did
not move measurably. So both are off by default (0), for a deployment that would rather keep
25 MiB. mallopt changes only arenas made afterwards, so `serve` calls it before it starts a
thread; MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_ or GLIBC_TUNABLES, if set, win.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agenttrail.collector.store import Store

log = logging.getLogger(__name__)

JEMALLOC_ENV = "JE_MALLOC_CONF"
# mallopt's parameters (glibc's malloc.h).
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
# What the user may have set for each in the environment (their value wins).
_GLIBC_ENV = {
    M_ARENA_MAX: ("MALLOC_ARENA_MAX", "glibc.malloc.arena_max"),
    M_MMAP_THRESHOLD: ("MALLOC_MMAP_THRESHOLD_", "glibc.malloc.mmap_threshold"),
}
_DECAY = re.compile(r"opt\.dirty_decay_ms: (-?\d+)")
_OVERSIZE = re.compile(r"opt\.oversize_threshold: (\d+)")


def configure_engine_allocator(dirty_decay_ms: int, oversize_threshold_bytes: int = 0) -> bool:
    """Have chDB's jemalloc return freed pages after `dirty_decay_ms` (0: at once), and freed
    blocks of `oversize_threshold_bytes` and more at once (0: chDB's threshold). Takes effect
    only before chdb is first imported in this process and when JE_MALLOC_CONF is not set;
    returns whether it was set."""
    if JEMALLOC_ENV in os.environ:
        log.info("%s=%s is set; engine_dirty_decay_ms is not applied", JEMALLOC_ENV, os.environ[JEMALLOC_ENV])
        return False
    if "chdb" in sys.modules:
        log.debug("chdb is loaded already: its allocator keeps the decay it started with")
        return False
    conf = f"dirty_decay_ms:{dirty_decay_ms}"
    if oversize_threshold_bytes:
        conf += f",oversize_threshold:{oversize_threshold_bytes}"
    os.environ[JEMALLOC_ENV] = conf
    return True


def engine_allocator(store: Store) -> tuple[int | None, int | None]:
    """The decay chDB's jemalloc runs with and the block size from which it returns freed blocks
    at once, read back from the engine in one read (None: not embedded, or the engine does not
    say)."""
    if not store.location.embedded:
        return None, None
    rows = store.query("SELECT * FROM system.jemalloc_stats")
    stats = "\n".join(str(value) for row in rows for value in row)
    decay, oversize = _DECAY.search(stats), _OVERSIZE.search(stats)
    return (int(decay.group(1)) if decay else None, int(oversize.group(1)) if oversize else None)


def configure_python_allocator(arena_max: int, mmap_threshold_bytes: int) -> dict[str, int]:
    """Cap glibc's arenas at `arena_max` and map blocks of `mmap_threshold_bytes` and more apart
    (0 leaves either as glibc has it). Call it before threads start: threads that already have
    an arena keep it. Returns what was set (empty off glibc, or where the environment set it)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to set
        return {}
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    applied: dict[str, int] = {}
    for name, param, value in (
        ("arena_max", M_ARENA_MAX, arena_max),
        ("mmap_threshold", M_MMAP_THRESHOLD, mmap_threshold_bytes),
    ):
        env, tunable = _GLIBC_ENV[param]
        if not value:
            continue
        if env in os.environ or tunable in tunables:
            log.info("%s is set in the environment; serve's malloc %s is not applied", env, name)
            continue
        if mallopt(ctypes.c_int(param), ctypes.c_int(value)) == 1:
            applied[name] = value
    if applied:
        log.info(
            "Python's allocator: %s",
            ", ".join(f"{name} {value}" for name, value in applied.items()),
        )
    return applied
