"""Acknowledge only what can be stored: the issue-19 reproduction, time windows, normalisation,
per-record isolation and quarantine, and spool write errors."""

from __future__ import annotations

import http.client
import json
import time
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from otlp_builders import SpanSpec, agent_span, new_span_id, new_trace_id, request, tool_span

from agenttrail.collector.canonical import NORMALIZED, SpanLimits, canonicalize
from agenttrail.collector.ingest import IngestPipeline
from agenttrail.collector.otlp_decode import OtlpDecodeError, any_value_to_str, parse_json, parse_protobuf
from agenttrail.collector.otlp_depth import DEEP_VALUE_MARKER
from agenttrail.collector.queries import TrajectoryFilter, query_trajectories
from agenttrail.collector.spool import Spool, _varint

# A copy of the issue's ../shared/repro/clickhouse-refuses.otlp.pb: flipped bytes that Python's
# protobuf parser accepts and ClickHouse's Protobuf input format refuses.
REPRO_BODY = (Path(__file__).parent / "data" / "clickhouse-refuses.otlp.pb").read_bytes()


def post(address: str, body: bytes, content_type: str = "application/x-protobuf") -> tuple[int, bytes]:
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request("POST", "/v1/traces", body=body, headers={"Content-Type": content_type})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def get_json(address: str, path: str) -> tuple[int, Any]:
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def span_at(trace: str, name: str, start_ns: int, end_ns: int) -> Any:
    span = SpanSpec(trace, new_span_id(), name, 0, 1).to_proto()
    span.start_time_unix_nano = start_ns
    span.end_time_unix_nano = end_ns
    return span


def test_issue_19_two_requests_do_not_stop_storage(start_sidecar: Any) -> None:
    """The two-request reproduction: a body ClickHouse's Protobuf reader refuses and a span timed at
    2^64-1 ns, in one batch, no longer wedge the writer: a later valid run is stored and assembled,
    and /healthz does not call the store down."""
    sidecar = start_sidecar(flush_interval_s=1.0)
    status, _ = post(sidecar.http.address, REPRO_BODY)
    assert status == 200
    trace = new_trace_id()
    status, body = post(
        sidecar.http.address, request(span_at(trace, "far-future", 2**64 - 2, 2**64 - 1)).SerializeToString()
    )
    assert status == 200
    response = ExportTraceServiceResponse.FromString(body)
    assert response.partial_success.rejected_spans == 1
    assert "start_time_unix_nano" in response.partial_success.error_message
    later, root = new_trace_id(), new_span_id()
    valid = request(agent_span(later, root, 0, 10), tool_span(later, new_span_id(), root, "after", 1, 2))
    assert post(sidecar.http.address, valid.SerializeToString())[0] == 200
    assert sidecar.wait_until_assembled(60)
    [run] = query_trajectories(sidecar.store, TrajectoryFilter(trace_id=later))
    assert [call["name"] for call in run["tool_calls"]] == ["after"]
    time.sleep(0.3)
    status, health = get_json(sidecar.http.address, "/healthz")
    assert health["store"] == "ok", health
    assert status == 200, health
    # The repro's two good spans (of four: a 1-byte trace id, an end in 2173) were stored too.
    assert sidecar.store.query("SELECT count() FROM otel_traces WHERE SpanName = 'far-future'") == [(0,)]
    assert sidecar.store.query("SELECT count() FROM otel_traces") == [(2 + 2,)]
    assert not list(sidecar.spool_dir().glob("segment-*.spool"))


def now_ns() -> int:
    return time.time_ns()


def test_span_times_outside_the_window_are_rejected_with_the_reason() -> None:
    """Zero, >= 2^63, far past, far future, end before start or past the window: each span is
    rejected on its own with a reason; the good span of the same request is kept."""
    limits = SpanLimits(max_age_days=30, max_future_s=3600)
    trace = new_trace_id()
    now = now_ns()
    day = 86_400 * 10**9
    cases = {
        "zero": (0, 5),
        "wraps": (2**63, 2**63 + 1),
        "top": (2**64 - 2, 2**64 - 1),
        "old": (now - 31 * day, now - 31 * day + 1),
        "ahead": (now + 2 * 3600 * 10**9, now + 2 * 3600 * 10**9 + 1),
        "backwards": (now, now - 1),
        "endless": (now, 2**64 - 1),
    }
    spans = [span_at(trace, name, start, end) for name, (start, end) in cases.items()]
    spans.append(span_at(trace, "good", now - day, now - day + 5))
    message = request(*spans)
    batch = canonicalize(message, limits, now_ns=now)
    assert (batch.accepted, batch.rejected) == (1, len(cases))
    [kept] = [span for rs in message.resource_spans for ss in rs.scope_spans for span in ss.spans]
    assert kept.name == "good"
    response = batch.export_response().partial_success
    assert response.rejected_spans == len(cases)
    assert "outside the accepted window" in response.error_message
    assert "check the client's clock" in response.error_message
    # A sixth and seventh reason are summarised, not listed.
    assert "(and 2 more)" in response.error_message


