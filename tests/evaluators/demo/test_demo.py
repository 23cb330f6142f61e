"""`agenttrail demo --keep` end to end, as `make demo` runs it: the example agent is traced,
assembled, scored and summarised; the sidecar keeps serving until Ctrl-C, and meanwhile the
README's follow-up CLI session runs as pasted in a second shell (reads and `references load`
through the sidecar); after Ctrl-C the closing hint works as pasted."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from serve_processes import AGENTTRAIL

README = Path(__file__).parents[3] / "README.md"


def readme_session() -> str:
    """The shell block under the README's `cli-session` marker, as it stands."""
    text = README.read_text(encoding="utf-8")
    block = re.search(r"<!-- cli-session:[^>]*-->\n```sh\n(.*?)```", text, re.S)
    assert block is not None, "README has no cli-session block"
    return block.group(1)


def read_until(process: subprocess.Popen[str], marker: str, timeout: float) -> str:
    """The process's stdout up to the line holding `marker`. A thread reads the lines: select()
    on the pipe misses lines already pulled into the text wrapper's buffer (and then waits for
    output the demo, now serving, will not write)."""
    assert process.stdout is not None
    stdout = process.stdout
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in iter(stdout.readline, ""):
            lines.put(line)
            if marker in line:
                return
        lines.put("")  # end of output

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if not line:
            break
        seen.append(line)
        if marker in line:
            return "".join(seen)
    raise AssertionError(f"no {marker!r} in the demo's output:\n{''.join(seen)}")


@pytest.mark.timeout(1500)
def test_demo_keeps_serving_and_the_readme_session_works(tmp_path: Path) -> None:
    """The demo reports runs, failures, online scores with units, the drift and the alert, writes
    the HTML report, then serves until SIGINT and says how to serve the kept store again; the
    README's session (ids by prefix, JSON fed back in) and that hint both work when pasted."""
    demo = subprocess.Popen(
        [*AGENTTRAIL, "demo", "--runs", "120", "--keep", "--report", str(tmp_path / "report.html")],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        out = read_until(demo, "in another terminal", timeout=600)
        assert "runs: 120 " in out
        assert "failure rate:" in out
        assert re.search(r"latency: p50 [0-9.]+ ms", out)
        assert "trajectory_exact_match       n   120" in out
        assert "runs furthest from their reference" in out
        assert "drift in failure_rate" in out
        assert re.search(r"console   http://127\.0\.0\.1:\d+/console/", out)
        assert "keeps serving the demo's store agenttrail-demo-data (Ctrl-C to stop)" in out
        page = (tmp_path / "report.html").read_text()
        assert "data:image/png;base64," in page
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        env.pop("AGENTTRAIL_STORE", None)
        session = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", readme_session()],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert session.returncode == 0, session.stdout + session.stderr
        assert "0 added, 0 updated (new version), 3 unchanged" in session.stdout
        assert re.search(r"^(DRIFT in \d+|no drift in \d+) ", session.stdout, re.M)
        # The demo's drift lines are what the README's `agenttrail drift` prints afterwards: the
        # same summary line, and each line's test with the same p and adjusted p (or alarm).
        summary = re.search(r"^  ((?:DRIFT|no drift) in \d+ of \d+ tests.*)$", out, re.M)
        assert summary is not None, out
        assert summary.group(1) in session.stdout.splitlines()
        # A change detector's line says where it alarmed, not an empty p-value.
        lines = re.findall(r"^  drift in (\S+)\s+(\S+)\s+(.+?)  ", out, re.M)
        assert lines, out
        for metric, test, evidence in lines:
            found = r"p \S.*, adj \S|alarm at run \d+ of \d+, (up|down); threshold"
            assert re.match(found, evidence), evidence
            row = rf"^DRIFT\s+support-agent\s+{metric}\s+{test}\s+{re.escape(evidence)}\s"
            assert re.search(row, session.stdout, re.M), (metric, test, evidence, session.stdout)
        assert "(`agenttrail drift --recent 1d --baseline-version 1.0` prints these" in out
        assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == 120
        assert re.search(r"^trajectory_exact_match\s+120\s", session.stdout, re.M), session.stdout
        assert (tmp_path / "demo-report.html").stat().st_size > 10_000

        demo.send_signal(signal.SIGINT)
        rest, _ = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
    assert demo.returncode == 0
    hint = rest.strip().splitlines()[-1].strip()
    assert hint == "agenttrail serve --store agenttrail-demo-data"

    serve = subprocess.Popen(
        ["bash", "-c", f"exec {hint} --grpc 127.0.0.1:0 --http 127.0.0.1:0"],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert serve.stderr is not None
        lines: list[str] = []
        while not any("agenttrail serving on embedded store" in line for line in lines):
            lines.append(serve.stderr.readline())
            assert lines[-1], f"serve exited: {''.join(lines)}"
    finally:
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(60) == 0


@pytest.mark.timeout(300)
def test_demo_without_keep_deletes_its_store_and_points_at_none(tmp_path: Path) -> None:
    """Without --keep the store is deleted at the end, and the closing hint names no store: it
    says `agenttrail demo --keep` instead."""
    result = subprocess.run(
        [*AGENTTRAIL, "demo", "--runs", "20", "--report", ""],
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    closing = result.stdout.rsplit("\n\n", 1)[-1]
    assert "agenttrail demo --keep" in closing
    assert "--store" not in closing
    assert not list(tmp_path.glob("agenttrail-demo-*"))  # the temporary store is gone
