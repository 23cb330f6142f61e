"""OTLP protobuf decoded by ClickHouse itself: the fast ingest path.

The spool holds accepted request bodies as length-delimited protobuf messages, which is
ClickHouse's `Protobuf` input format. One `INSERT ... SELECT` reads a whole spool segment
with the schema below, flattens resource -> scope -> span with ARRAY JOIN and renders every
column exactly as `otlp_decode.decode_request` does in Python (tests hold the two equal).
It does not check spans: every record the writer hands it is canonical (`canonicalize`).
Python only parses each request once to validate spans and note traces (`canonicalize`),
so span rendering and encoding, most of the per-span cost, leave the GIL.

The schema is a subset of opentelemetry-proto's trace and common messages with the same
field numbers (enums read as int32, which is the same wire type); fields it leaves out are
skipped. A ClickHouse server gets it inline (`format_schema_source='string'`), so it needs no
schema file; a server too old for that setting is detected at start-up and gets Python-rendered
rows instead. The embedded engine reads it from a file in the store directory: given inline,
it would cache a copy under `__cache__/` in the process's working directory.
"""

from __future__ import annotations

from agenttrail.collector.otlp_decode import OTEL_TRACES_COLUMNS
from agenttrail.collector.store import FileSource, StoreLocation

OTLP_TRACE_SCHEMA = """
syntax = "proto3";
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }
message Resource { repeated KeyValue attributes = 1; }
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; }
message InstrumentationScope { string name = 1; string version = 2; }
message Span {
  bytes trace_id = 1;
  bytes span_id = 2;
  string trace_state = 3;
  bytes parent_span_id = 4;
  string name = 5;
  int32 kind = 6;
  fixed64 start_time_unix_nano = 7;
  fixed64 end_time_unix_nano = 8;
  repeated KeyValue attributes = 9;
  repeated Event events = 11;
  repeated Link links = 13;
  Status status = 15;
}
message Event { fixed64 time_unix_nano = 1; string name = 2; repeated KeyValue attributes = 3; }
message Link {
  bytes trace_id = 1;
  bytes span_id = 2;
  string trace_state = 3;
  repeated KeyValue attributes = 4;
}
message Status { string message = 2; int32 code = 3; }
message AnyValue {
  oneof value {
    string string_value = 1;
    bool bool_value = 2;
    int64 int_value = 3;
    double double_value = 4;
    ArrayValue array_value = 5;
    KeyValueList kvlist_value = 6;
    bytes bytes_value = 7;
  }
}
message ArrayValue { repeated AnyValue values = 1; }
message KeyValueList { repeated KeyValue values = 1; }
message KeyValue { string key = 1; AnyValue value = 2; }
"""

# Which field of AnyValue's oneof is set (input_format_protobuf_oneof_presence).
_ONEOF = (
    "value Enum8('unset' = 0, 'string_value' = 1, 'bool_value' = 2, 'int_value' = 3, "
    "'double_value' = 4, 'array_value' = 5, 'kvlist_value' = 6, 'bytes_value' = 7)"
)
_SCALAR = (
    f"{_ONEOF}, string_value String, bool_value Bool, int_value Int64, double_value Float64, "
    "bytes_value String"
)
# One level of nesting, as span attributes allow (arrays of primitives); deeper values read as null.
_ANY_VALUE = (
    f"{_SCALAR}, array_value Tuple(values Array(Tuple({_SCALAR}))), "
    f"kvlist_value Tuple(values Array(Tuple(key String, value Tuple({_SCALAR}))))"
)
_KEY_VALUES = f"Array(Tuple(key String, value Tuple({_ANY_VALUE})))"
_SPAN = (
    "trace_id String, span_id String, trace_state String, parent_span_id String, name String, "
    "kind Int32, start_time_unix_nano UInt64, end_time_unix_nano UInt64, "
    f"attributes {_KEY_VALUES}, "
    f"events Array(Tuple(time_unix_nano UInt64, name String, attributes {_KEY_VALUES})), "
    f"links Array(Tuple(trace_id String, span_id String, trace_state String, attributes {_KEY_VALUES})), "
    "status Tuple(message String, code Int32)"
)
INPUT_STRUCTURE = (
    f"resource_spans Array(Tuple(resource Tuple(attributes {_KEY_VALUES}), "
    f"scope_spans Array(Tuple(scope Tuple(name String, version String), spans Array(Tuple({_SPAN}))))))"
)
# A spool segment as ClickHouse reads it: length-delimited ExportTraceServiceRequest messages.
SPOOL_SOURCE = FileSource("Protobuf", INPUT_STRUCTURE)

