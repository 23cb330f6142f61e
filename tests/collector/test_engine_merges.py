"""The embedded engine admits at most as many merges in progress as it has merge threads
(store.EMBEDDED_ENGINE), read back from the engine on a fresh store and on an existing store
opened again. Each read runs in a process of its own: chDB's pool-size metric adds up over the
engine's re-opens within one process (the tests' engine opens once per test)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agenttrail.collector.store import EMBEDDED_ENGINE

# A chDB start-up can take a minute on a loaded 2-core machine.
pytestmark = pytest.mark.timeout(600)

READ_BACK = """
    import json
    from agenttrail.collector.schema import migrate
    from agenttrail.collector.store import Store, parse_store
    store = Store(parse_store({store!r}))
    applied = migrate(store)
    settings = dict(store.query(
        "SELECT name, value FROM system.server_settings WHERE name IN "
        "('background_pool_size', 'background_merges_mutations_concurrency_ratio')"
    ))
    # Reported once a MergeTree table exists: how many merges the pool admits at once.
    [(admitted,)] = store.query(
        "SELECT value FROM system.metrics WHERE metric = 'BackgroundMergesAndMutationsPoolSize'"
    )
    print(json.dumps({{
        "migrated": len(applied),
        "threads": int(settings["background_pool_size"]),
        "ratio": float(settings["background_merges_mutations_concurrency_ratio"]),
        "admitted": int(admitted),
    }}))
    store.close()
"""


def open_and_read(store: Path) -> dict[str, float]:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(READ_BACK.format(store=str(store)))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    read: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return read


def test_merges_in_progress_are_bounded_by_the_merge_threads(tmp_path: Path) -> None:
    """chDB's default ratio of 2 let 4 merges hold their memory at once on its 2 merge threads
    (up to ~104 MiB of `otel_traces` merges under overload); the engine runs with ratio 1, on a
    fresh store and on the same store opened again (an engine option, not the schema's)."""
    assert EMBEDDED_ENGINE["background_merges_mutations_concurrency_ratio"] == 1
    fresh = open_and_read(tmp_path / "store")
    assert fresh["migrated"] > 0
    assert fresh["ratio"] == 1
    assert fresh["admitted"] == fresh["threads"]
    again = open_and_read(tmp_path / "store")
    assert again["migrated"] == 0
    assert (again["ratio"], again["admitted"]) == (1, again["threads"])
