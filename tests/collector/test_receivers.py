"""OTLP receivers on loopback: encodings, limits, bad input, auth, overload and store outages."""

from __future__ import annotations

import gzip
import http.client
import json
import time
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from otlp_builders import SpanSpec, agent_span, new_span_id, new_trace_id, request, tool_span
from receiver_clients import grpc_export, post, stored_span_names

from agenttrail.collector.schema import OTEL_TRACES


def mixed_request(trace: str) -> bytes:
    bad = SpanSpec(trace, new_span_id(), "bad", 0, 1).to_proto()
    bad.trace_id = b"short"
    return request(SpanSpec(trace, new_span_id(), "good", 0, 1), bad).SerializeToString()


def test_http_protobuf_partial_success(start_sidecar: Any) -> None:
    """HTTP protobuf: bad spans are reported in partial_success, good ones are stored."""
    sidecar = start_sidecar()
    trace = new_trace_id()
    status, headers, body = post(sidecar.http.address, mixed_request(trace))
    assert status == 200
    assert headers["Content-Type"] == "application/x-protobuf"
    response = ExportTraceServiceResponse.FromString(body)
    assert response.partial_success.rejected_spans == 1
    assert "trace_id" in response.partial_success.error_message
    assert stored_span_names(sidecar, trace) == ["good"]


def test_http_json_gzip_answers_json(start_sidecar: Any) -> None:
    """HTTP JSON with gzip: stored, and the answer is JSON like the request."""
    sidecar = start_sidecar()
    trace, root = new_trace_id(), new_span_id()
    document = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "json-svc"}}]},
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": trace,
                                "spanId": root,
                                "name": "invoke_agent j",
                                "kind": 1,
                                "startTimeUnixNano": "1790000000000000000",
                                "endTimeUnixNano": "1790000000500000000",
                                "attributes": [
                                    {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}
                                ],
                            },
                        ]
                    }
                ],
            }
        ]
    }
    status, headers, body = post(
        sidecar.http.address,
        gzip.compress(json.dumps(document).encode()),
        "application/json",
        {"Content-Encoding": "gzip"},
    )
    assert status == 200, body
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body) == {}
    assert stored_span_names(sidecar, trace) == ["invoke_agent j"]


def test_http_rejects_bad_requests_with_clear_statuses(start_sidecar: Any) -> None:
    """Garbage -> 400, wrong content type -> 415, over the limit -> 413, gzip bomb -> 413, bad path -> 404."""
    sidecar = start_sidecar(max_body_bytes=50_000)
    address = sidecar.http.address
    status, _, body = post(address, b"\xff\xfe garbage")
    assert status == 400
    status, _, body = post(address, b"x", "text/plain")
    assert status == 415
    assert "application/x-protobuf" in json.loads(body)["message"]
    status, _, _ = post(address, b"x" * 60_000)
    assert status == 413
    bomb = gzip.compress(b"\x00" * 5_000_000)
    assert len(bomb) < 50_000
    status, _, body = post(address, bomb, headers={"Content-Encoding": "gzip"})
    assert status == 413
    status, _, _ = post(address, b"{}", "application/json", {"Content-Encoding": "gzip"})
    assert status == 400
    status, _, _ = post(address, b"", path="/v2/other")
    assert status == 404
    status, _, _ = post(address, b"{}", "application/json")
    assert status == 200  # an empty export is valid


def test_grpc_partial_success_and_invalid_argument(start_sidecar: Any) -> None:
    """gRPC: mixed spans -> partial_success; an undecodable body -> INVALID_ARGUMENT with a message."""
    sidecar = start_sidecar()
    trace = new_trace_id()
    response = ExportTraceServiceResponse.FromString(grpc_export(sidecar.grpc_address, mixed_request(trace)))
    assert response.partial_success.rejected_spans == 1
    assert stored_span_names(sidecar, trace) == ["good"]
    with pytest.raises(grpc.RpcError) as caught:
        grpc_export(sidecar.grpc_address, b"\xff\xff\xff")
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "protobuf" in (caught.value.details() or "")


