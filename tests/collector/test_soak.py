"""The two-minute soak: `benchmarks/soak.py` run as it is, against `agenttrail serve` processes.

Steady load from HTTP and gRPC clients, one SIGKILL and restart, and (where a size-limited
tmpfs can be mounted, i.e. as root) a full spool disk for a while; then the store must hold every
acknowledged span exactly once. The one-hour run is the same script with its defaults."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

SOAK = Path(__file__).parents[2] / "benchmarks" / "soak.py"


def tmpfs_mountable(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.mkdir()
    mounted = (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(probe)], capture_output=True
        ).returncode
        == 0
    )
    if mounted:
        subprocess.run(["umount", "-l", str(probe)], check=False)
    return mounted


def figure(output: str, pattern: str) -> int:
    found = re.search(pattern, output)
    assert found, f"{pattern!r} not in the soak's output:\n{output}"
    return int(found.group(1).replace(",", ""))


@pytest.mark.timeout(900)
def test_two_minute_soak_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    disk_full = tmpfs_mountable(tmp_path)
    if not disk_full:
        warnings.warn(
            "cannot mount a tmpfs here (not root): the soak runs without its disk-full episode", stacklevel=1
        )
    command = [sys.executable, str(SOAK), "--seconds", "100", "--kill-every", "50", "--rate", "1000"]
    command += ["--sample-s", "10"]
    if disk_full:
        command += ["--disk-full-at", "60", "--disk-full-s", "12"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=840)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    acknowledged = figure(output, r"acknowledged [\d,]+ requests / ([\d,]+) spans")
    assert acknowledged > 20_000, output  # the load really ran, across the restart
    assert figure(output, r"stored ([\d,]+) spans") >= acknowledged
    assert figure(output, r"lost \(acknowledged, not stored\) ([\d,]+) spans") == 0
    assert figure(output, r"duplicated ([\d,]+) spans") == 0
    assert "1 SIGKILL restarts" in output
    if disk_full:
        assert figure(output, r"refused while the spool's disk was full: ([\d,]+)") > 0, output
        assert "No space left on device" in output  # the sidecar said why it refused
