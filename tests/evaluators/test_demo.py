"""`agenttrail demo` end to end: the example agent is traced, assembled, scored and summarised."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_demo_runs_and_reports(tmp_path: Path) -> None:
    """The demo (own process, own embedded store) reports runs, failures and online scores."""
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from agenttrail.evaluators.entry import main; main()",
            "demo",
            "--runs",
            "40",
            "--keep",
            str(tmp_path / "store"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "runs: 40 " in out
    assert "failure rate:" in out
    assert "trajectory_exact_match       n    40" in out
    assert "runs furthest from their reference" in out
    listed = subprocess.run(
        [
            sys.executable,
            "-c",
            "from agenttrail.evaluators.entry import main; main()",
            "trajectories",
            "--store",
            str(tmp_path / "store"),
            "--format",
            "json",
            "--limit",
            "100",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == 40
