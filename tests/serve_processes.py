"""`agenttrail serve` as a subprocess in tests: the command, and waiting until it listens."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

AGENTTRAIL = [sys.executable, "-c", "from agenttrail.evaluators.cli.entry import main; main()"]


def wait_ready(store: Path, process: subprocess.Popen[str], timeout: float = 240) -> dict[str, Any]:
    """The sidecar's addresses, once its lock file names the bound ports. Generous: serve took
    over 60 s to listen with the suite on 4 pytest-xdist workers on a loaded 2-core machine."""
    deadline = time.monotonic() + timeout
    lock = store / "agenttrail.agenttrail.lock"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"serve exited early: {process.stderr.read() if process.stderr else ''}")
        try:
            info: dict[str, Any] = json.loads(lock.read_text() or "{}")
        except (FileNotFoundError, json.JSONDecodeError):
            info = {}
        if info.get("pid") == process.pid and not info.get("starting"):
            return info
        time.sleep(0.1)
    raise AssertionError(f"serve did not become ready within {timeout:g} s")
