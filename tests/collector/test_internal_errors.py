"""An internal error while handling one request (a bug, not bad input) is answered 500 / gRPC
INTERNAL with a clear message and a log line; the connection, the in-flight budget and the
spool are left as they were, so the next request is served and everything acknowledged is stored.
The error is injected at `IngestPipeline.accept`, the call every OTLP request goes through."""

from __future__ import annotations

import http.client
import logging
from typing import Any

import grpc
import pytest
from google.rpc import status_pb2  # type: ignore[import-untyped]
from otlp_builders import SpanSpec, new_span_id, new_trace_id, request
from receiver_clients import grpc_export, post, stored_span_names

PROTOBUF = "application/x-protobuf"


def one_span(trace: str, name: str) -> bytes:
    return request(SpanSpec(trace, new_span_id(), name, 0, 1)).SerializeToString()


def fail_on(sidecar: Any, marker: bytes) -> None:
    """Make the running pipeline raise a RuntimeError on any request whose body holds `marker`."""
    real_accept = sidecar.pipeline.accept

    def accept(body: bytes, *args: Any, **kwargs: Any) -> Any:
        if marker in body:
            raise RuntimeError("injected fault: span table exploded")
        return real_accept(body, *args, **kwargs)

    sidecar.pipeline.accept = accept


def test_an_internal_error_is_a_clear_500_and_the_next_request_is_served(
    collector: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """HTTP protobuf and JSON: 500 with a google.rpc.Status / JSON message naming the failure; on
    the same keep-alive port the next request is acknowledged; requests acknowledged before and
    after are stored, the in-flight budget is whole again, and the sidecar is ready."""
    sidecar = collector
    address = sidecar.http.address
    trace = new_trace_id()
    assert post(address, one_span(trace, "before"))[0] == 200
    fail_on(sidecar, b"boom")
    with caplog.at_level(logging.ERROR, logger="agenttrail.collector.http_app"):
        status, headers, body = post(address, one_span(trace, "boom"))
    assert status == 500
    assert headers["Content-Type"] == PROTOBUF
    message = status_pb2.Status.FromString(body).message
    assert message == "the collector failed on this request: injected fault: span table exploded"
    assert "OTLP/HTTP request failed unexpectedly" in caplog.text
    assert "injected fault" in caplog.text  # the traceback is in the log, for the operator

    json_body = b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "boom"}]}]}]}'
    status, headers, body = post(address, json_body, content_type="application/json")
    assert status == 500
    assert headers["Content-Type"] == "application/json"
    assert b"injected fault" in body

    assert sidecar.http.limiter.held == 0  # the failed requests' reservations were released
    assert post(address, one_span(trace, "after"))[0] == 200
    assert stored_span_names(sidecar, trace) == ["after", "before"]
    healthy, detail = sidecar.health()
    assert healthy, detail


@pytest.mark.grpc_in_serve  # the fault is injected into serve's pipeline; the process has its own
def test_an_internal_error_over_grpc_is_internal_with_a_message(collector: Any) -> None:
    """gRPC: INTERNAL with the same message (never a dropped call); the next export succeeds."""
    sidecar = collector
    trace = new_trace_id()
    fail_on(sidecar, b"boom")
    with pytest.raises(grpc.RpcError) as caught:
        grpc_export(sidecar.grpc_address, one_span(trace, "boom"))
    assert caught.value.code() == grpc.StatusCode.INTERNAL
    assert "injected fault: span table exploded" in (caught.value.details() or "")
    grpc_export(sidecar.grpc_address, one_span(trace, "after"))
    assert sidecar.grpc.limiter.held == 0
    assert stored_span_names(sidecar, trace) == ["after"]


def test_a_read_route_that_fails_is_a_clear_500(collector: Any) -> None:
    """A read endpoint raising an unexpected error answers 500 naming the path and the error;
    the other routes keep working."""
    sidecar = collector

    def broken(params: dict[str, str]) -> list[dict[str, Any]]:
        raise KeyError("column vanished")

    sidecar.add_read_route("/api/v1/broken", broken)
    host, port = sidecar.http.address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.request("GET", "/api/v1/broken")
    response = connection.getresponse()
    body = response.read()
    assert response.status == 500
    assert b"/api/v1/broken failed" in body
    assert b"column vanished" in body
    connection.request("GET", "/readyz")  # same keep-alive connection
    response = connection.getresponse()
    assert response.status == 200, response.read()
    connection.close()