def test_oversized_values_are_cut_and_marked_not_rejected() -> None:
    """A 1 MB name, 10k attributes, an event timed past 2262: the span is kept, cut to the limits,
    and NORMALIZED says what was done."""
    trace = new_trace_id()
    span = span_at(trace, "x" * 1_000_000, now_ns(), now_ns() + 10)
    span.attributes.extend(KeyValue(key=f"k{i}", value=AnyValue(int_value=i)) for i in range(10_000))
    span.events.add(name="late", time_unix_nano=2**64 - 1)
    message = request(span)
    batch = canonicalize(message, SpanLimits())
    assert (batch.accepted, batch.rejected, batch.normalized) == (1, 0, 1)
    [kept] = message.resource_spans[0].scope_spans[0].spans
    assert len(kept.name) == 1024
    marks = {kv.key: kv.value.string_value for kv in kept.attributes if kv.key == NORMALIZED}
    assert "name cut from 1000000 to 1024" in marks[NORMALIZED]
    assert "kept the first 1000 of 10000 attributes" in marks[NORMALIZED]
    assert "event time(s) past 2262 clamped" in marks[NORMALIZED]
    assert kept.events[0].time_unix_nano == kept.start_time_unix_nano


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field, built by hand: upb cannot hold messages this deep."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def nested_value(depth: int) -> bytes:
    """An AnyValue nested `depth` levels (arrays of arrays of ... a string), as wire bytes."""
    value = field(1, b"leaf")
    for _ in range(depth - 1):
        value = field(5, field(1, value))  # AnyValue.array_value -> ArrayValue.values
    return value


def body_with_attribute(span: Any, key: str, value: bytes) -> bytes:
    span_bytes = span.SerializeToString() + field(9, field(1, key.encode()) + field(2, value))
    return field(1, field(2, field(2, span_bytes)))  # request > resource_spans > scope_spans > span


def json_value(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "leaf"}
    for _ in range(depth - 1):
        value = {"arrayValue": {"values": [value]}}
    return value


def test_a_value_nested_50_deep_is_cut_and_the_span_kept() -> None:
    """Protobuf and OTLP/JSON: one attribute value nested 50 deep (past the protobuf parser's limit)
    is replaced by the marker text; the span, its other attributes and the request are kept."""
    trace = new_trace_id()
    span = span_at(trace, "deep", now_ns(), now_ns() + 10)
    span.attributes.add(key="plain", value=AnyValue(string_value="ok"))
    body = body_with_attribute(span, "deep", nested_value(50))
    with pytest.raises(DecodeError):
        ExportTraceServiceRequest.FromString(body)  # what failed the whole request before
    parsed = parse_protobuf(body)
    [kept] = parsed.resource_spans[0].scope_spans[0].spans
    assert any_value_to_str(kept.attributes[0].value) == "ok"
    assert DEEP_VALUE_MARKER in repr(kept.attributes[1].value)
    # Values keep their shape down to level 32; level 33 holds the marker.
    value = kept.attributes[1].value
    for _ in range(32):
        value = value.array_value.values[0]
    assert value.string_value == DEEP_VALUE_MARKER
    assert canonicalize(parsed).accepted == 1
    document = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": trace,
                                "spanId": new_span_id(),
                                "name": "deep",
                                "startTimeUnixNano": str(now_ns()),
                                "endTimeUnixNano": str(now_ns() + 10),
                                "attributes": [{"key": "deep", "value": json_value(50)}],
                            }
                        ]
                    }
                ]
            }
        ]
    }
    parsed = parse_json(json.dumps(document).encode())
    [kept] = parsed.resource_spans[0].scope_spans[0].spans
    assert DEEP_VALUE_MARKER in repr(kept.attributes[0].value)
    # The canonical record parses again (replay reads it back).
    assert parse_protobuf(parsed.SerializeToString()).resource_spans[0].scope_spans[0].spans[0].name == "deep"


def test_json_nested_100k_deep_is_a_clear_decode_error() -> None:
    """A 100k-deep JSON body is an OtlpDecodeError (HTTP 400) with a message, not a RecursionError."""
    body = b'{"resourceSpans": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(OtlpDecodeError, match="nested too deep"):
        parse_json(body)
    with pytest.raises(OtlpDecodeError):
        parse_protobuf(b"\x0a\x80\x01" * 30_000)


