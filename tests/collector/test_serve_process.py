"""`agenttrail serve` as a real process: kill -9 loses nothing acknowledged, one process per
embedded store, read commands work while serve holds the store, and a stopped store's copy
restores elsewhere."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import grpc
import pytest
from otlp_builders import agent_span, new_span_id, new_trace_id, request, tool_span
from serve_processes import AGENTTRAIL, StartServe

# Up to three serve start-ups per test; each can take minutes on a loaded 2-core machine.
pytestmark = pytest.mark.timeout(900)

HEX32 = re.compile(r"^[0-9a-f]{32}$")


def on(store: Path, *extra: str) -> tuple[str, ...]:
    return ("--store", str(store), "--quiet-period-s", "0.3", *extra)


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AGENTTRAIL, *args], capture_output=True, text=True, timeout=timeout, check=False)


def export(address: str, body: bytes) -> None:
    with grpc.insecure_channel(address) as channel:
        channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")(body, timeout=30)


def listening(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError:
        return False
    return True


@pytest.mark.parametrize("receiver", ["in-process", "grpc-process"])
def test_kill_after_ack_loses_nothing(tmp_path: Path, serve_process: StartServe, receiver: str) -> None:
    """Spans acknowledged just before SIGKILL (still only spooled) are stored after a restart.
    With the gRPC receiver process, serve's SIGKILL ends it too, and the next serve stores what
    it had spooled in its own directory."""
    store = tmp_path / "store"
    extra = ("--grpc-process", "true") if receiver == "grpc-process" else ()
    first = serve_process(*on(store, "--flush-interval-s", "30", "--batch-max-spans", "100000", *extra))
    expected: dict[str, list[str]] = {}
    for index in range(20):
        trace, root = new_trace_id(), new_span_id()
        tools = [f"tool{index}a", f"tool{index}b"]
        export(
            first.grpc,
            request(
                agent_span(trace, root, 0, 10),
                tool_span(trace, new_span_id(), root, tools[0], 1, 2),
                tool_span(trace, new_span_id(), root, tools[1], 3, 4),
            ).SerializeToString(),
        )
        expected[trace] = tools
    first.process.kill()
    first.process.wait(10)
    assert list((store / "spool").rglob("segment-*.spool")), "spans should have been only spooled"
    if receiver == "grpc-process":  # the orphaned receiver process stops listening by itself
        host, port = first.grpc.rsplit(":", 1)
        deadline = time.monotonic() + 60
        while listening(host, int(port)):
            assert time.monotonic() < deadline, "the receiver process outlived serve"
            time.sleep(0.2)

    serve_process(*on(store))
    deadline = time.monotonic() + 60
    runs: dict[str, list[str]] = {}
    while time.monotonic() < deadline and len(runs) < len(expected):
        result = run_cli("trajectories", "--store", str(store), "--format", "json", "--limit", "1000")
        assert result.returncode == 0, result.stderr
        runs = {
            r["trace_id"]: [c["name"] for c in r["tool_calls"]]
            for r in map(json.loads, result.stdout.splitlines())
        }
        time.sleep(0.3)
    assert runs == expected
    assert not list((store / "spool").rglob("segment-*.spool"))


def test_one_serve_per_store_and_reads_while_serving(tmp_path: Path, serve_process: StartServe) -> None:
    """A second serve on the same store names the holder; trajectories reads through the running
    sidecar and prints the JSON contract; SIGTERM stops serve cleanly; then reads open the store."""
    store = tmp_path / "store"
    serve = serve_process(*on(store))
    info = {"grpc": serve.grpc, "http": serve.http}

    second = run_cli("serve", "--store", str(store), "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0")
    assert second.returncode != 0
    assert f"in use by agenttrail serve (pid {serve.process.pid}" in second.stderr

    # Another store on the first serve's gRPC port: refused (gRPC's default SO_REUSEPORT let it
    # bind too, and the kernel split the clients' spans between the two stores).
    same_port = run_cli(
        "serve", "--store", str(tmp_path / "other"), "--grpc", info["grpc"], "--http", "127.0.0.1:0"
    )
    assert same_port.returncode == 3, same_port.stderr
    assert f"cannot listen for OTLP/gRPC on {info['grpc']}" in same_port.stderr
    assert "--grpc" in same_port.stderr
    # The ports are checked before the store is created or migrated: nothing is left behind.
    assert not (tmp_path / "other").exists()
    same_http = run_cli(
        "serve", "--store", str(tmp_path / "other"), "--grpc", "127.0.0.1:0", "--http", info["http"]
    )
    assert same_http.returncode == 3, same_http.stderr
    assert f"cannot listen for OTLP/HTTP on {info['http']}" in same_http.stderr
    assert "--http" in same_http.stderr
    assert not (tmp_path / "other").exists()

    trace, root = new_trace_id(), new_span_id()
    export(
        info["grpc"],
        request(
            agent_span(
                trace,
                root,
                0,
                1500,
                attributes={
                    "agenttrail.task": "refund",
                    "input.value": '{"q": 1}',
                    "output.value": '"done"',
                    "gen_ai.conversation.id": "c1",
                },
            ),
            tool_span(trace, new_span_id(), root, "lookup", 10, 20, arguments={"id": 7}),
            tool_span(trace, new_span_id(), root, "refund", 30, 45, error="PaymentError"),
        ).SerializeToString(),
    )
    deadline = time.monotonic() + 30
    lines: list[str] = []
    while time.monotonic() < deadline and not lines:
        result = run_cli("trajectories", "--store", str(store), "--format", "json", "--task", "refund")
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        time.sleep(0.2)
    [run] = [json.loads(line) for line in lines]
    assert HEX32.match(run["trace_id"])
    assert run["trace_id"] == trace
    assert (run["agent"], run["task"], run["conversation_id"]) == ("bot", "refund", "c1")
    assert run["start"].endswith("Z")
    assert run["latency_s"] == pytest.approx(1.5)
    assert (run["failure"], run["error_type"]) == (0, "")
    assert (run["input"], run["output"]) == ({"q": 1}, "done")
    lookup, refund = run["tool_calls"]
    assert set(lookup) == {
        "name",
        "input",
        "output",
        "status",
        "error_type",
        "latency_ms",
        "span_id",
        "agent",
        "call_id",
        "input_captured",
        "output_captured",
    }
    assert lookup["input_captured"] is True  # arguments were on the span
    assert (lookup["name"], lookup["input"], lookup["status"], lookup["agent"]) == (
        "lookup",
        {"id": 7},
        "ok",
        "bot",
    )
    assert lookup["latency_ms"] == pytest.approx(10.0)
    assert (refund["status"], refund["error_type"], refund["output"]) == ("error", "PaymentError", None)

    table = run_cli("trajectories", "--store", str(store))
    assert "lookup > refund!" in table.stdout

    assert serve.stop() == 0
    after = run_cli("trajectories", "--store", str(store), "--format", "json")
    assert after.returncode == 0, after.stderr
    assert [json.loads(line)["trace_id"] for line in after.stdout.splitlines()] == [trace]


def test_cli_errors_name_the_problem(tmp_path: Path) -> None:
    """Bad inputs to the CLI give one-line errors that say what to do, not tracebacks."""
    missing = run_cli("trajectories", "--store", str(tmp_path / "nothing"))
    assert missing.returncode != 0
    assert "agenttrail serve" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad_trace = run_cli("trajectories", "--store", str(tmp_path), "--trace", "xyz")
    assert "32 lowercase hex" in bad_trace.stderr
    bad_config = tmp_path / "bad.yaml"
    bad_config.write_text("collector:\n  quiet_period_s: soon\n")
    result = run_cli("serve", "--config", str(bad_config), "--store", str(tmp_path / "s"))
    assert result.returncode != 0
    assert "quiet_period_s" in result.stderr
    assert "soon" in result.stderr


def test_serve_warns_when_it_listens_beyond_loopback_without_a_token(
    serve_process: StartServe, tmp_path: Path
) -> None:
    """A port bound to every interface without a bearer token gets a warning naming it and what
    to set; with the token set (or on loopback, as everywhere else here) there is none."""

    def stderr_of(store: Path, env: dict[str, str]) -> str:
        serve = serve_process("--store", str(store), "--http", "0.0.0.0:0", env=env)
        assert serve.stop() == 0
        return serve.output()

    env = {key: value for key, value in os.environ.items() if key != "AGENTTRAIL_BEARER_TOKEN"}
    open_port = stderr_of(tmp_path / "open", env)
    assert re.search(
        r"^warning: 0\.0\.0\.0:\d+ reach beyond this machine and no bearer_token", open_port, re.M
    )
    assert (
        "Set bearer_token (env AGENTTRAIL_BEARER_TOKEN) with tls_cert and tls_key, or bind 127.0.0.1"
        in open_port
    )
    with_token = stderr_of(tmp_path / "token", {**env, "AGENTTRAIL_BEARER_TOKEN": "s3cret-token-value"})
    assert "agenttrail serving on" in with_token
    assert "warning: " not in with_token


# Backing up and restoring an embedded store as deploy/README.md says (Backup and restore).
def send_run(grpc_address: str, tool: str) -> str:
    trace, root = new_trace_id(), new_span_id()
    spans = (agent_span(trace, root, 0, 10), tool_span(trace, new_span_id(), root, tool, 1, 2))
    export(grpc_address, request(*spans).SerializeToString())
    return trace


def runs(store: Path, count: int) -> dict[str, list[str]]:
    """The store's runs (trace id -> tool names) once there are `count` (read by whatever holds it)."""
    deadline = time.monotonic() + 60
    found: dict[str, list[str]] = {}
    while time.monotonic() < deadline:
        result = run_cli("trajectories", "--store", str(store), "--format", "json", "--limit", "100")
        assert result.returncode == 0, result.stderr
        found = {
            r["trace_id"]: [c["name"] for c in r["tool_calls"]]
            for r in map(json.loads, result.stdout.splitlines())
        }
        if len(found) >= count:
            return found
        time.sleep(0.3)
    raise AssertionError(f"{len(found)} of {count} runs in {store}")


def test_a_stopped_stores_copy_restores_elsewhere(tmp_path: Path, serve_process: StartServe) -> None:
    """The copy of a stopped store holds every run; its lock file still names the old serve, yet
    reads open the copy itself, and a serve on it stores new runs beside the old ones."""
    store, restored = tmp_path / "store", tmp_path / "restored"
    serve = serve_process(*on(store))
    sent = {send_run(serve.grpc, f"tool{i}"): [f"tool{i}"] for i in range(5)}
    assert runs(store, 5) == sent
    assert serve.stop() == 0

    shutil.copytree(store, restored, symlinks=True)
    assert runs(restored, 5) == sent  # no serve: the copy is opened, not the old serve's address
    again = serve_process(*on(restored))
    sent[send_run(again.grpc, "after")] = ["after"]
    assert runs(restored, 6) == sent
    assert runs(store, 5) == {trace: tools for trace, tools in sent.items() if tools != ["after"]}
