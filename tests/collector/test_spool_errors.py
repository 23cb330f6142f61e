"""Disk full and write errors: nothing is acknowledged that is not written whole, the spool stays
valid, the receivers answer 503 / UNAVAILABLE with a retry hint, and ingest resumes by itself."""

from __future__ import annotations

import errno
import http.client
import os
from pathlib import Path
from typing import Any

import grpc
import pytest
from otlp_builders import SpanSpec, new_span_id, new_trace_id, request
from receiver_clients import grpc_export

from agenttrail.collector import spool as spool_module
from agenttrail.collector.errors import OverloadedError
from agenttrail.collector.ingest import IngestPipeline
from agenttrail.collector.spool import Spool


def body(trace: str, name: str, padding: int = 0) -> bytes:
    spec = SpanSpec(trace, new_span_id(), name, 0, 1, attributes={"pad": "x" * padding} if padding else {})
    return request(spec).SerializeToString()


def test_a_short_write_is_refused_cut_off_and_ingest_resumes(
    store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """os.write writing part of a record then failing with ENOSPC: accept raises OverloadedError
    (store_down, Retry-After), the partial record is cut off so the segment holds exactly the
    acknowledged records, readiness names the disk, and the next write that works clears it."""
    pipeline = IngestPipeline(store, tmp_path / "spool")
    trace = new_trace_id()
    pipeline.accept(body(trace, "first"))
    real_write = os.write
    calls = {"n": 0}

    def failing_write(fd: int, data: Any) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))  # a short write
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(spool_module.os, "write", failing_write)
    with pytest.raises(OverloadedError) as caught:
        pipeline.accept(body(trace, "second"))
    assert caught.value.store_down is True
    assert caught.value.retry_after_s > 0
    assert "No space left on device" in str(caught.value)
    _, detail = pipeline.readiness()
    assert detail["disk"]["ok"] is False
    assert "No space left" in detail["disk"]["error"]
    monkeypatch.setattr(spool_module.os, "write", real_write)
    pipeline.accept(body(trace, "third"))
    assert pipeline.readiness()[1]["disk"]["ok"] is True
    segment = pipeline._spool.seal()
    assert segment is not None
    names = [request_span_name(record) for record in Spool.read(segment)]
    assert names == ["first", "third"]
    assert pipeline.counters.accepted_spans == 2
    pipeline.stop()


def request_span_name(record: bytes) -> str:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    return str(ExportTraceServiceRequest.FromString(record).resource_spans[0].scope_spans[0].spans[0].name)


def test_a_failed_fsync_is_not_acknowledged(
    store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With spool_fsync, an fsync error (EIO) refuses the request and cuts its bytes off again."""
    pipeline = IngestPipeline(store, tmp_path / "spool", spool_fsync=True)
    trace = new_trace_id()
    pipeline.accept(body(trace, "kept"))

    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(spool_module.os, "fsync", failing_fsync)
    with pytest.raises(OverloadedError, match="Input/output error"):
        pipeline.accept(body(trace, "lost"))
    monkeypatch.undo()
    segment = pipeline._spool.seal()
    assert segment is not None
    assert [request_span_name(record) for record in Spool.read(segment)] == ["kept"]
    pipeline.stop()


def fill(fd: int) -> None:
    """Write until the filesystem is full (raises ENOSPC)."""
    while os.write(fd, b"\0" * 4096):
        pass


def post(address: str, data: bytes) -> tuple[int, dict[str, str]]:
    """POST an OTLP body; the status and the response headers, names lower-cased (HTTP names are
    case-insensitive and servers differ in the case they send)."""
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request(
            "POST", "/v1/traces", body=data, headers={"Content-Type": "application/x-protobuf"}
        )
        response = connection.getresponse()
        response.read()
        return response.status, {name.lower(): value for name, value in response.getheaders()}
    finally:
        connection.close()


def grpc_code(address: str, data: bytes) -> grpc.StatusCode:
    with grpc.insecure_channel(address) as channel:
        call = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        try:
            call(data, timeout=30)
        except grpc.RpcError as exc:
            return exc.code()  # type: ignore[no-any-return]
        return grpc.StatusCode.OK


def test_disk_full_answers_503_and_unavailable_then_resumes(start_sidecar: Any, small_disk: Path) -> None:
    """On a real full filesystem: HTTP 503 + Retry-After and gRPC UNAVAILABLE (not UNKNOWN),
    readiness says the disk is the problem, and once space frees ingest resumes with every
    acknowledged span stored."""
    spool_dir = small_disk / "spool"
    sidecar = start_sidecar(spool_dir=str(spool_dir))
    trace = new_trace_id()
    assert post(sidecar.http.address, body(trace, "before"))[0] == 200
    assert sidecar.flush(30)
    filler = small_disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError, match="No space left"):
            fill(fd)
    finally:
        os.close(fd)
    big = body(trace, "refused", padding=64 * 1024)
    status, headers = post(sidecar.http.address, big)
    assert status == 503
    assert int(headers["retry-after"]) > 0
    assert grpc_code(sidecar.grpc_address, big) == grpc.StatusCode.UNAVAILABLE
    healthy, detail = sidecar.health()
    assert not healthy
    assert detail["ingest"]["disk"]["ok"] is False
    assert detail["store"] == "ok"  # the store itself is fine
    # The refused request's bytes were cut off again: no partial record in the spool.
    assert all(segment.stat().st_size == 0 for segment in spool_dir.glob("segment-*.spool"))
    filler.unlink()  # space frees: the next request goes through, nothing else needed
    assert post(sidecar.http.address, body(trace, "after", padding=64 * 1024))[0] == 200
    # Each receiver path learns that its spool is writable again at its own next write (with
    # `grpc_process` the gRPC receiver process spools apart from serve).
    grpc_export(sidecar.grpc_address, body(trace, "after-grpc"))
    assert sidecar.flush(30)
    assert sidecar.health()[0]
    rows = sidecar.store.query(
        "SELECT SpanName FROM otel_traces WHERE TraceId = {t:String} ORDER BY SpanName", {"t": trace}
    )
    assert rows == [("after",), ("after-grpc",), ("before",)]
