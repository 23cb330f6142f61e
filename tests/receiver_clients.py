"""Clients for the sidecar's receivers in tests: one HTTP POST, one gRPC export, the OTel SDK
exporting to a sidecar, stored spans."""

from __future__ import annotations

import contextlib
import http.client
from collections.abc import Iterator
from typing import Any

import grpc


def post(
    address: str,
    body: bytes,
    content_type: str = "application/x-protobuf",
    headers: dict[str, str] | None = None,
    path: str = "/v1/traces",
) -> tuple[int, http.client.HTTPMessage, bytes]:
    """One POST on a fresh connection: status, headers (case-insensitive, as in HTTP), body."""
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": content_type, **(headers or {})})
        response = connection.getresponse()
        return response.status, response.headers, response.read()
    finally:
        connection.close()


def grpc_export(address: str, body: bytes, metadata: tuple[tuple[str, str], ...] = ()) -> bytes:
    with grpc.insecure_channel(address) as channel:
        call = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=None,
            response_deserializer=None,
        )
        result: bytes = call(body, timeout=30, metadata=metadata)
        return result


def stored_span_names(sidecar: Any, trace_id: str) -> list[str]:
    assert sidecar.flush(30)
    rows = sidecar.store.query(
        "SELECT SpanName FROM otel_traces WHERE TraceId = {t:String} ORDER BY SpanName", {"t": trace_id}
    )
    return [row[0] for row in rows]


@contextlib.contextmanager
def sdk_exporting_to(sidecar: Any, service_name: str) -> Iterator[Any]:
    """The agenttrail decorators on a real OTel SDK provider exporting over OTLP/gRPC to `sidecar`;
    the provider (flush with `force_flush`) is shut down on exit."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from agenttrail.instrumentation import configure

    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"http://{sidecar.grpc_address}", insecure=True))
    )
    configure(tracer_provider=provider)
    try:
        yield provider
    finally:
        provider.shutdown()
