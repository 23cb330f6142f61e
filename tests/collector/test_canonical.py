"""Whatever the receiver accepts, both store paths store, and store the same rows.

Requests here are generated far outside what SDKs send: ids of any length, timestamps over the
whole uint64 range, names and attribute lists past the limits, NaN and infinities, nested
values, events past 2262, and unknown fields (groups included) appended to the wire bytes. The
canonical record `canonicalize` leaves must be stored by ClickHouse's Protobuf decoding and by
the Python renderer alike, with one row per accepted span.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from canonical_reference import reference_canonicalize
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList

from agenttrail.collector.canonical import SpanLimits, canonicalize
from agenttrail.collector.otlp_decode import (
    OTEL_TRACES_COLUMNS,
    OtlpDecodeError,
    decode_request,
    parse_protobuf,
)
from agenttrail.collector.otlp_sql import SPOOL_SOURCE, format_settings, span_rows_select
from agenttrail.collector.otlp_wire import span_layout
from agenttrail.collector.spool import encode_records
from agenttrail.collector.store import Store

NOW = time.time_ns()
LIMITS = SpanLimits(max_age_days=400, max_future_s=3600, max_name_chars=40, max_attributes=4, max_events=2)
DAY = 86_400 * 10**9

texts = st.text(max_size=60) | st.sampled_from(["", "\u2028", "\x00\x1f", 'q"\\', "é😀" * 30])
doubles = st.floats() | st.sampled_from([float("nan"), float("inf"), -float("inf"), -0.0, 5e-324])
# Mostly inside the window (so that spans are accepted), often at its edges and far beyond.
good_times = st.integers(NOW - 399 * DAY, NOW + 3599 * 10**9)
extreme_times = st.sampled_from([0, 1, 2**63 - 1, 2**63, 2**64 - 2, 2**64 - 1, NOW + 10**12]) | st.integers(
    0, 2**64 - 1
)
times = st.one_of(good_times, good_times, good_times, extreme_times)


def scalars() -> st.SearchStrategy[AnyValue]:
    return st.one_of(
        texts.map(lambda v: AnyValue(string_value=v)),
        st.integers(-(2**63), 2**63 - 1).map(lambda v: AnyValue(int_value=v)),
        doubles.map(lambda v: AnyValue(double_value=v)),
        st.binary(max_size=5).map(lambda v: AnyValue(bytes_value=v)),
        st.booleans().map(lambda v: AnyValue(bool_value=v)),
        st.just(AnyValue()),
    )


any_values = st.recursive(
    scalars(),
    lambda children: st.one_of(
        st.lists(children, max_size=3).map(lambda v: AnyValue(array_value=ArrayValue(values=v))),
        st.lists(st.tuples(st.sampled_from(["k", "x"]), children), max_size=3).map(
            lambda v: AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key=k, value=x) for k, x in v]))
        ),
    ),
    max_leaves=8,
)
attributes = st.lists(
    st.tuples(st.sampled_from(["a", "b", "gen_ai.operation.name", "é"]), any_values), max_size=7
)
ids = st.binary(max_size=18)
# Unknown fields a client (or a flipped byte) may add: varint, fixed, length-delimited, a group.
unknown_fields = st.lists(
    st.sampled_from([b"\xc8\x3e\x01", b"\xd1\x3e" + b"\x00" * 8, b"\xd2\x3e\x02ab", b"\xdb\x3e\xdc\x3e"]),
    max_size=3,
)


@st.composite
def request_bodies(draw: st.DrawFn) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    resource.resource.attributes.extend(KeyValue(key=k, value=v) for k, v in draw(attributes))
    scope = resource.scope_spans.add()
    scope.scope.name = draw(texts)
    for _ in range(draw(st.integers(1, 4))):
        span = scope.spans.add(
            trace_id=draw(st.sampled_from([b"\x01" * 16, b"\xab" * 16]) | ids),
            span_id=draw(st.sampled_from([b"\x02" * 8, b"\x04" * 8]) | ids),
            parent_span_id=draw(st.sampled_from([b"", b"\x03" * 8]) | ids),
            name=draw(texts),
            kind=draw(st.integers(-(2**31), 2**31 - 1)),  # type: ignore[arg-type]
            start_time_unix_nano=(start := draw(times)),
            end_time_unix_nano=draw(st.integers(start, min(start + 10**9, 2**64 - 1)) | times),
            trace_state=draw(texts),
        )
        span.status.code = draw(st.integers(0, 2**31 - 1))  # type: ignore[assignment]
        span.attributes.extend(KeyValue(key=k, value=v) for k, v in draw(attributes))
        for _ in range(draw(st.integers(0, 3))):
            event = span.events.add(time_unix_nano=draw(times), name=draw(texts))
            event.attributes.extend(KeyValue(key=k, value=v) for k, v in draw(attributes))
        for _ in range(draw(st.integers(0, 2))):
            link = span.links.add(trace_id=draw(ids), span_id=draw(ids))
            link.attributes.extend(KeyValue(key=k, value=v) for k, v in draw(attributes))
    return request.SerializeToString() + b"".join(draw(unknown_fields))


def sensible_body() -> bytes:
    """A span both paths stored before too, always checked beside the random ones."""
    from otlp_builders import SpanSpec, new_span_id, new_trace_id, request

    return request(SpanSpec(new_trace_id(), new_span_id(), "ok", 0, 1)).SerializeToString()


def stored_rows(store: Store, table: str) -> list[tuple[Any, ...]]:
    columns = ", ".join(f"`{name}`" for name in OTEL_TRACES_COLUMNS)

    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return list(value.items())
        if isinstance(value, list):
            return [plain(item) for item in value]
        return value

    return sorted(
        (tuple(plain(v) for v in row) for row in store.query(f"SELECT {columns} FROM {table}")), key=repr
    )


@pytest.fixture
def tables(store: Store) -> Store:
    for table in ("by_clickhouse", "by_python"):
        store.command(f"CREATE TABLE {table} AS otel_traces")
    return store


# Each example is four ClickHouse statements: on a loaded 2-core machine 40 of them took over
# pytest's default 120 s, and hypothesis then reports the timeout as a flaky strategy.
@pytest.mark.timeout(600)
@settings(max_examples=40, suppress_health_check=list(HealthCheck))
@given(body=request_bodies())
@example(body=sensible_body())
def test_what_the_receiver_accepts_both_store_paths_store_alike(
    tables: Store, tmp_path: Path, body: bytes
) -> None:
    store = tables
    try:
        request = parse_protobuf(body)
    except OtlpDecodeError:
        assume(False)
        return
    batch = canonicalize(request, LIMITS, now_ns=NOW)
    assume(batch.accepted > 0)
    record = request.SerializeToString()
    for table in ("by_clickhouse", "by_python"):
        store.command(f"TRUNCATE TABLE {table}")
    segment = tmp_path / "segment.spool"
    segment.write_bytes(encode_records([record]))
    partitions = {"max_partitions_per_insert_block": LIMITS.partitions_per_insert()}
    store.insert_select_file(
        "by_clickhouse",
        OTEL_TRACES_COLUMNS,
        span_rows_select,
        SPOOL_SOURCE,
        segment,
        settings={**format_settings(store.location), **partitions},
    )
    decoded = decode_request(parse_protobuf(record))
    assert (len(decoded.rows), decoded.rejected) == (batch.accepted, 0)
    store.insert_rows("by_python", OTEL_TRACES_COLUMNS, decoded.rows, settings=partitions)
    by_clickhouse = stored_rows(store, "by_clickhouse")
    assert len(by_clickhouse) == batch.accepted
    assert by_clickhouse == stored_rows(store, "by_python")


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _nested_value(depth: int) -> bytes:
    """An AnyValue nested `depth` levels as wire bytes (upb cannot build one past its limit)."""
    value = _field(1, b"AGENT")
    for _ in range(depth - 1):
        value = _field(5, _field(1, value))
    return value


# Values that make (or almost make) an agent-run span, in the keys that decide it and elsewhere.
agent_values = st.one_of(
    st.sampled_from(["invoke_agent", "AGENT", "chat", "agent", "xinvoke_agent", "AGENTS"]).map(
        lambda v: AnyValue(string_value=v)
    ),
    st.sampled_from(["invoke_agent", "AGENT"]).map(lambda v: AnyValue(string_value=v)),
    st.sampled_from(["invoke_agent", "AGENT"]).map(
        lambda v: AnyValue(array_value=ArrayValue(values=[AnyValue(string_value=v)]))
    ),
    any_values,
)
agent_attributes = st.lists(
    st.tuples(st.sampled_from(["gen_ai.operation.name", "openinference.span.kind", "a", "é"]), agent_values),
    max_size=6,
)
span_names = texts | st.sampled_from(["invoke_agent x", "AGENT", "x" * 50])


@st.composite
def wire_span(draw: st.DrawFn) -> bytes:
    """One span's bytes: random fields, then sometimes a value nested too deep and unknown fields."""
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    good = draw(st.integers(0, 4)) > 0  # most spans pass the checks, so the rest is reached
    span = Span(
        trace_id=draw(st.sampled_from([b"\x01" * 16, b"\xab" * 16, b"\x05" * 16]) if good else ids),
        span_id=draw(st.sampled_from([b"\x02" * 8, b"\x04" * 8]) if good else ids),
        parent_span_id=draw(st.sampled_from([b"", b"\x03" * 8]) if good else ids),
        name=draw(span_names),
        start_time_unix_nano=(start := draw(good_times if good else times)),
        end_time_unix_nano=draw(st.integers(start, start + 10**9) if good else times),
    )
    span.attributes.extend(KeyValue(key=k, value=v) for k, v in draw(agent_attributes))
    for _ in range(draw(st.integers(0, 2))):
        event = span.events.add(time_unix_nano=draw(times), name=draw(span_names))
        event.attributes.extend(KeyValue(key=k, value=v) for k, v in draw(attributes))
    for _ in range(draw(st.integers(0, 2))):
        link = span.links.add(trace_id=draw(ids), span_id=draw(ids))
        link.attributes.extend(KeyValue(key=k, value=v) for k, v in draw(attributes))
    data = span.SerializeToString()
    if draw(st.integers(0, 9)) == 0:  # parsed only after otlp_depth cuts the value
        data += _field(9, _field(1, b"openinference.span.kind") + _field(2, _nested_value(50)))
    return data + b"".join(draw(unknown_fields))


