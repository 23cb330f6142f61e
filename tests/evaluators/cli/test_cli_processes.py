"""`agenttrail worker` and `agenttrail references` as real processes (the console script's entry
point in a fresh interpreter), not through click's test runner.

`worker` runs only against a ClickHouse server: CI checks its refusals (an embedded store, a
server that does not answer); its scoring cycle runs when AGENTTRAIL_TEST_CLICKHOUSE_URL names a
server (README, "Development")."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from serve_processes import AGENTTRAIL, StartServe, port_of
from trajectory_rows import agent_run, store_runs

SERVER_URL = os.environ.get("AGENTTRAIL_TEST_CLICKHOUSE_URL", "")
REFS = (
    "refund:\n  reference_trajectory: [{tool_name: lookup}, {tool_name: refund}]\n"
    "faq: [{tool_name: search}]\n"
)


def agenttrail(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AGENTTRAIL, *args], capture_output=True, text=True, timeout=timeout, check=False)


def test_references_load_then_list_round_trip(tmp_path: Path) -> None:
    """`references load FILE` stores each task; loading a changed file makes a new version of the
    changed task only; `references list` shows the current reference of each task."""
    (tmp_path / "store").mkdir()  # where a stopped `serve` left its store
    where = ["--store", str(tmp_path / "store")]
    refs = tmp_path / "refs.yaml"
    refs.write_text(REFS)
    loaded = agenttrail("references", "load", str(refs), *where)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "2 added, 0 updated (new version), 0 unchanged"
    refs.write_text(REFS.replace("{tool_name: refund}", "{tool_name: approve}, {tool_name: refund}"))
    again = agenttrail("references", "load", str(refs), *where)
    assert again.stdout.strip() == "0 added, 1 updated (new version), 1 unchanged", again.stderr
    table = agenttrail("references", "list", *where)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["task", "version", "reference", "trajectory", "metrics", "source"]
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert sorted(rows) == ["faq", "refund"]
    assert rows["refund"][:7] == ["refund", "2", "lookup", ">", "approve", ">", "refund"]
    assert rows["faq"][:3] == ["faq", "1", "search"]
    assert rows["refund"][-1] == rows["faq"][-1] == str(refs)


def test_worker_refuses_an_embedded_store(tmp_path: Path) -> None:
    """On an embedded store the worker stops at once (exit 1), says serve runs the evaluator there,
    and creates nothing in the store's directory."""
    store = tmp_path / "store"
    done = agenttrail("worker", "--store", str(store), timeout=60)
    assert done.returncode == 1
    assert "runs beside collectors on a ClickHouse server (--store http(s)://...)" in done.stderr
    assert "`agenttrail serve` already runs the evaluator" in done.stderr
    assert not store.exists()


def test_worker_says_when_the_server_does_not_answer(closed_port: socket.socket) -> None:
    """A server URL nobody answers on: exit 4 (store unavailable) with the URL and what to check,
    instead of a worker that waits forever."""
    url = f"http://127.0.0.1:{port_of(closed_port)}"
    done = agenttrail("worker", "--store", url, timeout=60)
    assert done.returncode == 4, done.stderr
    assert f"cannot reach ClickHouse {url}" in done.stderr
    assert "Check the URL and that ClickHouse is running." in done.stderr


def test_an_unreachable_server_is_one_line_naming_the_socket_error(closed_port: socket.socket) -> None:
    """A read against a server URL nobody answers on: exit 4 and one line, the URL and the
    socket's own error, without the driver's retry warnings and urllib3's wrapping around it."""
    url = f"http://127.0.0.1:{port_of(closed_port)}"
    done = agenttrail("trajectories", "--store", url, timeout=60)
    assert done.returncode == 4, done.stderr
    assert done.stderr.splitlines() == [
        f"Error: cannot reach ClickHouse {url}: [Errno 111] Connection refused. "
        "Check the URL and that ClickHouse is running."
    ]


