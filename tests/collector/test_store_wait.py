"""`serve` with a ClickHouse server it cannot reach at start: the receivers listen and acknowledge
into the spool, /livez is 200 and /readyz 503 saying what serve waits for, reads answer 503, and
once the store opens the spooled spans are stored, each once. A server that answers and refuses
ends serve at once.

No ClickHouse server runs here: "unreachable" is a loopback port nobody listens on, "refuses" a
stand-in answering as ClickHouse does to a wrong password. The store appearing is shown in process
with `Sidecar.store_opener` returning the test's chDB store after the real connects to the closed
port failed; `test_serve_waits_for_a_server_that_comes_up_later` does it against a real server
(AGENTTRAIL_TEST_CLICKHOUSE_URL) through a forwarder opened late on the port serve was given.
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import re
import select
import socket
import subprocess
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from serve_processes import StartServe, launch_serve, port_of

from agenttrail.api.v1 import evaluation_pb2 as pb
from agenttrail.api.v1.evaluation_pb2_grpc import EvaluationServiceStub
from agenttrail.collector.config import SidecarConfig
from agenttrail.collector.errors import StoreError, StoreUnavailable
from agenttrail.collector.spool import Spool
from agenttrail.collector.store import Store, parse_store

pytestmark = pytest.mark.timeout(600)

SERVER_URL = os.environ.get("AGENTTRAIL_TEST_CLICKHOUSE_URL", "")
REFUSAL = (
    b"Code: 516. DB::Exception: agent: Authentication failed: password is incorrect, or there is no user "
    b"with such name. (AUTHENTICATION_FAILED) (version 24.8.4.13 (official build))\n"
)


def get(address: str, path: str, accept: str = "application/json") -> tuple[int, dict[str, str], bytes]:
    host, _, port = address.rpartition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request("GET", path, headers={"Accept": accept})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def until(check: Callable[[], Any], timeout: float = 120, what: str = "the condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = check()
        except OSError:
            found = None
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{what} did not hold within {timeout:g} s")


def agent_run(task: str) -> tuple[ReadableSpan, ...]:
    """An invoke_agent span with two execute_tool children, recorded by the real SDK."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("agenttrail-store-wait")
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "waiter", "agenttrail.task": task}
    with tracer.start_as_current_span("invoke_agent waiter", attributes=agent):
        for tool in ("lookup_order", "issue_refund"):
            tool_attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
            with tracer.start_as_current_span(f"execute_tool {tool}", attributes=tool_attributes):
                pass
    provider.shutdown()
    return memory.get_finished_spans()


def send_runs(grpc_address: str, http_address: str, tasks: list[str]) -> None:
    """Each task's run through the real SDK exporters, alternating gRPC and HTTP; each export
    acknowledged."""
    for index, task in enumerate(tasks):
        if index % 2:
            exporter: Any = HttpExporter(endpoint=f"http://{http_address}/v1/traces", timeout=30)
        else:
            exporter = GrpcExporter(endpoint=grpc_address, insecure=True, timeout=30)
        try:
            assert exporter.export(agent_run(task)) is SpanExportResult.SUCCESS
        finally:
            exporter.shutdown()