@st.composite
def wire_message(draw: st.DrawFn, head: bytes, children: list[bytes]) -> bytes:
    """A message's fields in a random order with unknown fields among them (repeated fields
    keep their order: that is the order of the parsed message)."""
    parts = [(index, _field(2, child)) for index, child in enumerate(children)]
    parts += [(-1, head)] + [(-1, extra) for extra in draw(unknown_fields)]
    shuffled = draw(st.permutations(parts))
    children_in_order = iter(part for part in parts if part[0] >= 0)
    return b"".join(part if index < 0 else next(children_in_order)[1] for index, part in shuffled)


@st.composite
def wire_bodies(draw: st.DrawFn) -> bytes:
    """Requests built field by field: several resources and scopes, unknown fields (groups
    included) at every level, spans that the wire walk must find in the parsed message's order."""
    from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource

    resources = []
    for _ in range(draw(st.integers(1, 2))):
        scopes = []
        for _ in range(draw(st.integers(1, 2))):
            head = _field(1, InstrumentationScope(name=draw(texts)).SerializeToString())
            scopes.append(draw(wire_message(head, draw(st.lists(wire_span(), max_size=4)))))
        resource = Resource(attributes=[KeyValue(key=k, value=v) for k, v in draw(attributes)])
        resources.append(draw(wire_message(_field(1, resource.SerializeToString()), scopes)))
    body = b"".join(_field(1, resource) for resource in resources)
    return body + b"".join(draw(unknown_fields))