_SCHEMA_FILE = "format_schemas/agenttrail_otlp_trace.proto"


def format_settings(location: StoreLocation) -> dict[str, str | int]:
    """The query settings that read SPOOL_SOURCE on this store; for the embedded engine this
    (re)writes the schema file in the store directory when its content differs."""
    schema: dict[str, str | int] = {"format_schema_source": "string", "format_schema": OTLP_TRACE_SCHEMA}
    if location.path is not None:
        schema_file = location.path / _SCHEMA_FILE
        if not schema_file.is_file() or schema_file.read_text() != OTLP_TRACE_SCHEMA:
            schema_file.parent.mkdir(parents=True, exist_ok=True)
            staged = schema_file.with_suffix(".tmp")
            staged.write_text(OTLP_TRACE_SCHEMA)
            staged.replace(schema_file)  # atomic: a reader never sees half a schema
        schema = {"format_schema": str(schema_file)}
    return {
        **schema,
        "format_schema_message_name": "ExportTraceServiceRequest",
        "input_format_protobuf_oneof_presence": 1,
        "output_format_json_escape_forward_slashes": 0,
    }


def _json_element(value: str) -> str:
    """An array or key-value-list element as JSON, as `otlp_decode._json_element` renders it."""
    return (
        f"multiIf({value}.value = 'string_value', toJSONString({value}.string_value), "
        f"{value}.value = 'int_value', toString({value}.int_value), "
        f"{value}.value = 'bool_value', if({value}.bool_value, 'true', 'false'), "
        f"{value}.value = 'double_value', toJSONString({value}.double_value), "
        f"{value}.value = 'bytes_value', toJSONString(base64Encode({value}.bytes_value)), 'null')"
    )


def _as_string(value: str) -> str:
    """An AnyValue as text, as `otlp_decode.any_value_to_str` renders it."""
    return (
        f"multiIf({value}.value = 'string_value', {value}.string_value, "
        f"{value}.value = 'int_value', toString({value}.int_value), "
        f"{value}.value = 'bool_value', if({value}.bool_value, 'true', 'false'), "
        f"{value}.value = 'double_value', toString({value}.double_value), "
        f"{value}.value = 'bytes_value', base64Encode({value}.bytes_value), "
        f"{value}.value = 'array_value', concat('[', arrayStringConcat(arrayMap(item -> "
        f"{_json_element('item')}, {value}.array_value.values), ','), ']'), "
        f"{value}.value = 'kvlist_value', concat('{{', arrayStringConcat(arrayMap(item -> "
        f"concat(toJSONString(item.key), ':', {_json_element('item.value')}), "
        f"{value}.kvlist_value.values), ','), '}}'), '')"
    )


def _attribute_map(key_values: str) -> str:
    """KeyValue list -> Map; a repeated key keeps its first position and its last value, as a
    Python dict built in order does.

    The (key, text) pairs are rendered once and bound to a lambda parameter (`arrayMap` over a
    one-element array): written out at each use, the rendering expression made the query text
    several times longer, and its analysis, paid on every insert, several times slower.
    """
    pairs = f"arrayMap(kv -> tuple(kv.key, {_as_string('kv.value')}), {key_values})"
    keys, values = "pairs.1", "pairs.2"
    deduplicated = (
        f"mapFromArrays(arrayDistinct({keys}), arrayMap(key -> {values}[length(pairs) + 1 - "
        f"indexOf(arrayReverse({keys}), key)], arrayDistinct({keys})))"
    )
    unique = f"length(arrayDistinct({keys})) = length(pairs)"
    return f"arrayMap(pairs -> if({unique}, mapFromArrays({keys}, {values}), {deduplicated}), [{pairs}])[1]"


