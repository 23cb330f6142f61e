"""The HTTP port as a production server: chunked bodies, keep-alive, TLS handshakes per
connection, head and body timeouts, the connection cap, the in-flight byte budget, health the
way Kubernetes asks for it, mounted ASGI apps and a graceful stop. Real sockets on loopback."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import subprocess
import threading
import time
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from otlp_builders import SpanSpec, new_span_id, new_trace_id, request
from receiver_clients import grpc_export, post, stored_span_names

PROTOBUF_HEADERS = {"Content-Type": "application/x-protobuf"}


def one_span(trace: str, name: str) -> bytes:
    return request(SpanSpec(trace, new_span_id(), name, 0, 1)).SerializeToString()


def connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=30)


def read_response(sock: socket.socket) -> tuple[int, bytes]:
    """Status and raw bytes of one response read from a raw socket (until the body is whole)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(head.split(b" ", 2)[1]), head + b"\r\n\r\n" + body


def get(address: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        body = response.read()
        if response.headers.get_content_type() != "application/json":
            return response.status, {"text": body.decode(errors="replace")}
        return response.status, json.loads(body)
    finally:
        connection.close()


def test_chunked_request_body_is_stored(start_sidecar: Any) -> None:
    """A body sent with Transfer-Encoding: chunked (as the OTel JS SDK does) is read and stored;
    the stdlib server answered 400 "chunked request bodies are not supported"."""
    sidecar = start_sidecar()
    trace = new_trace_id()
    body = one_span(trace, "chunked")
    host, port = sidecar.http.address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    pieces = iter([body[:7], body[7:20], body[20:]])
    connection.request("POST", "/v1/traces", body=pieces, headers=PROTOBUF_HEADERS, encode_chunked=True)
    response = connection.getresponse()
    assert response.status == 200, response.read()
    assert ExportTraceServiceResponse.FromString(response.read()).partial_success.rejected_spans == 0
    assert stored_span_names(sidecar, trace) == ["chunked"]


def test_chunked_body_over_the_limit_is_refused_while_reading(start_sidecar: Any) -> None:
    """A chunked body has no Content-Length: the limit is enforced on the bytes as they arrive."""
    sidecar = start_sidecar(max_body_bytes=50_000)
    host, port = sidecar.http.address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    pieces = iter([b"x" * 20_000] * 4)
    connection.request("POST", "/v1/traces", body=pieces, headers=PROTOBUF_HEADERS, encode_chunked=True)
    response = connection.getresponse()
    assert response.status == 413
    assert b"50000 byte limit" in response.read()


def test_keep_alive_serves_several_requests_on_one_connection(start_sidecar: Any) -> None:
    """Requests reuse one TCP connection: the server neither closes it nor asks to."""
    sidecar = start_sidecar()
    sock = connect(sidecar.http.address)
    trace = new_trace_id()
    for name in ("first", "second", "third"):
        body = one_span(trace, name)
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        status, raw = read_response(sock)
        assert status == 200
        assert b"connection: close" not in raw.lower()
    sock.close()
    assert stored_span_names(sidecar, trace) == ["first", "second", "third"]


def test_slow_request_head_is_cut_off_and_others_are_served(start_sidecar: Any) -> None:
    """A client that never finishes its request head is disconnected after the head timeout,
    and a silent connection too; meanwhile other clients are served."""
    sidecar = start_sidecar(http_header_timeout_s=1.0)
    slow = connect(sidecar.http.address)
    slow.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n")
    silent = connect(sidecar.http.address)
    assert post(sidecar.http.address, one_span(new_trace_id(), "meanwhile"))[0] == 200
    started = time.monotonic()
    slow.settimeout(10)
    silent.settimeout(10)
    assert slow.recv(100) == b""  # closed by the server
    assert silent.recv(100) == b""
    assert time.monotonic() - started < 8


def test_slow_body_gets_408_after_the_body_timeout(start_sidecar: Any) -> None:
    """A client that sends the head but not the whole body gets 408 once the body timeout passes."""
    sidecar = start_sidecar(http_body_timeout_s=1.0)
    sock = connect(sidecar.http.address)
    sock.sendall(
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        b"Content-Length: 1000\r\n\r\n0123456789"
    )
    sock.settimeout(10)
    status, raw = read_response(sock)
    assert status == 408
    assert b"did not arrive within 1 s" in raw


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"),
            *("-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)


def test_idle_tls_connection_does_not_block_other_clients(
    start_sidecar: Any, certificate: tuple[str, str]
) -> None:
    """A TCP connection to the HTTPS port that never starts its TLS handshake leaves the port
    serving: handshakes run per connection, not on the accepting thread."""
    cert, key = certificate
    sidecar = start_sidecar(tls_cert=cert, tls_key=key)
    idle = [connect(sidecar.http.address) for _ in range(3)]
    context = ssl.create_default_context(cafile=cert)
    host, port = sidecar.http.address.rsplit(":", 1)
    trace = new_trace_id()
    connection = http.client.HTTPSConnection(host, int(port), timeout=5, context=context)
    connection.request("POST", "/v1/traces", body=one_span(trace, "over-tls"), headers=PROTOBUF_HEADERS)
    assert connection.getresponse().status == 200
    connection.close()
    for sock in idle:
        sock.close()
    assert stored_span_names(sidecar, trace) == ["over-tls"]


def test_connections_past_the_limit_get_503(start_sidecar: Any) -> None:
    """Past http_max_connections open connections, a new one is answered 503 + Retry-After and
    closed; once one closes, new connections are served again."""
    sidecar = start_sidecar(http_max_connections=2)
    held = [connect(sidecar.http.address) for _ in range(2)]
    time.sleep(0.2)
    extra = connect(sidecar.http.address)
    status, raw = read_response(extra)
    assert status == 503
    assert b"retry-after: 1" in raw.lower()
    held.pop().close()
    time.sleep(0.3)
    assert post(sidecar.http.address, one_span(new_trace_id(), "after"))[0] == 200
    for sock in held:
        sock.close()


@pytest.mark.grpc_in_serve  # one budget for both receivers in serve; the receiver process has its own
def test_in_flight_byte_budget_refuses_before_reading_and_across_receivers(start_sidecar: Any) -> None:
    """While one request holds most of the in-flight byte budget, a request that does not fit is
    refused at once (HTTP 429 + Retry-After, gRPC UNAVAILABLE + retry-after), a small one is not;
    the held request is acknowledged when its body completes."""
    sidecar = start_sidecar(max_inflight_bytes=100_000, http_body_timeout_s=30)
    trace = new_trace_id()
    body = one_span(trace, "held")
    held = connect(sidecar.http.address)
    # ~90 kB that decode: the span, then empty ResourceSpans (field 1, length 0) as padding.
    padded = body + b"\n\x00" * ((90_000 - len(body)) // 2)
    held.sendall(
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(padded), padded[:100])
    )
    deadline = time.monotonic() + 10
    while sidecar.http.limiter.held < len(padded) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sidecar.http.limiter.held == len(padded)
    big = request(
        SpanSpec(trace, new_span_id(), "big", 0, 1, attributes={"pad": "y" * 20_000})
    ).SerializeToString()
    status, headers, _ = post(sidecar.http.address, big)
    assert status == 429
    assert headers["Retry-After"] == "1"
    with pytest.raises(grpc.RpcError) as caught:
        grpc_export(sidecar.grpc_address, big)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert ("retry-after", "1") in (caught.value.trailing_metadata() or ())
    assert post(sidecar.http.address, one_span(trace, "small"))[0] == 200
    held.sendall(padded[100:])
    status, _ = read_response(held)
    assert status == 200
    assert sidecar.http.limiter.held == 0
    assert stored_span_names(sidecar, trace) == ["held", "small"]


def test_health_endpoints_and_their_auth_setting(start_sidecar: Any) -> None:
    """/livez and /readyz (and /healthz, readiness) answer without the token by default, while
    the other routes need it."""
    open_health = start_sidecar(bearer_token="s3cret")
    for path in ("/livez", "/readyz", "/healthz"):
        status, body = get(open_health.http.address, path)
        assert status == 200, path
        assert body["status"] == "ok"
    assert get(open_health.http.address, "/readyz")[1]["store"] == "ok"
    assert get(open_health.http.address, "/livez")[1]["dead_workers"] == []
    assert get(open_health.http.address, "/api/v1/trajectories")[0] == 401


def test_health_auth_on_requires_the_token(start_sidecar: Any) -> None:
    """With health_auth on, /livez, /readyz and /healthz need the bearer token too."""
    guarded = start_sidecar(bearer_token="s3cret", health_auth=True)
    for path in ("/livez", "/readyz", "/healthz"):
        assert get(guarded.http.address, path)[0] == 401, path
        assert get(guarded.http.address, path, {"Authorization": "Bearer s3cret"})[0] == 200, path


def test_readiness_fails_when_the_store_is_down_liveness_does_not(start_sidecar: Any) -> None:
    """With inserts failing, /readyz says 503 (store down) while /livez stays 200."""
    sidecar = start_sidecar(max_queue_spans=1, flush_interval_s=0.01)
    sidecar.store.command("DROP TABLE otel_traces")
    post(sidecar.http.address, one_span(new_trace_id(), "x"))
    deadline = time.monotonic() + 10
    while not sidecar.pipeline.store_down and time.monotonic() < deadline:
        time.sleep(0.05)
    status, body = get(sidecar.http.address, "/readyz")
    assert (status, body["store"]) == (503, "down")
    assert get(sidecar.http.address, "/livez")[0] == 200


def test_mounted_asgi_app_is_served_under_its_prefix(start_sidecar: Any) -> None:
    """An ASGI app mounted with Sidecar.mount_app gets the requests under its prefix, before and
    after start, and sees the sidecar's token through Sidecar.config."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    def make_app(name: str, token: str | None) -> Starlette:
        async def hello(request: Request) -> JSONResponse:
            authorized = request.headers.get("authorization") == f"Bearer {token}"
            return JSONResponse({"app": name, "path": request.url.path, "authorized": authorized})

        return Starlette(routes=[Route("/hello", hello)])

    sidecar = start_sidecar(bearer_token="s3cret")
    sidecar.mount_app("/console", make_app("console", sidecar.config.bearer_token))
    status, body = get(sidecar.http.address, "/console/hello", {"Authorization": "Bearer s3cret"})
    assert status == 200
    assert body == {"app": "console", "path": "/console/hello", "authorized": True}
    assert get(sidecar.http.address, "/console/nothing")[0] == 404
    assert get(sidecar.http.address, "/console/hello")[1]["authorized"] is False
    # the prefix typed without its slash (a browser's "/console", an MCP client's "/mcp") is sent
    # to the app's root, a POST staying a POST (307) and the query kept
    host, port = sidecar.http.address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request("POST", "/console?x=1", body=b"{}")
    response = connection.getresponse()
    assert (response.status, response.getheader("location")) == (307, "/console/?x=1")
    connection.close()


def test_stop_finishes_requests_in_flight(start_sidecar: Any) -> None:
    """stop() lets a request whose body is still arriving finish: it is acknowledged and stored."""
    sidecar = start_sidecar()
    trace = new_trace_id()
    body = one_span(trace, "in-flight")
    sock = connect(sidecar.http.address)
    sock.sendall(
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body[:5])
    )
    time.sleep(0.3)
    http_receiver = sidecar.http
    stopper = threading.Thread(target=http_receiver.stop)
    stopper.start()
    time.sleep(0.5)
    assert stopper.is_alive()  # waiting for the request in flight
    sock.sendall(body[5:])
    status, _ = read_response(sock)
    assert status == 200
    stopper.join(30)
    assert not stopper.is_alive()
    assert stored_span_names(sidecar, trace) == ["in-flight"]
    sidecar.http = None  # already stopped
    refused = socket.socket()
    host, port = http_receiver.address.rsplit(":", 1)
    with pytest.raises(ConnectionRefusedError):
        refused.connect((host, int(port)))
    refused.close()