def test_the_spool_holds_the_canonical_record_not_the_client_bytes(store: Any, tmp_path: Path) -> None:
    """The repro body (unknown fields from flipped bytes, two bad spans) is spooled as the
    re-serialised accepted request: no unknown fields, no rejected spans."""
    pipeline = IngestPipeline(store, tmp_path / "spool")
    batch = pipeline.accept(REPRO_BODY)
    assert (batch.accepted, batch.rejected) == (2, 2)
    segment = pipeline._spool.seal()
    assert segment is not None
    [record] = Spool.read(segment)
    assert record != REPRO_BODY
    parsed = ExportTraceServiceRequest.FromString(record)
    expected = ExportTraceServiceRequest.FromString(REPRO_BODY)
    expected.DiscardUnknownFields()
    assert len(record) < len(expected.SerializeToString())  # the two rejected spans are gone
    names = [span.name for rs in parsed.resource_spans for ss in rs.scope_spans for span in ss.spans]
    assert names == ["invoke_agent fuzz-74", "execute_toon t2"]
    assert parsed.SerializeToString() == record  # canonical: re-serialising changes nothing
    pipeline.stop()


def spans_of(sidecar: Any, name: str) -> int:
    rows = sidecar.store.query("SELECT count() FROM otel_traces WHERE SpanName = {n:String}", {"n": name})
    return int(rows[0][0])


def test_a_segment_the_store_refuses_is_split_and_only_the_bad_record_quarantined(start_sidecar: Any) -> None:
    """A record ClickHouse refuses on both paths (here: a table constraint) is quarantined with the
    reason after a few tries; the other records of its segment and later requests are stored, the
    store is not reported down, and a re-queued record is stored once the cause is gone."""
    sidecar = start_sidecar(flush_interval_s=0.5)
    sidecar.store.command("ALTER TABLE otel_traces ADD CONSTRAINT no_poison CHECK SpanName != 'poison'")
    trace = new_trace_id()
    for name in ("before", "poison", "after"):
        sidecar.pipeline.accept(request(SpanSpec(trace, new_span_id(), name, 0, 1)).SerializeToString())
    assert sidecar.flush(60)
    assert (spans_of(sidecar, "before"), spans_of(sidecar, "poison"), spans_of(sidecar, "after")) == (1, 0, 1)
    [entry] = sidecar.pipeline.quarantine.entries()
    assert "refused by the store" in entry.reason
    assert "no_poison" in entry.reason
    assert entry.record == 1
    healthy, detail = sidecar.health()
    assert healthy, detail
    assert detail["store"] == "ok"
    assert detail["ingest"]["quarantine"]["records"] == 1
    assert sidecar.pipeline.counters.quarantined_spans == 1
    assert sidecar.pipeline.counters.stored_spans == 2
    # Later requests go straight through.
    sidecar.pipeline.accept(request(SpanSpec(trace, new_span_id(), "later", 0, 1)).SerializeToString())
    assert sidecar.flush(30)
    assert spans_of(sidecar, "later") == 1
    # The cause fixed, the record re-queued: the running writer stores it.
    sidecar.store.command("ALTER TABLE otel_traces DROP CONSTRAINT no_poison")
    sidecar.pipeline.quarantine.requeue(entry.id)
    deadline = time.monotonic() + 30
    while spans_of(sidecar, "poison") == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert spans_of(sidecar, "poison") == 1
    assert sidecar.pipeline.quarantine.entries() == []


def spans_over_years(trace: str, count: int) -> bytes:
    """`count` spans, each on a different day, spread over the last five years."""
    now = now_ns()
    step = 5 * 365 * 86_400 * 10**9 // count
    return request(
        *[span_at(trace, f"day-{i}", now - i * step, now - i * step + 5) for i in range(count)]
    ).SerializeToString()


def test_one_request_spanning_hundreds_of_days_is_stored(start_sidecar: Any) -> None:
    """400 spans on 400 different days (old replayed data) in one request: ClickHouse's default
    guard of 100 partitions per insert would refuse it; the insert sets the limit from the window."""
    sidecar = start_sidecar()
    trace = new_trace_id()
    batch = sidecar.pipeline.accept(spans_over_years(trace, 400))
    assert batch.accepted == 400
    assert sidecar.flush(120)
    rows = sidecar.store.query(
        "SELECT count(), uniqExact(toDate(Timestamp)) FROM otel_traces WHERE TraceId = {t:String}",
        {"t": trace},
    )
    assert rows == [(400, 400)]
    assert sidecar.pipeline.quarantine.entries() == []


def test_python_rendered_path_also_stores_hundreds_of_days(start_sidecar: Any, monkeypatch: Any) -> None:
    """The same on a store that cannot decode protobuf (rows rendered in Python)."""
    monkeypatch.setattr(IngestPipeline, "_store_can_decode", lambda self: False)
    sidecar = start_sidecar()
    trace = new_trace_id()
    sidecar.pipeline.accept(spans_over_years(trace, 300))
    assert sidecar.flush(120)
    assert sidecar.store.query(
        "SELECT count() FROM otel_traces WHERE TraceId = {t:String}", {"t": trace}
    ) == [(300,)]
