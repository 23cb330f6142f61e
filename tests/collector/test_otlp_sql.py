"""ClickHouse decoding OTLP protobuf stores exactly the rows the Python decoder renders.

The fast ingest path (`otlp_sql`) and the Python path (`otlp_decode.decode_request`) must
agree on every column for any request once checked (`canonicalize`, which every record the
writer stores went through), odd values and repeated keys included; and `canonicalize` (what
the receivers answer with) must agree with the Python decoder on what it accepts, bad spans
included. That replay re-checks what an older version spooled: test_pipeline.
"""

from __future__ import annotations

import math
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList

from agenttrail.collector.canonical import canonicalize
from agenttrail.collector.errors import StoreError
from agenttrail.collector.ingest import IngestPipeline
from agenttrail.collector.otlp_decode import (
    OTEL_TRACES_COLUMNS,
    decode_request,
    format_double,
    json_string,
)
from agenttrail.collector.otlp_sql import OTLP_TRACE_SCHEMA, SPOOL_SOURCE, format_settings, span_rows_select
from agenttrail.collector.schema import migrate
from agenttrail.collector.spool import Spool
from agenttrail.collector.store import Store, insert_select_sql, parse_store

texts = st.text(max_size=12) | st.sampled_from(["", "a/b", "\u2028", "\x00\x01\x1f\x7f", 'q"\\', "é😀"])
doubles = st.floats() | st.sampled_from([1e21, 1e-6, 9.99e-7, 1e20, -0.0, 5e-324, 1.7976931348623157e308])


def scalars() -> st.SearchStrategy[AnyValue]:
    return st.one_of(
        texts.map(lambda v: AnyValue(string_value=v)),
        st.integers(-(2**63), 2**63 - 1).map(lambda v: AnyValue(int_value=v)),
        st.booleans().map(lambda v: AnyValue(bool_value=v)),
        doubles.map(lambda v: AnyValue(double_value=v)),
        st.binary(max_size=6).map(lambda v: AnyValue(bytes_value=v)),
        st.just(AnyValue()),
    )


def nested(children: st.SearchStrategy[AnyValue]) -> st.SearchStrategy[AnyValue]:
    keys = st.sampled_from(["k", "x", "k2"])
    return st.one_of(
        st.lists(children, max_size=3).map(lambda v: AnyValue(array_value=ArrayValue(values=v))),
        st.lists(st.tuples(keys, children), max_size=3).map(
            lambda v: AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key=k, value=x) for k, x in v]))
        ),
    )


# Scalars, one level of arrays / lists, and deeper ones (which both paths render as null inside).
any_values = scalars() | nested(scalars()) | nested(nested(scalars()))
# Few keys, so repeated keys are common; the agent markers flag agent traces.
attribute_lists = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "service.name", "gen_ai.operation.name", "openinference.span.kind"]),
        any_values | st.sampled_from([AnyValue(string_value="invoke_agent"), AnyValue(string_value="AGENT")]),
    ),
    max_size=5,
)
trace_ids = st.sampled_from([bytes(16), b"\x01" * 15, b"\xab" * 16]) | st.binary(min_size=16, max_size=16)
span_ids = st.sampled_from([bytes(8), b"\x01" * 7, b"\xcd" * 8]) | st.binary(min_size=8, max_size=8)
times = st.integers(0, 2**62)


def fill(target: Any, pairs: list[tuple[str, AnyValue]]) -> None:
    target.extend(KeyValue(key=key, value=value) for key, value in pairs)


@st.composite
def requests(draw: st.DrawFn) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(1, 2))):
        resource = request.resource_spans.add()
        fill(resource.resource.attributes, draw(attribute_lists))
        for _ in range(draw(st.integers(1, 2))):
            scope = resource.scope_spans.add()
            scope.scope.name, scope.scope.version = draw(texts), draw(texts)
            for _ in range(draw(st.integers(0, 3))):
                start = draw(times)
                span = scope.spans.add(
                    trace_id=draw(trace_ids),
                    span_id=draw(span_ids),
                    parent_span_id=draw(st.sampled_from([b"", b"\x02" * 8, b"\x03" * 3])),
                    trace_state=draw(texts),
                    name=draw(texts),
                    kind=draw(st.integers(-1, 7)),  # type: ignore[arg-type]
                    start_time_unix_nano=start,
                    end_time_unix_nano=draw(st.integers(max(0, start - 5), start + 10**12)),
                )
                span.status.code = draw(st.integers(0, 4))  # type: ignore[assignment]
                span.status.message = draw(texts)
                fill(span.attributes, draw(attribute_lists))
                for _ in range(draw(st.integers(0, 2))):
                    event = span.events.add(time_unix_nano=draw(times), name=draw(texts))
                    fill(event.attributes, draw(attribute_lists))
                for _ in range(draw(st.integers(0, 2))):
                    link = span.links.add(trace_id=draw(trace_ids), span_id=draw(span_ids))
                    link.trace_state = draw(texts)
                    fill(link.attributes, draw(attribute_lists))
    return request


