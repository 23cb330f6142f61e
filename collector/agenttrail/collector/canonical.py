"""What an acknowledgement covers: the checked, canonical form of a request.

The receiver parses a request, checks every span against `SpanLimits`, removes the spans it
rejects (reported through `partial_success`), normalises values both store paths could not hold
alike (cut, clamped, and marked on the span with `NORMALIZED`), drops unknown fields, and spools
the re-serialised message, never the client's bytes. So ClickHouse's `Protobuf` reader and the
Python renderer only ever see bytes this module approved, and they store the same rows.

Rejected per span (the reason goes back in `partial_success`):
- ids of the wrong length or all zero, a missing name or start time;
- a start time outside the accepted window (`span_max_age_days` back, `span_max_future_s`
  ahead of the receiver's clock; never at or past 2^63 ns, where DateTime64(9) ends and an
  unsigned value would wrap negative), an end before the start or past the window.

Normalised and marked:
- names (span, event, scope) longer than `max_name_chars` are cut;
- more than `max_attributes` attributes (span, event, link, resource), `max_events` events or
  `max_links` links: the first ones are kept;
- an event time at or past 2^63 ns is clamped to the span's start;
- an attribute value nested deeper than `MAX_VALUE_DEPTH` levels is replaced by a marker text
  (`otlp_depth`, applied while parsing).

This runs on every request, in Python, under the GIL the whole sidecar shares, so a span is read
only as far as a question stays open: the checks read its ids, name and times; its attribute,
link and event lists only when it has events or its bytes (`otlp_wire`) are large enough to hold
more than the limits; its attributes, for the agent flag, only when its bytes hold an agent-span
value and its trace has no agent span yet. `tests/canonical_reference.py` keeps the plain
reading of every span, and `tests/collector/test_canonical.py` holds both equal.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from agenttrail.collector.otlp_decode import (
    MAX_TIMESTAMP_NS,
    ZERO_SPAN_ID,
    ZERO_TRACE_ID,
    DecodedBatch,
    any_value_to_str,
    is_agent_span,
    span_problem,
)
from agenttrail.collector.otlp_wire import SpanLayout, span_layout
from agenttrail.instrumentation import attributes as attr

NORMALIZED = "agenttrail.collector.normalized"
"""Span attribute naming what the collector cut or clamped on this span before storing it."""
_DAY_NS = 86_400 * 1_000_000_000


@dataclass(frozen=True, slots=True)
class SpanLimits:
    """What the receiver accepts. `None` ages mean no window: only what DateTime64(9) holds."""

    max_age_days: float | None = 3650.0
    max_future_s: float | None = 86_400.0
    max_name_chars: int = 1024
    max_attributes: int = 1000
    max_events: int = 1000
    max_links: int = 1000

    def window(self, now_ns: int) -> tuple[int, int]:
        """[first, last] start time in ns accepted at `now_ns`."""
        first = 1 if self.max_age_days is None else max(1, now_ns - int(self.max_age_days * _DAY_NS))
        last = (
            MAX_TIMESTAMP_NS
            if self.max_future_s is None
            else min(MAX_TIMESTAMP_NS, now_ns + int(self.max_future_s * 1e9))
        )
        return first, last

    def partitions_per_insert(self) -> int:
        """How many day partitions one insert may touch: the window's days, plus slack for a
        segment replayed a month after it was accepted; 0 (no limit) without a window."""
        if self.max_age_days is None or self.max_future_s is None:
            return 0
        return int(self.max_age_days + self.max_future_s / 86_400) + 32


# What replay and the store paths hold to: no clock window, only what the columns can hold.
STORABLE = SpanLimits(max_age_days=None, max_future_s=None)


def _cap(container: Any, limit: int, what: str, notes: list[str]) -> None:
    count = len(container)
    if count > limit:
        del container[limit:]
        notes.append(f"kept the first {limit} of {count} {what}")


def canonicalize(
    request: Any, limits: SpanLimits = STORABLE, now_ns: int | None = None, *, wire: bytes | None = None
) -> DecodedBatch:
    """Check a parsed request in place: remove rejected spans, normalise the rest, drop unknown
    fields. Afterwards `request.SerializeToString()` is the canonical record to spool.

    `wire`, the binary body `request` was parsed from (if it was), lets the spans its bytes rule
    out skip the attribute reads (`otlp_wire`): the result is the same, at a fraction of the cost.
    """
    window = limits.window(time.time_ns() if now_ns is None else now_ns)
    max_name = limits.max_name_chars
    max_attributes = limits.max_attributes
    layout = None if wire is None else span_layout(wire)
    batch = DecodedBatch()
    traces: dict[bytes, bool] = {}  # by id bytes, in arrival order; hex once per trace below
    flat = 0  # index over the whole request of the scope's first span, as `layout` counts
    scope_index = 0
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
            count = len(spans)
            if layout is not None and (
                scope_index >= len(layout.per_scope) or layout.per_scope[scope_index] != count
            ):
                layout = None  # the walk and the parser disagree: read every span from here on
            _check_spans(spans, limits, window, layout, flat, batch, traces)
            flat += count
            scope_index += 1
    batch.traces = {trace_id.hex(): has_agent for trace_id, has_agent in traces.items()}
    return batch


def _check_spans(
    spans: Any,
    limits: SpanLimits,
    window: tuple[int, int],
    layout: SpanLayout | None,
    flat: int,
    batch: DecodedBatch,
    traces: dict[bytes, bool],
) -> None:
    """Check one scope's spans (remove the rejected, normalise the rest) and note their traces.

    The hot loop of the receivers' own Python: each read of a span's field costs a few hundred
    ns, so a span is read only as far as its bytes (`layout`) or its trace leave a question open.
    """
    first, last = window
    max_name = limits.max_name_chars
    max_attributes = limits.max_attributes
    # A span of fewer bytes than this holds too few attributes, links or link attributes to cap.
    small = 2 * min(max_attributes, limits.max_links) + 2
    starts, ends = ([], []) if layout is None else (layout.starts, layout.ends)
    rejected: list[int] = []
    for index, span in enumerate(spans):
        trace_id = span.trace_id
        span_id = span.span_id
        name = span.name
        start = span.start_time_unix_nano
        end = span.end_time_unix_nano
        # The same conditions as span_problem's, which is asked only to word the reason.
        if (
            len(trace_id) != 16
            or trace_id == ZERO_TRACE_ID
            or len(span_id) != 8
            or span_id == ZERO_SPAN_ID
            or len(span.parent_span_id) not in (0, 8)
            or not name
            or start < first
            or end < start
            or end > last
        ):
            batch.reject(f"span {name[:80]!r}: {span_problem(span, first, last)}")
            rejected.append(index)
            continue
        at = flat + index
        if (
            len(name) > max_name
            or span.events
            or (
                (layout is None or ends[at] - starts[at] >= small)
                and (len(span.attributes) > max_attributes or span.links)
            )
        ):
            notes = _normalise(span, limits)
            if notes:
                span.attributes.add(key=NORMALIZED, value=AnyValue(string_value="; ".join(notes)))
                batch.normalized += 1
        batch.accepted += 1
        known = traces.get(trace_id)
        if known is None:
            traces[trace_id] = known = False
        if not known and (layout is None or layout.may_be_agent(at)) and _is_agent(span.attributes):
            traces[trace_id] = True
    for index in reversed(rejected):
        del spans[index]


def _normalise(span: Any, limits: SpanLimits) -> list[str]:
    """Cut what is over the limits on one span; what was cut, in words (empty: nothing)."""
    notes: list[str] = []
    max_name = limits.max_name_chars
    max_attributes = limits.max_attributes
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
    return notes


def _is_agent(span_attributes: Any) -> bool:
    """Whether a span's attributes make it an agent-run span (the last value of a key counts)."""
    operation = span_kind = None
    for kv in span_attributes:
        key = kv.key
        if key == attr.GEN_AI_OPERATION_NAME:
            operation = kv.value
        elif key == attr.OPENINFERENCE_SPAN_KIND:
            span_kind = kv.value
    return is_agent_span(
        None if operation is None else any_value_to_str(operation),
        None if span_kind is None else any_value_to_str(span_kind),
    )


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
