"""Fixtures of the collector's tests."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agenttrail.collector.config import SidecarConfig
from agenttrail.collector.ingest import IngestPipeline
from agenttrail.collector.sidecar import Sidecar


@pytest.fixture
def collector(
    chdb_dir: Path, database: str, tmp_path: Path, request: Any, monkeypatch: Any, grpc_path: dict[str, bool]
) -> Iterator[Sidecar]:
    """The collector alone (receivers, spool, writer, assembler) on loopback: a third of the
    start-up time of `start_sidecar`, which also installs the evaluators. Parametrize it
    indirectly with "python" to store every row through the Python renderer (a store without
    ClickHouse's Protobuf input) instead of ClickHouse's decoder."""
    if getattr(request, "param", "clickhouse") == "python":
        monkeypatch.setattr(IngestPipeline, "_store_can_decode", lambda self: False)
    sidecar = Sidecar(
        SidecarConfig(
            store=str(chdb_dir),
            database=database,
            grpc="127.0.0.1:0",
            http="127.0.0.1:0",
            spool_dir=str(tmp_path / "spool"),
            quiet_period_s=0.3,
            idle_timeout_s=1.0,
            flush_interval_s=0.05,
            **grpc_path,
        )
    )
    sidecar.start()
    yield sidecar
    sidecar.stop()


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
