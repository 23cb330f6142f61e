"""`engine_dirty_decay_ms` (allocators.py): chDB's jemalloc returns freed memory after it, as the
engine itself reports. Each case runs in a fresh process: jemalloc reads its options once, when
chdb loads."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from serve_processes import AGENTTRAIL, wait_ready

# A serve start-up can take minutes on a loaded 2-core machine.
pytestmark = pytest.mark.timeout(600)


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "JE_MALLOC_CONF"}
    env.update(extra)
    return env


def _run(code: str, env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


READ_BACK = """
    from agenttrail.collector.allocators import configure_engine_allocator, engine_dirty_decay_ms
    from agenttrail.collector.store import Store, parse_store
    applied = configure_engine_allocator(700)
    print(applied, engine_dirty_decay_ms(Store(parse_store({store!r}))))
"""


@pytest.mark.parametrize(
    ("user_conf", "expected"),
    [(None, "True 700"), ("dirty_decay_ms:300", "False 300")],
)
def test_engine_decay_is_read_back(tmp_path: Path, user_conf: str | None, expected: str) -> None:
    """Set before chdb loads, the engine runs with it; a JE_MALLOC_CONF the user set wins."""
    env = _clean_env(**({"JE_MALLOC_CONF": user_conf} if user_conf else {}))
    assert _run(READ_BACK.format(store=str(tmp_path / "store")), env) == expected


def test_engine_decay_is_not_applied_once_chdb_is_loaded(tmp_path: Path) -> None:
    code = READ_BACK.replace("applied = ", "import chdb\n    applied = ")
    assert _run(code.format(store=str(tmp_path / "store")), _clean_env()) == "False 5000"


def test_serve_applies_the_setting(tmp_path: Path) -> None:
    """`serve` sets the decay before the engine loads: it logs the value the engine reports."""
    store = tmp_path / "store"
    process = subprocess.Popen(
        [
            *AGENTTRAIL,
            "--log-level",
            "INFO",
            "serve",
            "--store",
            str(store),
            "--grpc",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=_clean_env(AGENTTRAIL_ENGINE_DIRTY_DECAY_MS="700"),
    )
    try:
        wait_ready(store, process, timeout=480)
        process.terminate()
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert "engine's allocator returns freed memory after 700 ms\n" in stderr, stderr[-3000:]