class Refusing(http.server.BaseHTTPRequestHandler):
    """Answers every request as ClickHouse answers a wrong password."""

    def do_GET(self) -> None:
        self.refuse()

    def do_POST(self) -> None:
        self.refuse()

    def refuse(self) -> None:
        self.send_response(403)
        self.send_header("X-ClickHouse-Exception-Code", "516")
        self.send_header("Content-Length", str(len(REFUSAL)))
        self.end_headers()
        self.wfile.write(REFUSAL)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def refusing_server() -> Iterator[Callable[..., str]]:
    """Start the refusing stand-in on any port, or listening on a held one; returns its URL with
    credentials."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(held: socket.socket | None = None) -> str:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refusing, bind_and_activate=held is None)
        if held is not None:
            server.socket.close()
            server.socket = held
            server.server_address = held.getsockname()
            server.server_activate()
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://agent:hunter2@127.0.0.1:{server.server_address[1]}/agenttrail"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def serve_args(store: str, spool: Path, *extra: str) -> tuple[str, ...]:
    return ("--store", store, "--spool-dir", str(spool), "--quiet-period-s", "0.3", *extra)


def test_serve_listens_acknowledges_and_says_what_it_waits_for(
    tmp_path: Path, serve_process: StartServe, closed_port: socket.socket
) -> None:
    """`agenttrail serve` on a server URL whose port is closed: it stays up, /livez is 200,
    /readyz 503 names the URL without its password, the retrying and the last error; spans sent
    by the real SDK over gRPC and HTTP are acknowledged and spooled; the read API and the console
    answer 503 with the reason, /metrics shows agenttrail_store_up 0; one warning, no traceback;
    SIGTERM ends it cleanly with the spool kept."""
    port = port_of(closed_port)
    spool = tmp_path / "spool"
    serve = serve_process(*serve_args(f"http://agent:hunter2@127.0.0.1:{port}/agenttrail", spool))
    grpc_address, http_address = serve.grpc, serve.http
    until(lambda: get(http_address, "/livez")[0] == 200, what="/livez 200")
    status, _, body = get(http_address, "/readyz")
    assert status == 503
    detail = json.loads(body)
    assert detail["store"] == "unreachable"
    wait = detail["store_wait"]
    assert wait["state"] == "retrying"
    assert wait["url"] == f"http://127.0.0.1:{port}"
    assert "Connection refused" in wait["last_error"]
    assert "retrying" in wait["message"]
    assert "spool" in wait["message"]
    assert "hunter2" not in body.decode()

    send_runs(grpc_address, http_address, ["refund-1", "refund-2", "refund-3", "refund-4"])
    records = sum(len(Spool.read(segment)) for segment in spool.rglob("segment-*.spool"))
    assert records == 4  # acknowledged after the spool write, so on disk now (with grpc_process, in its own)

    for path in ("/api/v1/trajectories", "/api/v1/stats"):
        status, headers, body = get(http_address, path)
        assert status == 503, (path, body)
        assert headers["retry-after"] == "5"
        assert f"127.0.0.1:{port}" in json.loads(body)["message"]
    status, headers, body = get(http_address, "/console/", accept="text/html")
    assert status == 503
    assert headers["content-type"].startswith("text/plain")
    assert b"cannot reach its store" in body
    assert b"hunter2" not in body
    status, _, body = get(http_address, "/metrics")
    assert status == 200
    page = body.decode()
    assert "agenttrail_store_up 0.0" in page
    accepted = re.search(r'agenttrail_ingest_accepted_spans_total\{process="serve"\} (\d+)', page)
    assert accepted is not None
    assert int(accepted.group(1)) >= 6  # the HTTP runs' spans at least (gRPC's: grpc_process)

    until(lambda: json.loads(get(http_address, "/readyz")[2])["store_wait"]["attempts"] >= 3, what="3 tries")
    assert serve.stop() == 0
    stderr = serve.output()
    assert stderr.count("cannot reach the store at start") == 1, stderr
    assert "Traceback" not in stderr
    assert "hunter2" not in stderr
    assert sum(len(Spool.read(segment)) for segment in spool.rglob("segment-*.spool")) == 4


def test_serve_exits_at_once_when_the_server_refuses(
    tmp_path: Path,
    processes: list[subprocess.Popen[str]],
    serve_process: StartServe,
    refusing_server: Callable[..., str],
    closed_port: socket.socket,
) -> None:
    """Connected and refused is a config error, not an outage: a server that refuses the
    password ends serve at once with ClickHouse's reason and no password, both at the first try
    and when it comes up refusing on the port serve has been waiting for."""
    first = launch_serve(tmp_path / "first.log", *serve_args(refusing_server(), tmp_path / "spool"))
    processes.append(first.process)
    assert first.process.wait(240) == 1, first.output()
    stderr = first.output()
    assert "Authentication failed" in stderr
    assert "hunter2" not in stderr

    url = f"http://agent:hunter2@127.0.0.1:{port_of(closed_port)}/agenttrail"
    later = serve_process(*serve_args(url, tmp_path / "spool"))
    until(lambda: get(later.http, "/livez")[0] == 200, what="/livez 200")
    assert later.process.poll() is None  # waiting, not refused
    refusing_server(closed_port)
    assert later.process.wait(120) == 1, later.output()
    stderr = later.output()
    assert "the store answered and refused" in stderr
    assert "Authentication failed" in stderr
    assert "hunter2" not in stderr


@pytest.fixture
def late_store(
    chdb_dir: Path, database: str, closed_port: socket.socket
) -> Iterator[tuple[threading.Event, list[int], Callable[[], Store]]]:
    """A store opener that really connects to a closed loopback port (StoreUnavailable) until
    `appear` is set, then opens this test's chDB store; counts the tries."""
    closed = parse_store(f"http://127.0.0.1:{port_of(closed_port)}/agenttrail")
    appear = threading.Event()
    tries = [0]

    def open_store() -> Store:
        tries[0] += 1
        if not appear.is_set():
            return Store(closed)
        return Store(parse_store(str(chdb_dir), database))

    return appear, tries, open_store


