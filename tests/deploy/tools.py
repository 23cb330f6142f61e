"""Paths and helpers shared by the deploy tests: the repository's deploy/ folder and the
command-line checkers (hadolint, shellcheck, kubernetes-validate, promtool) they run."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
VENV_BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    """A checker from the venv (PyPI) or the system (Debian); `make test-deploy` installs them."""
    found = shutil.which(name, path=f"{VENV_BIN}:/usr/bin:/usr/local/bin:/bin")
    if found is None:
        pytest.fail(f"{name} is not installed: run `make test-deploy` (it installs the deploy checkers)")
    return found


def run(*args: str | Path, timeout: float = 120, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=timeout, check=False, **kwargs
    )  # type: ignore[call-overload, no-any-return]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