@pytest.fixture
def server_database() -> Iterator[tuple[str, str]]:
    """A fresh database on the ClickHouse server; dropped after the test."""
    from agenttrail.collector.store import Store, parse_store

    database = f"agenttrail_test_{uuid.uuid4().hex[:8]}"
    yield SERVER_URL, database
    server = Store(parse_store(SERVER_URL, database))
    try:
        server.command(f"DROP DATABASE IF EXISTS `{database}`")
    finally:
        server.close()


@pytest.mark.skipif(not SERVER_URL, reason="AGENTTRAIL_TEST_CLICKHOUSE_URL not set")
def test_worker_scores_runs_on_a_server(server_database: tuple[str, str], tmp_path: Path) -> None:
    """Against a ClickHouse server: references load and list, then `agenttrail worker` scores the
    stored runs against them (exact match 1 for the run that follows its reference, 0 for the one
    that does not) and stops cleanly (exit 0) on SIGTERM."""
    from agenttrail.collector.store import Store, parse_store
    from agenttrail.evaluators.scoring.scores import ScoreFilter, query_scores

    url, database = server_database
    where = ["--store", url, "--database", database]
    refs = tmp_path / "refs.yaml"
    refs.write_text(REFS)
    loaded = agenttrail("references", "load", str(refs), *where)
    assert loaded.stdout.strip() == "2 added, 0 updated (new version), 0 unchanged", loaded.stderr
    listed = agenttrail("references", "list", *where, "--format", "json")
    assert sorted(json.loads(line)["task"] for line in listed.stdout.splitlines()) == ["faq", "refund"]

    server = Store(parse_store(url, database))
    now = time.time()
    good, bad = store_runs(
        server,
        [
            agent_run(start=now - 5, task="refund", tools=["lookup", "refund"]),
            agent_run(start=now - 4, task="refund", tools=["refund"]),
        ],
    )
    log = tmp_path / "worker.log"
    with log.open("w") as sink:
        worker = subprocess.Popen([*AGENTTRAIL, "worker", *where], stderr=sink, text=True)
    try:
        deadline = time.monotonic() + 60
        scores: dict[str, float | None] = {}
        while time.monotonic() < deadline and len(scores) < 2:
            assert worker.poll() is None, log.read_text()
            for run in (good, bad):
                rows = query_scores(server, ScoreFilter.from_params({"trace_id": run.trace_id}))
                for row in rows:
                    if row["metric"] == "trajectory_exact_match":
                        scores[run.trace_id] = row["score"]
            time.sleep(0.2)
        assert scores == {good.trace_id: 1.0, bad.trace_id: 0.0}
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
        server.close()
    assert "scoring runs in" in log.read_text()


@pytest.mark.timeout(300)
def test_serve_prints_where_the_console_mcp_and_metrics_answer(
    tmp_path: Path, serve_process: StartServe
) -> None:
    """serve's start-up lines name the web console, MCP and Prometheus URLs on its HTTP port, and
    each answers there (a newcomer learned the console's address only from the demo)."""
    import urllib.request

    serve = serve_process("--store", str(tmp_path / "s"))
    announced: dict[str, str] = {}
    deadline = time.monotonic() + 30
    while len(announced) < 3 and time.monotonic() < deadline:  # the lines printed after the banner
        announced = dict(re.findall(r"^  (.+?): (http://\S+)$", serve.output(), re.M))
        time.sleep(0.1)
    assert set(announced) == {"web console", "MCP (streamable HTTP)", "Prometheus metrics"}, serve.output()
    assert announced["web console"].endswith("/console/")
    assert announced["MCP (streamable HTTP)"].endswith("/mcp/")
    with urllib.request.urlopen(announced["web console"], timeout=30) as page:
        assert page.url.endswith("/console/runs")
    with urllib.request.urlopen(announced["Prometheus metrics"], timeout=30) as page:
        assert b"agenttrail_" in page.read()
    assert serve.stop() == 0
