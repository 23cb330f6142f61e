"""Fixtures of the collector's tests."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agenttrail.collector.config import SidecarConfig
from agenttrail.collector.ingest import IngestPipeline
from agenttrail.collector.sidecar import Sidecar


@pytest.fixture
def collector_with(
    sidecar_settings: dict[str, Any], keep_started: Callable[[Any], Any]
) -> Callable[..., Sidecar]:
    """Starts the collector alone (receivers, spool, writer, assembler) on loopback with these
    `SidecarConfig` fields over the tests' own (`sidecar_settings`); each is stopped after the
    test. A third of the start-up time of `start_sidecar`, which also installs the evaluators."""

    def start(**overrides: Any) -> Sidecar:
        sidecar: Sidecar = keep_started(Sidecar(SidecarConfig(**{**sidecar_settings, **overrides})))
        return sidecar

    return start


@pytest.fixture
def collector(collector_with: Callable[..., Sidecar], request: Any, monkeypatch: Any) -> Sidecar:
    """The collector with the tests' settings (`collector_with()`). Parametrize it indirectly
    with "python" to store every row through the Python renderer (a store without ClickHouse's
    Protobuf input) instead of ClickHouse's decoder."""
    if getattr(request, "param", "clickhouse") == "python":
        monkeypatch.setattr(IngestPipeline, "_store_can_decode", lambda self: False)
    return collector_with()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs: a real filesystem that fills up."""
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)], capture_output=True, text=True
    )
    if result.returncode != 0:
        pytest.skip(
            f"SKIPPED LOUDLY: cannot mount a size-limited tmpfs here ({result.stderr.strip()}); "
            "test_spool_errors.py's injected-error tests cover the write path"
        )
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)
