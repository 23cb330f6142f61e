"""`engine_dirty_decay_ms` and `engine_oversize_threshold_bytes` (allocators.py): chDB's jemalloc
returns freed memory after the one and large blocks at once, as the engine itself reports;
`malloc_arena_max` and `malloc_mmap_threshold_bytes`: glibc's malloc shares that many arenas and
maps request-sized blocks apart. Each case runs in a fresh process: jemalloc reads its options
once, when chdb loads, and a thread keeps the arena it got first."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from serve_processes import StartServe

from agenttrail.collector.config import load_config

# A serve start-up can take minutes on a loaded 2-core machine.
pytestmark = pytest.mark.timeout(600)


_ALLOCATOR_ENV = ("JE_MALLOC_CONF", "MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _ALLOCATOR_ENV}
    env.update(extra)
    return env


def _run(code: str, env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


READ_BACK = """
    from agenttrail.collector.allocators import configure_engine_allocator, engine_allocator
    from agenttrail.collector.store import Store, parse_store
    applied = configure_engine_allocator(700, 1048576)
    store = Store(parse_store({store!r}))
    print(applied, *engine_allocator(store))
"""


@pytest.mark.parametrize(
    ("user_conf", "expected"),
    [(None, "True 700 1048576"), ("dirty_decay_ms:300", "False 300 67108864")],
)
def test_engine_decay_is_read_back(tmp_path: Path, user_conf: str | None, expected: str) -> None:
    """Set before chdb loads, the engine runs with them; a JE_MALLOC_CONF the user set wins (and
    the threshold is chDB's 64 MiB)."""
    env = _clean_env(**({"JE_MALLOC_CONF": user_conf} if user_conf else {}))
    assert _run(READ_BACK.format(store=str(tmp_path / "store")), env) == expected


def test_engine_decay_is_not_applied_once_chdb_is_loaded(tmp_path: Path) -> None:
    code = READ_BACK.replace("applied = ", "import chdb\n    applied = ")
    assert _run(code.format(store=str(tmp_path / "store")), _clean_env()) == "False 5000 67108864"


# Eight threads each allocate (a new thread's first malloc makes it an arena while glibc's limit
# allows), then the process counts its arenas; and whether a body-sized block, allocated again
# after one was freed, is still mapped apart (glibc's own threshold grows to the freed size).
GLIBC_READ_BACK = """
    import ctypes, os, re, tempfile, threading
    from agenttrail.collector.allocators import configure_python_allocator

    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in
                    "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    libc.malloc.restype = ctypes.c_void_p
    libc.fopen.restype = ctypes.c_void_p
    applied = configure_python_allocator({arena_max}, {threshold})
    started = threading.Barrier(8)

    def allocate():
        started.wait()
        libc.free(ctypes.c_void_p(libc.malloc(1000)))

    threads = [threading.Thread(target=allocate) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    path = os.path.join(tempfile.mkdtemp(), "info.xml")
    stream = libc.fopen(path.encode(), b"w")
    libc.malloc_info(0, ctypes.c_void_p(stream))
    libc.fclose(ctypes.c_void_p(stream))
    arenas = len(re.findall("<heap nr=", open(path).read()))
    libc.free(ctypes.c_void_p(libc.malloc(269_000)))  # a request body, freed
    mapped = libc.mallinfo2().hblkhd
    block = libc.malloc(269_000)
    print(sorted(applied.items()), arenas, libc.mallinfo2().hblkhd - mapped >= 269_000)
    libc.free(ctypes.c_void_p(block))
"""


def test_glibc_arenas_and_mapped_blocks(tmp_path: Path) -> None:
    """Set to 2 and 128 KiB: two arenas for eight threads, and a body-sized block mapped apart even
    after one was freed; by default (off: they cost acks ~1 ms) each thread has its own arena and
    the block is not mapped."""
    configured = GLIBC_READ_BACK.format(arena_max=2, threshold=131072)
    assert _run(configured, _clean_env()) == "[('arena_max', 2), ('mmap_threshold', 131072)] 2 True"
    config = load_config({}, environ={})
    default = GLIBC_READ_BACK.format(
        arena_max=config.malloc_arena_max, threshold=config.malloc_mmap_threshold_bytes
    )
    assert _run(default, _clean_env()) == "[] 9 False"


def test_glibc_environment_wins(tmp_path: Path) -> None:
    """MALLOC_ARENA_MAX set by the user is theirs: serve leaves the arenas to it."""
    code = GLIBC_READ_BACK.format(arena_max=2, threshold=131072)
    assert _run(code, _clean_env(MALLOC_ARENA_MAX="3")) == "[('mmap_threshold', 131072)] 3 True"


def test_serve_applies_the_setting(tmp_path: Path, serve_process: StartServe) -> None:
    """`serve` sets the decay and the default oversize threshold before the engine loads: it
    logs the values the engine reports; and glibc's malloc options, where set, before it starts
    a thread."""
    env = _clean_env(
        AGENTTRAIL_ENGINE_DIRTY_DECAY_MS="700",
        AGENTTRAIL_MALLOC_ARENA_MAX="2",
        AGENTTRAIL_MALLOC_MMAP_THRESHOLD_BYTES="131072",
    )
    serve = serve_process(
        "--store", str(tmp_path / "store"), options=("--log-level", "INFO"), env=env, timeout=480
    )
    assert serve.stop() == 0
    stderr = serve.output()
    assert "engine's allocator returns freed memory after 700 ms\n" in stderr, stderr[-3000:]
    assert "Python's allocator: arena_max 2, mmap_threshold 131072\n" in stderr, stderr[-3000:]
    assert "returns freed blocks of 2097152 bytes and more at once" in stderr, stderr[-3000:]
