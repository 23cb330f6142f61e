"""TLS on both receivers: a real handshake with a certificate made in the test.

A client that trusts the certificate is served; one that trusts another certificate, or the
system's authorities, or speaks plaintext, gets nothing.
"""

from __future__ import annotations

import http.client
import ssl
from pathlib import Path
from typing import Any

import grpc
import pytest
from otlp_builders import agent_span, new_span_id, new_trace_id, request
from tls_certs import Certificate, self_signed

from agenttrail.api.v1 import evaluation_pb2 as pb
from agenttrail.api.v1.evaluation_pb2_grpc import EvaluationServiceStub

pytestmark = pytest.mark.slow

OTLP_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@pytest.fixture
def certs(tmp_path: Path) -> tuple[Certificate, Certificate]:
    """The server's certificate and an unrelated one (an attacker's, or a stale one)."""
    return self_signed(tmp_path / "tls", "server"), self_signed(tmp_path / "tls", "other")


@pytest.fixture
def tls_sidecar(start_sidecar: Any, certs: tuple[Certificate, Certificate]) -> Any:
    server, _ = certs
    return start_sidecar(tls_cert=str(server.cert_file), tls_key=str(server.key_file))


def https(address: str, context: ssl.SSLContext, method: str, path: str, body: bytes | None = None) -> int:
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=30)
    try:
        connection.request(method, path, body=body, headers={"Content-Type": "application/x-protobuf"})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def plaintext_post(address: str, body: bytes) -> int:
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request(
            "POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"}
        )
        return connection.getresponse().status
    finally:
        connection.close()


def stored_traces(sidecar: Any, *trace_ids: str) -> set[str]:
    assert sidecar.flush(30)
    rows = sidecar.store.query(
        "SELECT DISTINCT TraceId FROM otel_traces WHERE has({ids:Array(String)}, TraceId)",
        {"ids": list(trace_ids)},
    )
    return {row[0] for row in rows}


def test_http_serves_a_client_that_trusts_the_certificate(
    tls_sidecar: Any, certs: tuple[Certificate, Certificate]
) -> None:
    """Over HTTPS with the server's certificate trusted, OTLP is stored and health answers."""
    server, _ = certs
    context = ssl.create_default_context(cafile=str(server.cert_file))
    trace = new_trace_id()
    body = request(agent_span(trace, new_span_id(), 0, 1)).SerializeToString()
    assert https(tls_sidecar.http.address, context, "POST", "/v1/traces", body) == 200
    assert https(tls_sidecar.http.address, context, "GET", "/healthz") == 200
    assert stored_traces(tls_sidecar, trace) == {trace}


def test_http_client_that_does_not_trust_the_certificate_fails(
    tls_sidecar: Any, certs: tuple[Certificate, Certificate]
) -> None:
    """Trusting another certificate, or only the system's authorities, the handshake fails; plaintext
    gets no answer; and nothing those clients sent is stored."""
    _, other = certs
    trace = new_trace_id()
    body = request(agent_span(trace, new_span_id(), 0, 1)).SerializeToString()
    for context in (ssl.create_default_context(cafile=str(other.cert_file)), ssl.create_default_context()):
        with pytest.raises(ssl.SSLCertVerificationError):
            https(tls_sidecar.http.address, context, "POST", "/v1/traces", body)
    with pytest.raises((OSError, http.client.HTTPException)):
        plaintext_post(tls_sidecar.http.address, body)
    assert stored_traces(tls_sidecar, trace) == set()


def test_grpc_serves_a_client_that_trusts_the_certificate(
    tls_sidecar: Any, certs: tuple[Certificate, Certificate]
) -> None:
    """Over TLS with the server's certificate trusted, OTLP Export is stored and the API answers."""
    server, _ = certs
    trace = new_trace_id()
    body = request(agent_span(trace, new_span_id(), 0, 1)).SerializeToString()
    credentials = grpc.ssl_channel_credentials(root_certificates=server.cert_pem)
    with grpc.secure_channel(tls_sidecar.grpc_address, credentials) as channel:
        export = channel.unary_unary(OTLP_EXPORT, request_serializer=None, response_deserializer=None)
        assert export(body, timeout=30) == b""
        listed = EvaluationServiceStub(channel).ListScores(pb.ListScoresRequest(), timeout=30)
        assert not listed.scores
    assert stored_traces(tls_sidecar, trace) == {trace}


def test_grpc_client_that_does_not_trust_the_certificate_fails(
    tls_sidecar: Any, certs: tuple[Certificate, Certificate]
) -> None:
    """Trusting another certificate, or speaking plaintext, the call fails UNAVAILABLE; nothing stored."""
    _, other = certs
    trace = new_trace_id()
    body = request(agent_span(trace, new_span_id(), 0, 1)).SerializeToString()
    channels = (
        grpc.secure_channel(
            tls_sidecar.grpc_address, grpc.ssl_channel_credentials(root_certificates=other.cert_pem)
        ),
        grpc.insecure_channel(tls_sidecar.grpc_address),
    )
    for channel in channels:
        with channel:
            export = channel.unary_unary(OTLP_EXPORT, request_serializer=None, response_deserializer=None)
            with pytest.raises(grpc.RpcError) as caught:
                export(body, timeout=10)
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert stored_traces(tls_sidecar, trace) == set()


def test_plain_sidecar_is_not_mistaken_for_tls(
    start_sidecar: Any, certs: tuple[Certificate, Certificate]
) -> None:
    """The trusting clients above fail against a sidecar without TLS: the handshake is what they test."""
    server, _ = certs
    sidecar = start_sidecar()
    context = ssl.create_default_context(cafile=str(server.cert_file))
    with pytest.raises(ssl.SSLError):
        https(sidecar.http.address, context, "GET", "/healthz")
    credentials = grpc.ssl_channel_credentials(root_certificates=server.cert_pem)
    with grpc.secure_channel(sidecar.grpc_address, credentials) as channel:
        export = channel.unary_unary(OTLP_EXPORT, request_serializer=None, response_deserializer=None)
        with pytest.raises(grpc.RpcError) as caught:
            export(b"", timeout=10)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