def test_spans_spooled_while_waiting_are_stored_once_when_the_store_opens(
    sidecar_settings: dict[str, Any],
    tmp_path: Path,
    late_store: tuple[threading.Event, list[int], Callable[[], Store]],
    chdb_dir: Path,
    database: str,
) -> None:
    """The whole sidecar started on an unreachable server: it acknowledges, tries again with
    backoff, answers reads 503 and the evaluation API UNAVAILABLE, and when the store opens it
    migrates, replays what an earlier run left, starts the writer, assembler and every worker,
    and stores each acknowledged span exactly once."""
    from otlp_builders import agent_span, new_span_id, new_trace_id, request

    from agenttrail.evaluators.composition import build_sidecar

    spool = Path(sidecar_settings["spool_dir"])
    earlier_trace = new_trace_id()
    left = Spool(spool)  # an earlier run's acknowledged, unstored request
    left.append(
        request(
            agent_span(earlier_trace, new_span_id(), time.time() - 5, time.time() - 4)
        ).SerializeToString()
    )
    left.close()

    appear, tries, open_store = late_store
    settings = {**sidecar_settings, "store": "http://127.0.0.1:9/agenttrail"}
    sidecar = build_sidecar(SidecarConfig(**settings))
    sidecar.store_opener = open_store
    sidecar.start()
    try:
        assert not sidecar.wait_for_store(0)
        assert sidecar.dead_workers() == []  # the store parts are not expected to run yet
        http_address = sidecar.http.address
        ready, detail = sidecar.health()
        assert not ready
        assert detail["store_wait"]["state"] == "retrying"
        send_runs(sidecar.grpc_address, http_address, ["a", "b", "c"])
        until(lambda: tries[0] >= 3, what="three tries of the closed port")
        assert get(http_address, "/api/v1/trajectories")[0] == 503
        with grpc.insecure_channel(sidecar.grpc_address) as channel, pytest.raises(grpc.RpcError) as caught:
            EvaluationServiceStub(channel).ListScores(pb.ListScoresRequest(), timeout=60)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "cannot reach its store" in (caught.value.details() or "")

        appear.set()
        assert sidecar.wait_for_store(120)
        assert sidecar.store_failure is None
        assert sidecar.wait_until_assembled(120)
        store = sidecar.store
        assert store is not None
        assert store.query("SELECT count(), uniqExact(SpanId) FROM otel_traces") == [(10, 10)]
        runs = store.query("SELECT TraceId FROM trajectories FINAL WHERE IsDeleted = 0")
        assert len(runs) == 4
        assert earlier_trace in {row[0] for row in runs}
        assert sorted(path.name for path in spool.rglob("segment-*.spool")) == []
        assert get(http_address, "/readyz")[0] == 200
        assert get(http_address, "/api/v1/trajectories")[0] == 200
        assert sidecar.workers
        assert all(worker.alive() for worker in sidecar.workers)
        assert sidecar.dead_workers() == []
    finally:
        sidecar.stop()


