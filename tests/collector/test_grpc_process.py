"""OTLP/gRPC in a receiver process of its own (`grpc_process: true`), over real gRPC on loopback:
what it acknowledges is stored (also when it is killed), it answers as the in-process receiver
does (partial_success, bad input, auth, TLS, a full queue, a full disk), the evaluation API on
the same port is forwarded to serve, and a graceful stop stores everything acknowledged."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from multiprocessing import get_context
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from otlp_builders import SpanSpec, agent_span, new_span_id, new_trace_id, request, tool_span
from receiver_clients import grpc_export, sdk_exporting_to
from tls_certs import self_signed

from agenttrail.api.v1 import evaluation_pb2 as pb
from agenttrail.api.v1.evaluation_pb2_grpc import EvaluationServiceStub
from agenttrail.collector.errors import ConfigError
from agenttrail.collector.grpc_process import RECEIVER_SPOOL, _running, adopt_leftovers
from agenttrail.collector.spool import Spool
from agenttrail.instrumentation import agent, tool

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def one_span(trace: str, name: str, padding: int = 0) -> bytes:
    attributes = {"pad": "x" * padding} if padding else {}
    return request(SpanSpec(trace, new_span_id(), name, 0, 1, attributes=attributes)).SerializeToString()


def stored_names(sidecar: Any, trace: str) -> list[str]:
    assert sidecar.flush(60)
    rows = sidecar.store.query(
        "SELECT SpanName FROM otel_traces WHERE TraceId = {t:String} ORDER BY SpanName", {"t": trace}
    )
    return [row[0] for row in rows]


def wait_for(condition: Any, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def fill(fd: int) -> None:
    """Write until the filesystem is full (raises ENOSPC)."""
    while os.write(fd, b"\0" * 4096):
        pass


def export_code(address: str, body: bytes, metadata: tuple[tuple[str, str], ...] = ()) -> grpc.StatusCode:
    try:
        grpc_export(address, body, metadata)
    except grpc.RpcError as exc:
        return exc.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def test_sdk_spans_become_a_trajectory_through_the_receiver_process(start_sidecar: Any) -> None:
    """The real OTel SDK exports over gRPC to the receiver process; serve stores and assembles."""
    sidecar = start_sidecar(grpc_process=True)
    assert sidecar.grpc_process.alive()
    assert sidecar.grpc is not None  # serve's internal port, for the evaluation API
    assert sidecar.grpc_address != sidecar.grpc.address

    @tool
    def lookup(order: str) -> str:
        return f"order {order}"

    @agent(name="proc-agent", task="refund")
    def run() -> str:
        return lookup("42")

    with sdk_exporting_to(sidecar, "proc-svc") as provider:
        run()
        assert provider.force_flush(30_000)
    assert sidecar.wait_until_assembled(120)
    rows = sidecar.store.query("SELECT Agent, ToolNames FROM trajectories WHERE ServiceName = 'proc-svc'")
    assert rows == [("proc-agent", ["lookup"])]
    assert sidecar.pipeline.counters.accepted_spans == 2


def test_partial_success_bad_input_and_auth_as_in_process(start_sidecar: Any) -> None:
    """partial_success names a rejected span; garbage is INVALID_ARGUMENT; a missing token is
    UNAUTHENTICATED; the rejected span counts in /healthz."""
    sidecar = start_sidecar(grpc_process=True, bearer_token="s3cret")
    address, token = sidecar.grpc_address, (("authorization", "Bearer s3cret"),)
    trace = new_trace_id()
    bad = SpanSpec(trace, new_span_id(), "bad", 0, 1).to_proto()
    bad.trace_id = b"short"
    body = request(SpanSpec(trace, new_span_id(), "good", 0, 1), bad).SerializeToString()
    assert export_code(address, body) == grpc.StatusCode.UNAUTHENTICATED
    assert export_code(address, body, (("authorization", "Bearer wrong"),)) == grpc.StatusCode.UNAUTHENTICATED
    response = ExportTraceServiceResponse.FromString(grpc_export(address, body, token))
    assert response.partial_success.rejected_spans == 1
    assert "trace_id" in response.partial_success.error_message
    with pytest.raises(grpc.RpcError) as caught:
        grpc_export(address, b"\xff\xff\xff", token)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert stored_names(sidecar, trace) == ["good"]
    wait_for(lambda: sidecar.health()[1]["rejected_spans"] == 1)


def test_the_evaluation_api_is_forwarded_with_its_token(start_sidecar: Any) -> None:
    """Other gRPC services on the port reach serve: the token is checked there, answers come back."""
    sidecar = start_sidecar(grpc_process=True, bearer_token="s3cret")
    with grpc.insecure_channel(sidecar.grpc_address) as channel:
        stub = EvaluationServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.ListScores(pb.ListScoresRequest(), timeout=60)
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        good = (("authorization", "Bearer s3cret"),)
        assert not stub.ListScores(pb.ListScoresRequest(), timeout=60, metadata=good).scores
        with pytest.raises(grpc.RpcError) as caught:
            stub.GetRun(pb.GetRunRequest(trace_id="ab" * 16), timeout=60, metadata=good)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND


def test_tls(start_sidecar: Any, tmp_path: Path) -> None:
    """With a certificate the receiver process serves TLS only."""
    cert = self_signed(tmp_path)
    sidecar = start_sidecar(grpc_process=True, tls_cert=str(cert.cert_file), tls_key=str(cert.key_file))
    trace = new_trace_id()
    credentials = grpc.ssl_channel_credentials(root_certificates=cert.cert_pem)
    with grpc.secure_channel(sidecar.grpc_address, credentials) as channel:
        channel.unary_unary(EXPORT, None, None)(one_span(trace, "secure"), timeout=60)
    assert export_code(sidecar.grpc_address, one_span(trace, "plain")) == grpc.StatusCode.UNAVAILABLE
    assert stored_names(sidecar, trace) == ["secure"]


def test_killed_receiver_process_loses_nothing_acknowledged(start_sidecar: Any) -> None:
    """kill -9 of the receiver process: every acknowledged span is stored, /livez says it was
    dead until another process took the same port, which then takes requests."""
    # A long flush interval: the acknowledged records are still in the process's open segment.
    sidecar = start_sidecar(grpc_process=True, flush_interval_s=30.0)
    address = sidecar.grpc_address
    trace = new_trace_id()
    names = [f"span-{index}" for index in range(20)]
    for name in names:
        grpc_export(address, one_span(trace, name))
    first = sidecar.grpc_process._process
    os.kill(first.pid, signal.SIGKILL)
    wait([first.sentinel], 30)  # not join(): the sidecar's listener reaps it
    assert "grpc receiver" in sidecar.dead_workers() or sidecar.grpc_process._process is not first
    wait_for(lambda: sidecar.grpc_process.restarts == 1 and sidecar.grpc_process.alive())
    assert sidecar.grpc_address == address
    wait_for(lambda: sidecar.pipeline.counters.stored_spans >= len(names))  # the writer took them over
    grpc_export(address, one_span(trace, "after"))
    assert stored_names(sidecar, trace) == sorted([*names, "after"])


def test_a_process_reaped_by_another_thread_reads_as_ended() -> None:
    """serve's listener joins the receiver process while health checks ask whether it runs; when
    the other waiter reaps it first, `is_alive()` is told "no such child" and says it runs."""
    process = get_context("spawn").Process(target=time.sleep, args=(60,), daemon=True)
    process.start()
    assert process.pid is not None
    assert _running(process)
    os.kill(process.pid, signal.SIGKILL)
    os.waitpid(process.pid, 0)  # the other thread's reap
    assert process.is_alive()  # the race this guards against: multiprocessing cannot tell
    assert not _running(process)


def test_graceful_stop_stores_everything_acknowledged(start_sidecar: Any, store: Any) -> None:
    """stop(): the process hands over its open segment and serve's writer stores it before
    stopping; nothing is left in the receiver's spool."""
    sidecar = start_sidecar(grpc_process=True, flush_interval_s=30.0)
    trace = new_trace_id()
    for index in range(10):
        grpc_export(sidecar.grpc_address, one_span(trace, f"s{index}"))
    spool_dir = sidecar.spool_dir()
    sidecar.stop()
    assert not list((spool_dir / RECEIVER_SPOOL).glob("segment-*.spool"))
    assert not list(spool_dir.glob("segment-*.spool"))
    rows = store.query("SELECT count() FROM otel_traces WHERE TraceId = {t:String}", {"t": trace})
    assert rows == [(10,)]


