"""Build OTLP requests span by span, for tests that control ids, order and timing exactly."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

BASE_NS = 1_790_000_000_000_000_000


def new_trace_id() -> str:
    return os.urandom(16).hex()


def new_span_id() -> str:
    return os.urandom(8).hex()


@dataclass
class SpanSpec:
    trace_id: str
    span_id: str
    name: str
    start_ms: float
    end_ms: float
    parent: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None  # exception type: status ERROR + exception event

    def to_proto(self) -> Span:
        span = Span(
            trace_id=bytes.fromhex(self.trace_id),
            span_id=bytes.fromhex(self.span_id),
            parent_span_id=bytes.fromhex(self.parent) if self.parent else b"",
            name=self.name,
            kind=Span.SPAN_KIND_INTERNAL,
            start_time_unix_nano=BASE_NS + int(self.start_ms * 1e6),
            end_time_unix_nano=BASE_NS + int(self.end_ms * 1e6),
        )
        for key, value in self.attributes.items():
            span.attributes.append(KeyValue(key=key, value=any_value(value)))
        if self.error:
            span.status.CopyFrom(Status(code=Status.STATUS_CODE_ERROR, message=f"{self.error} happened"))
            span.attributes.append(KeyValue(key="error.type", value=AnyValue(string_value=self.error)))
            event = span.events.add(name="exception", time_unix_nano=span.end_time_unix_nano)
            event.attributes.append(KeyValue(key="exception.type", value=AnyValue(string_value=self.error)))
        return span


def any_value(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    return AnyValue(string_value=json.dumps(value))


def request(*spans: SpanSpec | Span, service: str = "test-svc") -> ExportTraceServiceRequest:
    resource_spans = ResourceSpans()
    resource_spans.resource.attributes.append(
        KeyValue(key="service.name", value=AnyValue(string_value=service))
    )
    scope = ScopeSpans()
    scope.scope.name = "tests"
    for span in spans:
        scope.spans.append(span.to_proto() if isinstance(span, SpanSpec) else span)
    resource_spans.scope_spans.append(scope)
    return ExportTraceServiceRequest(resource_spans=[resource_spans])


def agent_span(trace_id: str, span_id: str, start: float, end: float, **kw: Any) -> SpanSpec:
    name = kw.pop("agent", "bot")
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name, **kw.pop("attributes", {})}
    return SpanSpec(trace_id, span_id, f"invoke_agent {name}", start, end, attributes=attrs, **kw)


def tool_span(
    trace_id: str, span_id: str, parent: str, tool: str, start: float, end: float, **kw: Any
) -> SpanSpec:
    arguments = kw.pop("arguments", {})
    attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.arguments": json.dumps(arguments),
        **kw.pop("attributes", {}),
    }
    return SpanSpec(
        trace_id, span_id, f"execute_tool {tool}", start, end, parent=parent, attributes=attrs, **kw
    )