def test_the_wait_ends_when_the_server_refuses_or_the_timeout_passes(
    sidecar_settings: dict[str, Any], refusing_server: Callable[..., str], closed_port: socket.socket
) -> None:
    """In process: a server that comes up refusing ends the wait with its StoreError (not
    StoreUnavailable), and `store_startup_timeout_s` ends it with StoreUnavailable."""
    from agenttrail.collector.sidecar import Sidecar

    closed = f"http://agent:hunter2@127.0.0.1:{port_of(closed_port)}/agenttrail"
    refused = parse_store(refusing_server())
    sidecar = Sidecar(SidecarConfig(**{**sidecar_settings, "store": closed}))
    tries = [0]

    def open_store() -> Store:
        tries[0] += 1
        return Store(refused if tries[0] >= 3 else sidecar.location)

    sidecar.store_opener = open_store
    sidecar.start()
    try:
        until(lambda: sidecar.store_failure is not None, what="the refusal")
        failure = sidecar.store_failure
        assert isinstance(failure, StoreError)
        assert not isinstance(failure, StoreUnavailable)
        assert "Authentication failed" in str(failure)
        assert "hunter2" not in str(failure)
        assert not sidecar.wait_for_store(0)
    finally:
        sidecar.stop()

    timed = Sidecar(SidecarConfig(**{**sidecar_settings, "store": closed, "store_startup_timeout_s": 2.0}))
    timed.start()
    try:
        until(lambda: timed.store_failure is not None, timeout=60, what="the timeout")
        assert isinstance(timed.store_failure, StoreUnavailable)
        assert "gave up waiting for the store" in str(timed.store_failure)
    finally:
        timed.stop()


@pytest.mark.parametrize("status", [502, 503, 504])
def test_a_proxy_without_a_server_behind_it_is_unreachable(status: int) -> None:
    """A 502/503/504 that carries no ClickHouse error (a load balancer with no server behind it)
    is waited for like a refused connection."""

    class Gateway(Refusing):
        def refuse(self) -> None:
            body = f"<html><body>{status} from the proxy</body></html>".encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(StoreUnavailable, match=f"cannot reach ClickHouse .*{status}"):
            Store(parse_store(f"http://127.0.0.1:{server.server_address[1]}/agenttrail"))
    finally:
        server.shutdown()
        server.server_close()


def forward(listener: socket.socket, target: tuple[str, int], stop: threading.Event) -> threading.Thread:
    """A TCP forwarder from the held loopback port `listener` to `target`, opened now (until `stop`)."""
    listener.listen()
    listener.settimeout(0.2)

    def pipe(a: socket.socket, b: socket.socket) -> None:
        with a, b:
            while not stop.is_set():
                readable, _, _ = select.select([a, b], [], [], 0.2)
                for source in readable:
                    data = source.recv(65536)
                    if not data:
                        return
                    (b if source is a else a).sendall(data)

    def accept() -> None:
        with listener:
            while not stop.is_set():
                try:
                    client, _ = listener.accept()
                except TimeoutError:
                    continue
                upstream = socket.create_connection(target, timeout=10)
                threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    return thread