def test_serves_backlog_reaches_the_process(start_sidecar: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spans serve's writer has not stored yet count against max_queue_spans in the process:
    past it the process answers UNAVAILABLE, and once the writer catches up it accepts again."""
    sidecar = start_sidecar(grpc_process=True, max_queue_spans=6)
    writer_free = threading.Event()
    store_batch = sidecar.pipeline._store_batch

    def held_store_batch(*args: Any, **kwargs: Any) -> bool:
        writer_free.wait(120)  # a slow store
        return store_batch(*args, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(sidecar.pipeline, "_store_batch", held_store_batch)
    trace = new_trace_id()
    body = request(
        *(SpanSpec(trace, new_span_id(), f"s{index}", 0, 1) for index in range(4))
    ).SerializeToString()
    grpc_export(sidecar.grpc_address, body)
    wait_for(lambda: sidecar.pipeline.queued_rows == 4)  # handed over, the writer holds it
    time.sleep(0.2)  # serve publishes its backlog every 20 ms
    assert export_code(sidecar.grpc_address, body) == grpc.StatusCode.UNAVAILABLE
    wait_for(lambda: sidecar.health()[1]["grpc_receiver_process"].get("refused_requests") == 1)
    writer_free.set()
    wait_for(lambda: sidecar.pipeline.queued_rows == 0)
    time.sleep(0.2)
    grpc_export(sidecar.grpc_address, body)
    assert len(stored_names(sidecar, trace)) == 8


def test_adopted_leftovers_are_replayed_at_start(start_sidecar: Any, tmp_path: Path) -> None:
    """Segments a killed serve's receiver process left are stored at the next start."""
    spool_dir = tmp_path / "spool"
    trace = new_trace_id()
    left = Spool(spool_dir / RECEIVER_SPOOL)
    root = new_span_id()
    spans = (agent_span(trace, root, 0, 5), tool_span(trace, new_span_id(), root, "t", 1, 2))
    left.append(request(*spans).SerializeToString())
    left.close()
    sidecar = start_sidecar(grpc_process=False)  # the setting off: the leftovers are stored all the same
    assert stored_names(sidecar, trace) == ["execute_tool t", "invoke_agent bot"]
    assert adopt_leftovers(spool_dir) == []


def test_disk_full_is_unavailable_and_not_ready(start_sidecar: Any, small_disk: Path) -> None:
    """The process cannot write its spool: UNAVAILABLE, readiness says why; it resumes by itself."""
    sidecar = start_sidecar(grpc_process=True, spool_dir=str(small_disk / "spool"))
    trace = new_trace_id()
    grpc_export(sidecar.grpc_address, one_span(trace, "before"))
    filler = small_disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError, match="No space left"):
            fill(fd)
    finally:
        os.close(fd)
    big = one_span(trace, "refused", padding=64 * 1024)
    assert export_code(sidecar.grpc_address, big) == grpc.StatusCode.UNAVAILABLE
    wait_for(lambda: sidecar.health()[1]["grpc_receiver_process"].get("disk_error"))
    assert not sidecar.health()[0]
    filler.unlink()
    grpc_export(sidecar.grpc_address, one_span(trace, "after"))
    wait_for(lambda: sidecar.health()[0])
    assert stored_names(sidecar, trace) == ["after", "before"]


def test_a_port_in_use_stops_serve_with_a_message(start_sidecar: Any) -> None:
    """The receiver process cannot listen: serve does not start, and says which address and why."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    address = f"127.0.0.1:{taken.getsockname()[1]}"
    try:
        with pytest.raises(ConfigError, match=f"cannot listen for OTLP/gRPC on {address}"):
            start_sidecar(grpc_process=True, grpc=address)
    finally:
        taken.close()
