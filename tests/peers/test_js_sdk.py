"""The OpenTelemetry JS SDK (from the npm registry, run by the machine's node) exports an agent
run to a real sidecar over http/json, http/protobuf and gRPC, plain and gzip; each run is
rebuilt into the right trajectory. The HTTP exporters send gzip bodies chunked (no
Content-Length), which the stdlib server refused with 400. `make test-peers-js` runs this file;
the npm packages (tests/peers/js/package-lock.json) install once into .peers/js/."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agenttrail.collector.queries import TrajectoryFilter, query_trajectories

# Node and a live sidecar per exporter: minutes on a loaded machine.
pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).parent / "js" / "export_run.cjs"
NODE_MODULES = ROOT / ".peers" / "js" / "node_modules"


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """The pinned JS SDK, installed by `make peers-js` on first use (cached in .peers/js)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("node and npm are needed for the JS SDK tests: apt-get install -y nodejs npm")
    if not (NODE_MODULES / ".installed").exists():
        # pytest-xdist workers may get here at once: one runs npm ci, the others wait for it.
        (ROOT / ".peers").mkdir(exist_ok=True)
        with (ROOT / ".peers" / "js.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            subprocess.run(["make", "-s", "peers-js"], cwd=ROOT, check=True, timeout=900)
    return NODE_MODULES


def export_with_js(node_modules: Path, protocol: str, endpoint: str, compression: str) -> str:
    result = subprocess.run(
        ["node", str(SCRIPT), protocol, endpoint, compression],
        env={**os.environ, "NODE_PATH": str(node_modules)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"JS SDK export over {protocol} ({compression}) failed: {result.stderr}"
    trace_id: str = json.loads(result.stdout.strip().splitlines()[-1])["traceId"]
    return trace_id


CASES = [
    ("http/json", "none"),
    ("http/json", "gzip"),
    ("http/protobuf", "none"),
    ("http/protobuf", "gzip"),
    ("grpc", "none"),
    ("grpc", "gzip"),
]


def test_js_sdk_runs_become_trajectories(start_sidecar: Any, node_modules: Path) -> None:
    """Every protocol and compression of the JS SDK's trace exporters is acknowledged (the SDK
    reports success) and each run reads back as an agent run with its two tool calls in order."""
    sidecar = start_sidecar()
    traces: dict[str, tuple[str, str]] = {}
    for protocol, compression in CASES:
        endpoint = f"http://{sidecar.grpc_address if protocol == 'grpc' else sidecar.http.address}"
        traces[export_with_js(node_modules, protocol, endpoint, compression)] = (protocol, compression)
    assert sidecar.wait_until_assembled(60)
    for trace_id, (protocol, compression) in traces.items():
        runs = query_trajectories(sidecar.store, TrajectoryFilter(trace_id=trace_id))
        assert len(runs) == 1, f"{protocol} {compression}: no trajectory for {trace_id}"
        run = runs[0]
        assert run["agent"] == "js-agent"
        assert run["task"] == f"refund-{protocol}"
        assert [call["name"] for call in run["tool_calls"]] == ["lookup_order", "issue_refund"]
        assert [call["status"] for call in run["tool_calls"]] == ["ok", "ok"]
