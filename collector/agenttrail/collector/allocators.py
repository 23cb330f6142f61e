"""How long the embedded engine's allocator keeps freed memory, set before the engine loads.

chDB (ClickHouse in-process) allocates with its own jemalloc, which keeps freed pages for
`dirty_decay_ms` (5 s as chDB is built) before returning them to the system. Under overload
(benchmarks/bench_overload.py with --memory-log) that was 100-130 MiB on average beside what
ClickHouse was using, and up to 300 MiB; at 1 s, about half. jemalloc reads its options once,
when the library loads, from the JE_MALLOC_CONF environment variable, so `serve` sets it before
anything imports chdb, unless the user set it (their value wins). glibc malloc (Python, protobuf,
grpc) is left as it is: capping its arenas at two moved nothing measurable.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agenttrail.collector.store import Store

log = logging.getLogger(__name__)

JEMALLOC_ENV = "JE_MALLOC_CONF"
_DECAY = re.compile(r"opt\.dirty_decay_ms: (-?\d+)")


def configure_engine_allocator(dirty_decay_ms: int) -> bool:
    """Have chDB's jemalloc return freed pages after `dirty_decay_ms` (0: at once). Takes effect
    only before chdb is first imported in this process and when JE_MALLOC_CONF is not set;
    returns whether it was set."""
    if JEMALLOC_ENV in os.environ:
        log.info("%s=%s is set; engine_dirty_decay_ms is not applied", JEMALLOC_ENV, os.environ[JEMALLOC_ENV])
        return False
    if "chdb" in sys.modules:
        log.debug("chdb is loaded already: its allocator keeps the decay it started with")
        return False
    os.environ[JEMALLOC_ENV] = f"dirty_decay_ms:{dirty_decay_ms}"
    return True


def engine_dirty_decay_ms(store: Store) -> int | None:
    """The decay chDB's jemalloc runs with, read back from the engine (None: not embedded, or
    the engine does not say)."""
    if not store.location.embedded:
        return None
    rows = store.query("SELECT * FROM system.jemalloc_stats")
    found = _DECAY.search("\n".join(str(value) for row in rows for value in row))
    return int(found.group(1)) if found else None
