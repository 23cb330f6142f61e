"""The receiver's checks as they were before its per-span fast path (2026-11-27), to compare with.

`canonical.canonicalize` now reads a span only as far as its bytes or its trace leave a question
open; `tests/collector/test_canonical.py` holds its results equal to this plain version's (the
same spans kept, cut and marked, the same reasons, the same traces and agent flags).
"""

from __future__ import annotations

import time
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from agenttrail.collector.canonical import NORMALIZED, STORABLE, SpanLimits
from agenttrail.collector.otlp_decode import (
    MAX_TIMESTAMP_NS,
    DecodedBatch,
    any_value_to_str,
    is_agent_span,
    span_problem,
)
from agenttrail.instrumentation import attributes as attr


def _cap(container: Any, limit: int, what: str, notes: list[str]) -> None:
    count = len(container)
    if count > limit:
        del container[limit:]
        notes.append(f"kept the first {limit} of {count} {what}")


def reference_canonicalize(
    request: Any, limits: SpanLimits = STORABLE, now_ns: int | None = None
) -> DecodedBatch:
    """Check a parsed request in place: remove rejected spans, normalise the rest, drop unknown
    fields. Afterwards `request.SerializeToString()` is the canonical record to spool."""
    first, last = limits.window(time.time_ns() if now_ns is None else now_ns)
    max_name = limits.max_name_chars
    max_attributes = limits.max_attributes
    batch = DecodedBatch()
    request.DiscardUnknownFields()
    for resource_spans in request.resource_spans:
        resource_attributes = resource_spans.resource.attributes
        if len(resource_attributes) > max_attributes:
            notes: list[str] = []
            _cap(resource_attributes, max_attributes, "resource attributes", notes)
            resource_attributes.add(key=NORMALIZED, value=AnyValue(string_value="; ".join(notes)))
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope
            if len(scope.name) > max_name:
                scope.name = scope.name[:max_name]
            if len(scope.version) > max_name:
                scope.version = scope.version[:max_name]
            spans = scope_spans.spans
            rejected: list[int] = []
            for index, span in enumerate(spans):
                problem = span_problem(span, first, last)
                if problem is not None:
                    batch.reject(f"span {span.name[:80]!r}: {problem}")
                    rejected.append(index)
                    continue
                notes = []
                if len(span.name) > max_name:
                    notes.append(f"name cut from {len(span.name)} to {max_name} characters")
                    span.name = span.name[:max_name]
                span_attributes = span.attributes
                if len(span_attributes) > max_attributes:
                    _cap(span_attributes, max_attributes, "attributes", notes)
                if span.events:
                    _normalise_events(span, limits, notes)
                if span.links:
                    _cap(span.links, limits.max_links, "links", notes)
                    for link in span.links:
                        if len(link.attributes) > max_attributes:
                            _cap(link.attributes, max_attributes, "link attributes", notes)
                operation = span_kind = None
                for kv in span_attributes:
                    key = kv.key
                    if key == attr.GEN_AI_OPERATION_NAME:
                        operation = kv.value
                    elif key == attr.OPENINFERENCE_SPAN_KIND:
                        span_kind = kv.value
                if notes:
                    span_attributes.add(key=NORMALIZED, value=AnyValue(string_value="; ".join(notes)))
                    batch.normalized += 1
                batch.accept_span(
                    span.trace_id.hex(),
                    is_agent_span(
                        None if operation is None else any_value_to_str(operation),
                        None if span_kind is None else any_value_to_str(span_kind),
                    ),
                )
            for index in reversed(rejected):
                del spans[index]
    return batch


def _normalise_events(span: Any, limits: SpanLimits, notes: list[str]) -> None:
    _cap(span.events, limits.max_events, "events", notes)
    clamped = 0
    for event in span.events:
        if event.time_unix_nano > MAX_TIMESTAMP_NS:
            event.time_unix_nano = span.start_time_unix_nano
            clamped += 1
        if len(event.name) > limits.max_name_chars:
            event.name = event.name[: limits.max_name_chars]
            notes.append("event name cut")
        if len(event.attributes) > limits.max_attributes:
            _cap(event.attributes, limits.max_attributes, "event attributes", notes)
    if clamped:
        notes.append(f"{clamped} event time(s) past 2262 clamped to the span start")