def awkward_request() -> ExportTraceServiceRequest:
    """Values where renderers most easily part ways, always checked beside the random ones."""
    request = ExportTraceServiceRequest()
    span = (
        request.resource_spans.add()
        .scope_spans.add()
        .spans.add(
            trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="n", start_time_unix_nano=1, end_time_unix_nano=1
        )
    )
    elements = [AnyValue(string_value=text) for text in ("x\x0b\x1f/", "\u2028", 'q"\\')]
    elements += [AnyValue(double_value=value) for value in (1.0, 1e21, 1e-7, math.nan, -math.inf)]
    elements += [AnyValue(bytes_value=b"\xff"), AnyValue(), AnyValue(array_value=ArrayValue())]
    pairs = KeyValueList(values=[KeyValue(key="k\n", value=element) for element in elements])
    fill(
        span.attributes,
        [
            ("a", AnyValue(array_value=ArrayValue(values=elements))),
            ("b", AnyValue(kvlist_value=pairs)),
            ("a", AnyValue(double_value=123456789012345680.0)),
            ("c", AnyValue(double_value=-0.0)),
        ],
    )
    return request


def stored_rows(store: Store, table: str) -> list[tuple[Any, ...]]:
    """Every row, maps as ordered item lists, in a stable order."""
    columns = ", ".join(f"`{name}`" for name in OTEL_TRACES_COLUMNS)
    rows = store.query(f"SELECT {columns} FROM {table}")

    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return list(value.items())
        if isinstance(value, list):
            return [plain(item) for item in value]
        return value

    return sorted((tuple(plain(value) for value in row) for row in rows), key=repr)


@pytest.fixture
def tables(store: Store) -> Store:
    for table in ("spans_by_clickhouse", "spans_by_python"):
        store.command(f"CREATE TABLE {table} AS otel_traces")
    return store


@pytest.mark.timeout(600)  # ClickHouse statements per example; slow on a loaded machine
@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(requests(), min_size=1, max_size=3))
@example(batch=[awkward_request()])
def test_clickhouse_decoding_stores_the_rows_python_renders(
    tables: Store, tmp_path: Path, batch: list[ExportTraceServiceRequest]
) -> None:
    store = tables
    for table in ("spans_by_clickhouse", "spans_by_python"):
        store.command(f"TRUNCATE TABLE {table}")
    # What the receivers spool: each request checked, its rejected spans removed.
    canonical = []
    for request in batch:
        decoded = decode_request(request)
        checked_request = ExportTraceServiceRequest.FromString(request.SerializeToString())
        checked = canonicalize(checked_request)
        assert (checked.accepted, checked.rejected, checked.errors, checked.traces) == (
            len(decoded.rows),
            decoded.rejected,
            decoded.errors,
            decoded.traces,
        )
        canonical.append(checked_request)
    spool = Spool(tmp_path / "spool")
    for request in canonical:
        spool.append(request.SerializeToString())
    segment = spool.seal()
    assert segment is not None
    store.insert_select_file(
        "spans_by_clickhouse",
        OTEL_TRACES_COLUMNS,
        span_rows_select,
        SPOOL_SOURCE,
        segment,
        settings=format_settings(store.location),
    )
    python_rows = [row for request in batch for row in decode_request(request).rows]
    store.insert_rows("spans_by_python", OTEL_TRACES_COLUMNS, python_rows)
    Spool.remove(segment)

    by_clickhouse = stored_rows(store, "spans_by_clickhouse")
    assert by_clickhouse == stored_rows(store, "spans_by_python")
    assert len(by_clickhouse) == len(python_rows)


@pytest.mark.timeout(600)  # ClickHouse statements per example; slow on a loaded machine
@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(number=doubles, text=texts)
def test_number_and_string_rendering_matches_clickhouse(store: Store, number: float, text: str) -> None:
    """`format_double` is ClickHouse's toString, `json_string` its toJSONString (slashes as-is)."""
    to_string, to_json = store.query(
        "SELECT toString({n:Float64}), toJSONString({s:String}) "
        "SETTINGS output_format_json_escape_forward_slashes = 0",
        {"n": number, "s": text},
    )[0]
    assert format_double(number) == to_string
    assert json_string(text) == to_json
    if math.isfinite(number):
        assert float(to_string) == number


def test_a_torn_record_is_cut_so_the_segment_still_loads(store: Store, tmp_path: Path) -> None:
    """A crash mid-append leaves a partial record: reading the segment cuts it, and ClickHouse
    then stores the whole records before it."""
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="kept", start_time_unix_nano=5)
    spans[0].end_time_unix_nano = 9
    spool = Spool(tmp_path / "spool")
    spool.append(request.SerializeToString())
    segment = spool.seal()
    assert segment is not None
    with segment.open("ab") as handle:
        handle.write(b"\x90\x03partial")  # says 400 bytes follow; 7 do
    assert Spool.read(segment) == [request.SerializeToString()]
    settings = format_settings(store.location)
    store.insert_select_file(
        "otel_traces", OTEL_TRACES_COLUMNS, span_rows_select, SPOOL_SOURCE, segment, settings=settings
    )
    assert store.query("SELECT SpanName, Duration FROM otel_traces") == [("kept", 4)]


