"""The demo's hint for a second shell says how to get `agenttrail` on the PATH when it is not:
`make demo` installs into .venv without activating it, so the README's commands failed there."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from agenttrail.evaluators.demo.run import path_hint


def test_no_hint_when_agenttrail_is_on_the_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the venv's bin on PATH (an activated venv) the hint is not needed."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    assert path_hint() is None


def test_the_hint_activates_the_venv_the_demo_runs_in(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without `agenttrail` on PATH the hint sources this interpreter's venv's activate script."""
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing there
    activate = Path(sys.executable).parent / "activate"
    if not activate.exists():
        pytest.skip(f"{sys.executable} is not in a venv with an activate script")
    monkeypatch.chdir(activate.parents[2])  # the checkout, where `make demo` runs
    assert path_hint() == f". {activate.relative_to(activate.parents[2])}"
