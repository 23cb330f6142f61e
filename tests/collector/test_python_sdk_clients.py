"""The OpenTelemetry Python SDK's own exporters against a live sidecar: OTLP/gRPC and
OTLP/HTTP protobuf (plain and gzip), and OTLP/HTTP JSON encoded from the SDK's spans and posted
chunked (the Python SDK has no JSON exporter); each run reads back as the right trajectory."""

from __future__ import annotations

import base64
import http.client
import json
from collections.abc import Sequence
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import format_trace_id

from agenttrail.collector.queries import TrajectoryFilter, query_trajectories


def agent_run(task: str) -> Sequence[ReadableSpan]:
    """An invoke_agent span with two execute_tool children, recorded by the real SDK."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "py-support-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("agenttrail-python-peer")
    with tracer.start_as_current_span(
        "invoke_agent py-agent",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "py-agent",
            "agenttrail.task": task,
        },
    ):
        for index, tool in enumerate(["lookup_order", "issue_refund"]):
            with tracer.start_as_current_span(
                f"execute_tool {tool}",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.id": f"call-{index}",
                    "gen_ai.tool.type": "function",
                    "gen_ai.tool.call.arguments": json.dumps({"order_id": 42}),
                },
            ):
                pass
    provider.shutdown()
    return memory.get_finished_spans()


def otlp_json(spans: Sequence[ReadableSpan]) -> bytes:
    """OTLP/JSON as the spec writes it: ids in hex (protobuf's JSON mapping gives base64)."""

    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                key: base64.b64decode(value).hex()
                if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str)
                else fix(value)
                for key, value in node.items()
            }
        if isinstance(node, list):
            return [fix(item) for item in node]
        return node

    return json.dumps(fix(json_format.MessageToDict(encode_spans(spans)))).encode()


def trace_of(spans: Sequence[ReadableSpan]) -> str:
    context = spans[0].context
    assert context is not None
    return format_trace_id(context.trace_id)


def test_python_sdk_runs_over_grpc_http_protobuf_and_json_become_trajectories(start_sidecar: Any) -> None:
    """gRPC, HTTP protobuf (plain and gzip) and chunked HTTP JSON from the Python SDK are all
    acknowledged, and each run is rebuilt with its two tool calls in order."""
    sidecar = start_sidecar()
    traces: dict[str, str] = {}

    spans = agent_run("grpc")
    grpc_exporter = GrpcExporter(endpoint=f"http://{sidecar.grpc_address}", insecure=True)
    assert grpc_exporter.export(spans) == SpanExportResult.SUCCESS
    grpc_exporter.shutdown()
    traces[trace_of(spans)] = "grpc"

    for compression in (Compression.NoCompression, Compression.Gzip):
        task = f"http-protobuf-{compression.value}"
        spans = agent_run(task)
        http_exporter = HttpExporter(
            endpoint=f"http://{sidecar.http.address}/v1/traces", compression=compression
        )
        assert http_exporter.export(spans) == SpanExportResult.SUCCESS
        http_exporter.shutdown()
        traces[trace_of(spans)] = task

    spans = agent_run("http-json")
    body = otlp_json(spans)
    host, port = sidecar.http.address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.request(
        "POST",
        "/v1/traces",
        body=iter([body[: len(body) // 2], body[len(body) // 2 :]]),
        headers={"Content-Type": "application/json"},
        encode_chunked=True,
    )
    response = connection.getresponse()
    assert (response.status, json.loads(response.read())) == (200, {})
    connection.close()
    traces[trace_of(spans)] = "http-json"

    assert sidecar.wait_until_assembled(60)
    for trace_id, task in traces.items():
        runs = query_trajectories(sidecar.store, TrajectoryFilter(trace_id=trace_id))
        assert [(run["agent"], run["task"]) for run in runs] == [("py-agent", task)]
        assert [call["name"] for call in runs[0]["tool_calls"]] == ["lookup_order", "issue_refund"]
