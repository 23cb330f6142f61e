"""`agenttrail demo` end to end: the example agent is traced, assembled, scored and summarised."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_demo_runs_and_reports(tmp_path: Path) -> None:
    """The demo (own process, own embedded store) reports runs, failures and online scores; the
    release it ships halfway is caught as drift, fires the failure alert to its webhook and shows
    in the HTML report."""
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from agenttrail.evaluators.entry import main; main()",
            "demo",
            "--runs",
            "120",
            "--keep",
            str(tmp_path / "store"),
            "--report",
            str(tmp_path / "report.html"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "runs: 120 " in out
    assert "failure rate:" in out
    assert "trajectory_exact_match       n   120" in out
    assert "runs furthest from their reference" in out
    assert "received: [FIRING] support-failure-spike (critical)" in out
    assert "drift in failure_rate" in out
    page = (tmp_path / "report.html").read_text()
    assert "data:image/png;base64," in page
    assert "support-failure-spike" in page  # the alert period is in the report
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
            "1000",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == 120