def test_bearer_token_required_when_configured(start_sidecar: Any) -> None:
    """With a bearer token set, requests without it get 401 / UNAUTHENTICATED; with it they pass."""
    sidecar = start_sidecar(bearer_token="s3cret")
    body = request(SpanSpec(new_trace_id(), new_span_id(), "a", 0, 1)).SerializeToString()
    assert post(sidecar.http.address, body)[0] == 401
    assert post(sidecar.http.address, body, headers={"Authorization": "Bearer s3cret"})[0] == 200
    with pytest.raises(grpc.RpcError) as caught:
        grpc_export(sidecar.grpc_address, body)
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    grpc_export(sidecar.grpc_address, body, metadata=(("authorization", "Bearer s3cret"),))


def test_store_down_answers_503_then_recovers_without_loss(start_sidecar: Any) -> None:
    """While ClickHouse fails inserts, spans are spooled; past the queue bound the receivers say
    503 + Retry-After / UNAVAILABLE; once the store is back, everything acknowledged is stored."""
    sidecar = start_sidecar(max_queue_spans=3, flush_interval_s=0.01)
    sidecar.store.command("DROP TABLE otel_traces")  # inserts now fail like an outage
    trace = new_trace_id()
    acknowledged = []
    for index in range(3):
        name = f"span-{index}"
        status, _, _ = post(
            sidecar.http.address, request(SpanSpec(trace, new_span_id(), name, 0, 1)).SerializeToString()
        )
        assert status == 200
        acknowledged.append(name)
    deadline = time.monotonic() + 10
    while not sidecar.pipeline.store_down and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sidecar.pipeline.store_down
    status, headers, _ = post(
        sidecar.http.address, request(SpanSpec(trace, new_span_id(), "x", 0, 1)).SerializeToString()
    )
    assert status == 503
    assert int(headers["Retry-After"]) > 0
    with pytest.raises(grpc.RpcError) as caught:
        grpc_export(
            sidecar.grpc_address, request(SpanSpec(trace, new_span_id(), "y", 0, 1)).SerializeToString()
        )
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    sidecar.store.command(OTEL_TRACES)  # the store comes back
    assert stored_span_names(sidecar, trace) == acknowledged
    assert not sidecar.pipeline.store_down


def test_queue_full_with_healthy_store_answers_429(start_sidecar: Any) -> None:
    """When the queue is full but the store is fine, HTTP says 429 with Retry-After."""
    sidecar = start_sidecar(max_queue_spans=2, flush_interval_s=30, batch_max_spans=1000)
    trace = new_trace_id()
    body = request(SpanSpec(trace, new_span_id(), "a", 0, 1), SpanSpec(trace, new_span_id(), "b", 0, 1))
    assert post(sidecar.http.address, body.SerializeToString())[0] == 200
    status, headers, _ = post(sidecar.http.address, body.SerializeToString())
    assert status == 429
    assert headers["Retry-After"] == "1"


def test_healthz_reports_store_and_queue(start_sidecar: Any) -> None:
    """/healthz answers 200 with the store state and queue depth."""
    sidecar = start_sidecar()
    host, port = sidecar.http.address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request("GET", "/healthz")
    response = connection.getresponse()
    assert response.status == 200
    assert json.loads(response.read())["store"] == "ok"


def test_agent_trace_over_http_is_assembled(start_sidecar: Any) -> None:
    """Spans posted over HTTP become a trajectory readable from the read API."""
    sidecar = start_sidecar()
    trace, root = new_trace_id(), new_span_id()
    body = request(
        agent_span(trace, root, 0, 10), tool_span(trace, new_span_id(), root, "t", 1, 2)
    ).SerializeToString()
    assert post(sidecar.http.address, body)[0] == 200
    assert sidecar.wait_until_assembled(30)
    host, port = sidecar.http.address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request("GET", f"/api/v1/trajectories?trace_id={trace}")
    lines = connection.getresponse().read().decode().splitlines()
    assert [json.loads(line)["tool_calls"][0]["name"] for line in lines] == ["t"]
    connection.request("GET", "/api/v1/trajectories?trace_id=nothex")
    response = connection.getresponse()
    assert response.status == 400
    assert "32 lowercase hex" in json.loads(response.read())["message"]
