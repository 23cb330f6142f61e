"""The OTLP decoder: protobuf and JSON in, otel_traces rows out, bad spans counted not raised."""

from __future__ import annotations

import base64
import json

import pytest
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from otlp_builders import SpanSpec, agent_span, any_value, new_span_id, new_trace_id, request, tool_span

from agenttrail.collector.otlp_decode import (
    OTEL_TRACES_COLUMNS,
    OtlpDecodeError,
    any_value_to_str,
    check_request,
    decode_json,
    decode_protobuf,
    parse_json,
    parse_protobuf,
)

COL = {name: index for index, name in enumerate(OTEL_TRACES_COLUMNS)}


def to_otlp_json(message: object) -> bytes:
    """OTLP/JSON as exporters send it: hex ids, not protobuf-JSON's base64."""
    document = json_format.MessageToDict(message)  # type: ignore[arg-type]
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(document).encode()


def test_protobuf_span_becomes_row_in_exporter_layout() -> None:
    """A span decodes to the ClickHouse exporter's column values (hex ids, kind/status words)."""
    trace, root, child = new_trace_id(), new_span_id(), new_span_id()
    body = request(
        agent_span(trace, root, 0, 10, attributes={"agenttrail.task": "refund"}),
        tool_span(trace, child, root, "search", 1, 3, error="ValueError"),
    ).SerializeToString()
    batch = decode_protobuf(body)
    assert batch.rejected == 0
    assert batch.traces == {trace: True}
    row = batch.rows[1]
    assert row[COL["TraceId"]] == trace
    assert row[COL["SpanId"]] == child
    assert row[COL["ParentSpanId"]] == root
    assert row[COL["SpanKind"]] == "Internal"
    assert row[COL["StatusCode"]] == "Error"
    assert row[COL["ServiceName"]] == "test-svc"
    assert row[COL["Duration"]] == 2_000_000
    assert row[COL["SpanAttributes"]]["gen_ai.tool.name"] == "search"
    assert row[COL["Events.Name"]] == ["exception"]
    assert batch.rows[0][COL["ParentSpanId"]] == ""


def test_json_body_with_hex_ids_decodes_like_protobuf() -> None:
    """OTLP/JSON (hex ids) gives the same rows as the protobuf encoding of the same spans."""
    trace, root = new_trace_id(), new_span_id()
    message = request(agent_span(trace, root, 0, 5), tool_span(trace, new_span_id(), root, "x", 1, 2))
    assert decode_json(to_otlp_json(message)).rows == decode_protobuf(message.SerializeToString()).rows


def test_bad_spans_are_rejected_and_good_ones_kept() -> None:
    """Invalid ids, missing names and inverted times reject only those spans, with reasons."""
    trace = new_trace_id()
    good = SpanSpec(trace, new_span_id(), "ok", 0, 1)
    bad_trace = SpanSpec(trace, new_span_id(), "bad-trace", 0, 1).to_proto()
    bad_trace.trace_id = b"\x00" * 16
    bad_span = SpanSpec(trace, new_span_id(), "bad-span", 0, 1).to_proto()
    bad_span.span_id = b"\x01\x02"
    no_name = SpanSpec(trace, new_span_id(), "x", 0, 1).to_proto()
    no_name.name = ""
    backwards = SpanSpec(trace, new_span_id(), "backwards", 5, 1)
    batch = decode_protobuf(request(good, bad_trace, bad_span, no_name, backwards).SerializeToString())
    assert [row[COL["SpanName"]] for row in batch.rows] == ["ok"]
    assert batch.rejected == 4
    assert "trace_id" in batch.error_message
    assert "span_id" in batch.error_message
    assert "name is missing" in batch.error_message
    assert "before start" in batch.error_message


def test_json_invalid_hex_id_rejects_the_span_only() -> None:
    """A JSON span whose traceId is not hex is rejected; its neighbour is kept."""
    trace = new_trace_id()
    document = json.loads(
        to_otlp_json(
            request(SpanSpec(trace, new_span_id(), "a", 0, 1), SpanSpec(trace, new_span_id(), "b", 0, 1))
        )
    )
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "not-hex!"
    batch = decode_json(json.dumps(document).encode())
    assert [row[COL["SpanName"]] for row in batch.rows] == ["b"]
    assert batch.rejected == 1