limit_sets = st.sampled_from(
    [
        LIMITS,
        SpanLimits(max_age_days=400, max_future_s=3600, max_attributes=2, max_links=1, max_events=1),
        SpanLimits(max_age_days=400, max_future_s=3600),
        SpanLimits(max_age_days=None, max_future_s=None, max_name_chars=3, max_attributes=0, max_links=0),
    ]
)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=wire_bodies(), limits=limit_sets)
def test_canonicalize_decides_as_the_plain_reading_of_every_span(body: bytes, limits: SpanLimits) -> None:
    """The fast path (spans read only as far as their bytes or trace leave a question open) keeps,
    cuts, marks and rejects what reading every span fully does, with the same traces and flags."""
    try:
        expected_request = parse_protobuf(body)
    except OtlpDecodeError:
        assume(False)
        return
    layout = span_layout(body)  # every body built here is one the walk follows to each span
    assert layout is not None
    scopes = [scope for resource in expected_request.resource_spans for scope in resource.scope_spans]
    assert layout.per_scope == [len(scope.spans) for scope in scopes]
    expected = reference_canonicalize(expected_request, limits, now_ns=NOW)
    for wire in (body, None):
        request = parse_protobuf(body)
        batch = canonicalize(request, limits, now_ns=NOW, wire=wire)
        assert request.SerializeToString() == expected_request.SerializeToString()
        assert (batch.accepted, batch.rejected, batch.errors, batch.normalized) == (
            expected.accepted,
            expected.rejected,
            expected.errors,
            expected.normalized,
        )
        assert list(batch.traces.items()) == list(expected.traces.items())