def test_replay_stores_only_the_valid_spans_of_client_bytes(store: Store, tmp_path: Path) -> None:
    """The insert checks no span, so nothing may reach it unchecked: a segment left by a version
    that spooled the client's bytes (bad spans included) is re-checked at replay, and only the
    spans the Python decoder accepts are stored."""
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    good: dict[str, Any] = {
        "trace_id": b"\x01" * 16,
        "span_id": b"\x02" * 8,
        "name": "kept",
        "start_time_unix_nano": 5,
        "end_time_unix_nano": 9,
    }
    spans.add(**good)
    for field, bad in [
        ("trace_id", bytes(16)),
        ("trace_id", b"\x01" * 15),
        ("span_id", bytes(8)),
        ("parent_span_id", b"\x03" * 3),
        ("name", ""),
        ("start_time_unix_nano", 0),
        ("end_time_unix_nano", 4),
        ("end_time_unix_nano", 2**63),
    ]:
        spans.add(**{**good, "name": f"bad {field}", field: bad})
    assert len(decode_request(request).rows) == 1
    spool = Spool(tmp_path / "spool")
    spool.append(request.SerializeToString())
    assert spool.seal() is not None
    pipeline = IngestPipeline(store, tmp_path / "spool")
    assert pipeline.clickhouse_decoding
    assert pipeline.replay() == 1
    assert store.query("SELECT SpanName FROM otel_traces") == [("kept",)]
    pipeline.stop()


def test_the_server_form_of_the_insert_is_valid_sql(store: Store) -> None:
    """A ClickHouse server gets the segment as the request body through `input()`. No server
    runs here (AGENTTRAIL_TEST_CLICKHOUSE_URL runs the real one), but the engine parses that
    statement and stops only because the body is empty."""
    columns = OTEL_TRACES_COLUMNS
    sql = insert_select_sql("otel_traces", columns, span_rows_select, SPOOL_SOURCE, embedded=False)
    assert sql.endswith("FORMAT Protobuf")
    with pytest.raises(StoreError, match="NO_DATA_TO_INSERT"):
        store.command(sql)
    with pytest.raises(StoreError, match="Syntax error"):
        store.command(sql.replace("ARRAY JOIN", "ARRAY JOINED", 1))


@pytest.mark.skipif(
    not os.environ.get("AGENTTRAIL_TEST_CLICKHOUSE_URL"), reason="AGENTTRAIL_TEST_CLICKHOUSE_URL not set"
)
def test_a_clickhouse_server_decodes_the_spool_as_python_does(tmp_path: Path) -> None:
    """The server path (`input()`, the segment as the request body) stores the Python rows."""
    database = f"agenttrail_test_{uuid.uuid4().hex[:8]}"
    server = Store(parse_store(os.environ["AGENTTRAIL_TEST_CLICKHOUSE_URL"], database))
    try:
        migrate(server)
        server.command("CREATE TABLE spans_by_python AS otel_traces")
        spool = Spool(tmp_path / "spool")
        requests = [awkward_request(), awkward_request()]
        for request in requests:
            spool.append(request.SerializeToString())
        segment = spool.seal()
        assert segment is not None
        columns = OTEL_TRACES_COLUMNS
        settings = format_settings(server.location)
        server.insert_select_file(
            "otel_traces", columns, span_rows_select, SPOOL_SOURCE, segment, settings=settings
        )
        rows = [row for request in requests for row in decode_request(request).rows]
        server.insert_rows("spans_by_python", OTEL_TRACES_COLUMNS, rows)
        assert stored_rows(server, "otel_traces") == stored_rows(server, "spans_by_python")
    finally:
        server.command(f"DROP DATABASE IF EXISTS `{database}`")
        server.close()


def test_the_embedded_store_keeps_its_schema_in_the_store_directory(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The schema file lives in the store directory; nothing is written where the process runs
    (an inline schema made the engine cache a copy under `__cache__/` in the working directory)."""
    monkeypatch.chdir(tmp_path)
    spool = Spool(tmp_path / "spool")
    spool.append(awkward_request().SerializeToString())
    segment = spool.seal()
    assert segment is not None
    settings = format_settings(store.location)
    store.insert_select_file(
        "otel_traces", OTEL_TRACES_COLUMNS, span_rows_select, SPOOL_SOURCE, segment, settings=settings
    )
    assert store.query("SELECT count() FROM otel_traces") == [(1,)]
    assert store.location.path is not None
    assert Path(str(settings["format_schema"])).parent == store.location.path / "format_schemas"
    assert Path(str(settings["format_schema"])).read_text() == OTLP_TRACE_SCHEMA
    assert not (tmp_path / "__cache__").exists()
