"""A store or spool directory serve cannot write stops start-up with a clear error (what is wrong,
what to do), not a traceback from deep inside the lock file, the spool or chDB."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from agenttrail.collector.cli import EXIT_BAD_INPUT, cli
from agenttrail.collector.config import SidecarConfig
from agenttrail.collector.errors import ConfigError
from agenttrail.collector.sidecar import Sidecar


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory nobody may write: mode 0555 for an ordinary user; root ignores modes, so as
    root a read-only tmpfs is mounted there instead."""
    directory = tmp_path / "ro"
    directory.mkdir()
    if os.geteuid() != 0:
        directory.chmod(0o555)
        yield directory
        directory.chmod(0o755)
        return
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(directory)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"running as root and cannot mount a read-only tmpfs: {mounted.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", str(directory)], check=True)


def config(store: Path, **overrides: str) -> SidecarConfig:
    return SidecarConfig(store=str(store), grpc="127.0.0.1:0", http="127.0.0.1:0", **overrides)  # type: ignore[arg-type]


@pytest.mark.parametrize("store_below", [False, True], ids=["existing", "to-create"])
def test_a_read_only_store_directory_is_a_clear_error(read_only_dir: Path, store_below: bool) -> None:
    """The store directory itself, or its parent when it does not exist yet, is read-only."""
    store = read_only_dir / "store" if store_below else read_only_dir
    with pytest.raises(ConfigError) as caught:
        Sidecar(config(store)).start()
    message = str(caught.value)
    assert f"cannot write the embedded store directory {store}" in message
    assert ("Read-only file system" in message) or ("Permission denied" in message)
    assert "--store" in message
    assert "chown/chmod" in message


def test_a_store_path_that_is_a_file_is_a_clear_error(tmp_path: Path) -> None:
    """A regular file where the store directory, or a folder above it, should be: says so, not
    "File exists" with advice on mounts and permissions that cannot help (any user)."""
    store = tmp_path / "store"
    store.write_text("not a directory")
    for path in (store, store / "below"):
        with pytest.raises(ConfigError) as raised:
            Sidecar(config(path)).start()
        message = str(raised.value)
        assert message.startswith(
            f"cannot use {path} as the embedded store directory: {store} is a file, not a directory"
        )
        assert "--store" in message
        assert "chown" not in message


def test_a_read_only_spool_directory_is_a_clear_error(read_only_dir: Path, tmp_path: Path) -> None:
    """A writable store with a spool directory on a read-only mount names the spool and its option."""
    with pytest.raises(ConfigError, match=r"cannot write the spool directory .* --spool-dir"):
        Sidecar(config(tmp_path / "store", spool_dir=str(read_only_dir / "spool"))).start()
    assert not (tmp_path / "store" / "agenttrail.agenttrail.lock").exists()  # stopped before the lock


def test_serve_reports_it_without_a_traceback(read_only_dir: Path) -> None:
    """`agenttrail serve` on a read-only store exits with the bad-input code and the message only."""
    result = CliRunner().invoke(
        cli, ["serve", "--store", str(read_only_dir), "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"]
    )
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert "cannot write the embedded store directory" in result.output
    assert "Traceback" not in result.output
    assert not isinstance(result.exception, OSError)
