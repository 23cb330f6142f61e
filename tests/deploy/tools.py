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


# Commands from Debian packages, which tests/deploy/install-tools.sh installs where it can.
DEBIAN = {
    "prometheus": "prometheus",
    "promtool": "prometheus",
    "prometheus-alertmanager": "prometheus-alertmanager",
    "amtool": "prometheus-alertmanager",
}


def tool(name: str) -> str:
    """A checker from the venv (PyPI, the dev extra) or the system (Debian packages)."""
    found = shutil.which(name, path=f"{VENV_BIN}:/usr/bin:/usr/local/bin:/bin")
    if found is not None:
        return found
    if name in DEBIAN:
        pytest.skip(
            f"!!! {name} is missing: Debian package {DEBIAN[name]} could not be installed here "
            "(tests/deploy/install-tools.sh needs root and apt-get); this check did NOT run"
        )
    pytest.fail(f"{name} is not installed: run `make install` (the dev extra brings it)")


def run(*args: str | Path, timeout: float = 120, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=timeout, check=False, **kwargs
    )  # type: ignore[call-overload, no-any-return]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