@pytest.mark.parametrize(
    ("body", "decoder"),
    [
        (b"\xff\xff\xff garbage", decode_protobuf),
        (b"{not json", decode_json),
        (b"[1, 2]", decode_json),
        (b'{"resourceSpans": "nope"}', decode_json),
    ],
)
def test_undecodable_bodies_raise_decode_error(body: bytes, decoder: object) -> None:
    """A body that is not an OTLP request at all raises OtlpDecodeError with a message."""
    with pytest.raises(OtlpDecodeError, match=r"\w+"):
        decoder(body)  # type: ignore[operator]


def test_any_value_rendering_matches_exporter() -> None:
    """Non-string attribute values render like pcommon AsString: ints, bools, doubles, JSON."""
    assert any_value_to_str(AnyValue(int_value=42)) == "42"
    assert any_value_to_str(AnyValue(bool_value=True)) == "true"
    assert any_value_to_str(AnyValue(double_value=1.0)) == "1"
    assert any_value_to_str(AnyValue(double_value=0.25)) == "0.25"
    array = AnyValue(array_value=ArrayValue(values=[AnyValue(int_value=1), AnyValue(string_value="a")]))
    assert any_value_to_str(array) == '[1,"a"]'
    kvlist = AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key="k", value=AnyValue(bool_value=False))]))
    assert any_value_to_str(kvlist) == '{"k":false}'
    assert any_value_to_str(AnyValue(bytes_value=b"\x00\x01")) == "AAE="


attribute_values = st.one_of(
    st.text(max_size=20), st.integers(-(2**63), 2**63 - 1), st.booleans(), st.floats(allow_nan=False)
)


@settings(max_examples=150, deadline=None)
@given(
    spans=st.lists(
        st.tuples(
            st.binary(min_size=16, max_size=16).filter(any),
            st.binary(min_size=8, max_size=8).filter(any),
            st.text(min_size=1, max_size=30),
            st.integers(1, 2**62),
            st.integers(0, 2**30),
            st.dictionaries(st.text(min_size=1, max_size=10), attribute_values, max_size=5),
        ),
        max_size=8,
    )
)
def test_valid_spans_round_trip(spans: list[tuple[bytes, bytes, str, int, int, dict[str, object]]]) -> None:
    """Any valid span decodes with its ids, name, duration and attribute keys intact."""
    message = request()
    target = message.resource_spans[0].scope_spans[0].spans
    for trace_id, span_id, name, start, duration, attributes in spans:
        span = target.add(
            trace_id=trace_id,
            span_id=span_id,
            name=name,
            start_time_unix_nano=start,
            end_time_unix_nano=start + duration,
        )
        for key, value in attributes.items():
            span.attributes.append(KeyValue(key=key, value=any_value(value)))
    batch = decode_protobuf(message.SerializeToString())
    assert batch.rejected == 0
    assert len(batch.rows) == len(spans)
    for row, (trace_id, span_id, name, _, duration, attributes) in zip(batch.rows, spans, strict=True):
        assert row[COL["TraceId"]] == trace_id.hex()
        assert row[COL["SpanId"]] == span_id.hex()
        assert row[COL["SpanName"]] == name
        assert row[COL["Duration"]] == duration
        assert set(row[COL["SpanAttributes"]]) == set(attributes)


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=300))
def test_arbitrary_bytes_never_crash_the_decoder(body: bytes) -> None:
    """Random bytes either decode or raise OtlpDecodeError, nothing else; when they decode, every
    span of the request is either a row or rejected, as the receivers' check counted it."""
    for decoder, parse in ((decode_protobuf, parse_protobuf), (decode_json, parse_json)):
        try:
            batch = decoder(body)
        except OtlpDecodeError:
            continue
        spans = [
            span
            for resource_spans in parse(body).resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]
        assert batch.rejected + len(batch.rows) == len(spans)
        checked = check_request(parse(body))
        assert (checked.accepted, checked.rejected, checked.traces) == (
            len(batch.rows),
            batch.rejected,
            batch.traces,
        )