@pytest.mark.skipif(not SERVER_URL, reason="AGENTTRAIL_TEST_CLICKHOUSE_URL not set")
def test_serve_waits_for_a_server_that_comes_up_later(
    tmp_path: Path, serve_process: StartServe, closed_port: socket.socket
) -> None:
    """Against a real ClickHouse server reached through a port that opens only after serve
    started: serve acknowledges while it waits, then migrates, stores every spooled span once and
    becomes ready, with no restart."""
    server = urllib.parse.urlparse(SERVER_URL)
    database = f"agenttrail_wait_{uuid.uuid4().hex[:8]}"
    port = port_of(closed_port)
    credentials = server.netloc.rpartition("@")[0]
    late = server._replace(netloc=f"{credentials}@127.0.0.1:{port}" if credentials else f"127.0.0.1:{port}")
    serve = serve_process(
        *serve_args(urllib.parse.urlunparse(late), tmp_path / "spool", "--database", database)
    )
    grpc_address, http_address = serve.grpc, serve.http
    stop = threading.Event()
    direct = Store(parse_store(SERVER_URL, database))
    try:
        until(lambda: get(http_address, "/livez")[0] == 200, timeout=240, what="/livez 200")
        assert get(http_address, "/readyz")[0] == 503
        send_runs(grpc_address, http_address, ["a", "b", "c", "d"])
        forward(closed_port, (server.hostname or "127.0.0.1", server.port or 8123), stop)
        until(lambda: get(http_address, "/readyz")[0] == 200, timeout=180, what="/readyz 200")
        until(lambda: direct.query("SELECT count() FROM otel_traces") == [(12,)], what="12 spans stored")
        assert direct.query("SELECT uniqExact(SpanId) FROM otel_traces") == [(12,)]
        until(lambda: len(get(http_address, "/api/v1/trajectories")[2].splitlines()) == 4, what="4 runs")
        assert serve.stop() == 0
        stderr = serve.output()
        assert "reached the store" in stderr
        assert "Traceback" not in stderr
    finally:
        stop.set()
        direct.command(f"DROP DATABASE IF EXISTS `{database}`")
        direct.close()


class LostAfterMigrating(Store):
    """A server that goes away once the migrations ran: each new client (the writer's, the
    assembler's) finds its port closed."""

    def __init__(self, location: Any, closed: Any) -> None:
        super().__init__(location)
        self.closed = closed

    def clone(self) -> Store:
        return Store(self.closed)


@pytest.mark.parametrize("lost_on_try", [1, 2], ids=["at-start", "after-waiting"])
def test_a_server_lost_between_migrations_and_the_writer_is_waited_for_again(
    sidecar_settings: dict[str, Any],
    chdb_dir: Path,
    database: str,
    lost_on_try: int,
    caplog: pytest.LogCaptureFixture,
    closed_port: socket.socket,
) -> None:
    """The server answers, serve migrates, and it is gone before the writer starts (at the first
    try, or after a wait): serve goes back to waiting, acknowledging into the spool, instead of
    ending; when the server answers again every acknowledged span is stored once."""
    from otlp_builders import agent_span, new_span_id, new_trace_id, request

    from agenttrail.collector.sidecar import Sidecar

    closed = parse_store(f"http://127.0.0.1:{port_of(closed_port)}/agenttrail")
    embedded = parse_store(str(chdb_dir), database)
    tries = [0]

    def open_store() -> Store:
        tries[0] += 1
        if tries[0] < lost_on_try:
            return Store(closed)
        if tries[0] == lost_on_try:
            return LostAfterMigrating(embedded, closed)
        return Store(embedded)

    sidecar = Sidecar(SidecarConfig(**{**sidecar_settings, "store": "http://127.0.0.1:9/agenttrail"}))
    sidecar.store_opener = open_store
    caplog.set_level("WARNING", logger="agenttrail.collector.sidecar")
    sidecar.start()
    try:
        trace = new_trace_id()
        with grpc.insecure_channel(sidecar.grpc_address) as channel:
            export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            export(request(agent_span(trace, new_span_id(), 0, 10)).SerializeToString(), timeout=30)
        assert sidecar.wait_for_store(120), sidecar.store_failure
        assert sidecar.store_failure is None
        assert tries[0] == lost_on_try + 1
        assert sidecar.flush(60)
        assert sidecar.store is not None
        assert sidecar.store.query(
            "SELECT count() FROM otel_traces WHERE TraceId = {t:String}", {"t": trace}
        ) == [(1,)]
        assert any("lost the store after migrating it" in r.getMessage() for r in caplog.records)
    finally:
        sidecar.stop()