def _hex(value: str) -> str:
    return f"lower(hex({value}))"


def _nanos(value: str) -> str:
    return f"fromUnixTimestamp64Nano(toInt64({value}))"


_KINDS = "['Unspecified', 'Internal', 'Server', 'Client', 'Producer', 'Consumer']"
_STATUS = "['Unset', 'Ok', 'Error']"

# In OTEL_TRACES_COLUMNS order.
_COLUMN_EXPRESSIONS: tuple[tuple[str, str], ...] = (
    ("Timestamp", _nanos("span.start_time_unix_nano")),
    ("TraceId", _hex("span.trace_id")),
    ("SpanId", _hex("span.span_id")),
    ("ParentSpanId", _hex("span.parent_span_id")),
    ("TraceState", "span.trace_state"),
    ("SpanName", "span.name"),
    ("SpanKind", f"if(span.kind BETWEEN 0 AND 5, {_KINDS}[span.kind + 1], 'Unspecified')"),
    ("ServiceName", "resource_map['service.name']"),
    ("ResourceAttributes", "resource_map"),
    ("ScopeName", "scope_item.scope.name"),
    ("ScopeVersion", "scope_item.scope.version"),
    ("SpanAttributes", _attribute_map("span.attributes")),
    ("Duration", "span.end_time_unix_nano - span.start_time_unix_nano"),
    ("StatusCode", f"if(span.status.code BETWEEN 0 AND 2, {_STATUS}[span.status.code + 1], 'Unset')"),
    ("StatusMessage", "span.status.message"),
    ("Events.Timestamp", f"arrayMap(event -> {_nanos('event.time_unix_nano')}, span.events)"),
    ("Events.Name", "arrayMap(event -> event.name, span.events)"),
    ("Events.Attributes", f"arrayMap(event -> {_attribute_map('event.attributes')}, span.events)"),
    ("Links.TraceId", f"arrayMap(link -> {_hex('link.trace_id')}, span.links)"),
    ("Links.SpanId", f"arrayMap(link -> {_hex('link.span_id')}, span.links)"),
    ("Links.TraceState", "arrayMap(link -> link.trace_state, span.links)"),
    ("Links.Attributes", f"arrayMap(link -> {_attribute_map('link.attributes')}, span.links)"),
)
assert tuple(name for name, _ in _COLUMN_EXPRESSIONS) == OTEL_TRACES_COLUMNS


def span_rows_select(source: str) -> str:
    """SELECT of `otel_traces` rows from a table expression `source` reading SPOOL_SOURCE.

    Resource attributes are rendered once per resource, before the spans are unrolled. Every
    span is stored: the writer only hands ClickHouse canonical records (`canonicalize` removed
    the spans `otlp_decode.span_problem` rejects, at the receiver or, for a segment this process
    did not write, at replay), so the spans are not checked again here. An `arrayFilter` of
    those rules before unrolling copied every span and cost ~1 us a span (bench_insert_cost).
    """
    columns = ",\n  ".join(expression for _, expression in _COLUMN_EXPRESSIONS)
    return (
        f"SELECT\n  {columns}\n"
        "FROM (\n"
        f"  SELECT resource.scope_spans AS scope_spans, {_attribute_map('resource.resource.attributes')} "
        "AS resource_map\n"
        f"  FROM {source} ARRAY JOIN resource_spans AS resource\n"
        ")\n"
        "ARRAY JOIN scope_spans AS scope_item\n"
        "ARRAY JOIN scope_item.spans AS span"
    )
