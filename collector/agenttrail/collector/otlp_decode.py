"""Read OTLP trace requests (protobuf or JSON): check their spans, or decode them into rows.

Parsing (`parse_protobuf`, `parse_json`) and the span rules (`span_problem`) serve the ingest
check (`canonical.canonicalize`), which notes each trace without rendering anything, because the
span rows themselves are decoded by ClickHouse (`otlp_sql`). `decode_request` renders the
same `otel_traces` rows in Python: the path for stores that cannot decode protobuf, and the
reference the ClickHouse decoding is tested against. Values are rendered the way the
OpenTelemetry Collector's ClickHouse exporter renders them (`AsString`, numbers as ES6 /
ClickHouse print them), so the stored table reads the same in Grafana's trace view.

Bad spans are counted and described, never raised: the caller answers with `partial_success`
and keeps the good spans of the same request.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.otlp_depth import truncate_deep_json, truncate_deep_values
from agenttrail.instrumentation import attributes as attr

OTEL_TRACES_COLUMNS: tuple[str, ...] = (
    "Timestamp",
    "TraceId",
    "SpanId",
    "ParentSpanId",
    "TraceState",
    "SpanName",
    "SpanKind",
    "ServiceName",
    "ResourceAttributes",
    "ScopeName",
    "ScopeVersion",
    "SpanAttributes",
    "Duration",
    "StatusCode",
    "StatusMessage",
    "Events.Timestamp",
    "Events.Name",
    "Events.Attributes",
    "Links.TraceId",
    "Links.SpanId",
    "Links.TraceState",
    "Links.Attributes",
)

# How a request body is encoded (receivers say which; the spool holds protobuf only).
FORMAT_PROTOBUF = 0
FORMAT_JSON = 1

# Index of a few columns the pipeline reads back from decoded rows.
COL_TRACE_ID = OTEL_TRACES_COLUMNS.index("TraceId")

_SPAN_KINDS = ("Unspecified", "Internal", "Server", "Client", "Producer", "Consumer")
_STATUS_CODES = ("Unset", "Ok", "Error")
_MAX_ERROR_MESSAGES = 5


class OtlpDecodeError(AgentTrailError, ValueError):
    """The request body is not an OTLP trace export request at all."""


@dataclass(slots=True)
class DecodedBatch:
    """What one request (or several) holds: good spans, their traces, what was rejected and why.

    `rows` is filled only by `decode_request`; `canonicalize` counts and notes without rendering.
    """

    accepted: int = 0
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    # trace id -> True if an agent-run span of that trace is in this batch.
    traces: dict[str, bool] = field(default_factory=dict)
    rejected: int = 0
    errors: list[str] = field(default_factory=list)
    normalized: int = 0  # accepted spans whose values were cut or clamped (canonical.NORMALIZED)

    def reject(self, message: str) -> None:
        self.rejected += 1
        if len(self.errors) < _MAX_ERROR_MESSAGES:
            self.errors.append(message)

    @property
    def error_message(self) -> str:
        if not self.rejected:
            return ""
        more = self.rejected - len(self.errors)
        suffix = f" (and {more} more)" if more > 0 else ""
        return f"rejected {self.rejected} span(s): " + "; ".join(self.errors) + suffix

    def export_response(self) -> ExportTraceServiceResponse:
        """The OTLP answer: `partial_success` names what was rejected, empty when nothing was."""
        response = ExportTraceServiceResponse()
        if self.rejected:
            response.partial_success.rejected_spans = self.rejected
            response.partial_success.error_message = self.error_message
        return response

    def accept_span(self, trace_id: str, is_agent: bool) -> None:
        """Count a good span and note its trace (an agent span marks the trace for good)."""
        self.accepted += 1
        traces = self.traces
        if is_agent or trace_id not in traces:
            traces[trace_id] = is_agent or traces.get(trace_id, False)

    def extend(self, other: DecodedBatch) -> None:
        self.accepted += other.accepted
        self.rows.extend(other.rows)
        for trace_id, has_agent in other.traces.items():
            self.traces[trace_id] = self.traces.get(trace_id, False) or has_agent
        self.rejected += other.rejected
        self.normalized += other.normalized
        self.errors.extend(other.errors[: max(0, _MAX_ERROR_MESSAGES - len(self.errors))])


def ns_to_clickhouse(nanos: int) -> str:
    """Unix nanoseconds as the `seconds.fraction` text DateTime64(9) parses exactly.

    Rows are inserted as JSONCompactEachRow, where a bare integer would be read as seconds.
    """
    seconds, fraction = divmod(nanos, 1_000_000_000)
    return f"{seconds:010d}.{fraction:09d}"  # padded: a short number would read as a date


def any_value_to_str(value: Any) -> str:
    """Render an OTLP AnyValue as the ClickHouse exporter does (pcommon `AsString`).

    Arrays and key-value lists become JSON; inside them, nested arrays or lists (which span
    attributes may not carry, by the OpenTelemetry attribute rules) render as null.
    """
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return str(value.string_value)
    if kind == "int_value":
        return str(value.int_value)
    if kind == "bool_value":
        return "true" if value.bool_value else "false"
    if kind == "double_value":
        return format_double(value.double_value)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    if kind == "array_value":
        return "[" + ",".join(_json_element(item) for item in value.array_value.values) + "]"
    if kind == "kvlist_value":
        items = (json_string(kv.key) + ":" + _json_element(kv.value) for kv in value.kvlist_value.values)
        return "{" + ",".join(items) + "}"
    return ""


def format_double(number: float) -> str:
    """A double as ClickHouse's `toString` prints it: shortest round-trip digits, ES6 layout
    (plain notation from 1e-6 up to 1e21, `1e21` / `1.5e-7` beyond)."""
    if math.isnan(number):
        return "nan"
    if math.isinf(number):
        return "inf" if number > 0 else "-inf"
    if number == 0:
        return "-0" if math.copysign(1.0, number) < 0 else "0"
    text = repr(number)
    mantissa, _, exponent = text.partition("e")
    if 1e-6 <= abs(number) < 1e21:
        if exponent:
            return format(Decimal(text), "f")
        return text[:-2] if text.endswith(".0") else text
    return f"{mantissa}e{int(exponent)}"


# ClickHouse's JSON string escapes: short forms, other control characters as upper-case \\u00XX,
# and the JavaScript line separators.
_JSON_ESCAPES = {code: f"\\u{code:04X}" for code in range(0x20)} | {
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0C: "\\f",
    0x0D: "\\r",
    ord('"'): '\\"',
    ord("\\"): "\\\\",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


def json_string(text: str) -> str:
    """A JSON string literal as ClickHouse's `toJSONString` writes it (slashes left alone)."""
    return '"' + text.translate(_JSON_ESCAPES) + '"'


def _json_element(value: Any) -> str:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return json_string(value.string_value)
    if kind == "int_value":
        return str(value.int_value)
    if kind == "bool_value":
        return "true" if value.bool_value else "false"
    if kind == "double_value":
        number = value.double_value
        return format_double(number) if math.isfinite(number) else "null"
    if kind == "bytes_value":
        return json_string(base64.b64encode(value.bytes_value).decode("ascii"))
    return "null"


def attributes_to_map(key_values: Iterable[Any]) -> dict[str, str]:
    """KeyValue list -> str map; the string case is inlined because it is most of them."""
    result: dict[str, str] = {}
    for kv in key_values:
        value = kv.value
        if value.WhichOneof("value") == "string_value":
            result[kv.key] = value.string_value
        else:
            result[kv.key] = any_value_to_str(value)
    return result


def parse_protobuf(body: bytes) -> ExportTraceServiceRequest:
    """Parse a binary OTLP ExportTraceServiceRequest (strings must be valid UTF-8). A body the
    parser refuses for attribute values nested too deep is parsed with those values cut."""
    try:
        return ExportTraceServiceRequest.FromString(body)
    except DecodeError as exc:
        error = exc
    cut = truncate_deep_values(body)
    if cut is not None:
        try:
            return ExportTraceServiceRequest.FromString(cut)
        except DecodeError:
            pass
    raise OtlpDecodeError(
        f"body is not a valid OTLP protobuf ExportTraceServiceRequest: {error} "
        "(check that it is not truncated, compressed without a Content-Encoding, or nested too deep)"
    ) from error


def parse_json(body: bytes) -> ExportTraceServiceRequest:
    """Parse an OTLP/JSON request; ids are hex strings there, not base64 (OTLP spec)."""
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OtlpDecodeError(f"body is not valid JSON: {exc}") from exc
    except RecursionError:
        raise OtlpDecodeError("body is JSON nested too deep to read (OTLP needs a few dozen)") from None
    if not isinstance(document, dict):
        raise OtlpDecodeError("body must be a JSON object with a 'resourceSpans' list")
    _hex_ids_to_base64(document)
    truncate_deep_json(document)
    try:
        return json_format.ParseDict(document, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    except (json_format.ParseError, TypeError, ValueError) as exc:
        raise OtlpDecodeError(f"body is not an OTLP/JSON ExportTraceServiceRequest: {exc}") from exc
    except RecursionError:
        raise OtlpDecodeError("body is an OTLP/JSON document nested too deep to read") from None


def decode_protobuf(body: bytes) -> DecodedBatch:
    """Decode a binary OTLP request into rows (the Python path)."""
    return decode_request(parse_protobuf(body))


def decode_json(body: bytes) -> DecodedBatch:
    """Decode an OTLP/JSON request into rows (the Python path)."""
    return decode_request(parse_json(body))


# A base64 value that decodes to 3 bytes: an id of a length no valid id has, so the span
# fails id validation with the normal per-span message instead of failing the request.
_INVALID_ID = base64.b64encode(b"bad").decode("ascii")


def _hex_to_b64(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return base64.b64encode(binascii.unhexlify(value)).decode("ascii")
    except (binascii.Error, ValueError):
        return _INVALID_ID


def _hex_ids_to_base64(document: dict[str, Any]) -> None:
    for resource_spans in _dicts(document.get("resourceSpans")):
        for scope_spans in _dicts(resource_spans.get("scopeSpans")):
            for span in _dicts(scope_spans.get("spans")):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = _hex_to_b64(span[key])
                for link in _dicts(span.get("links")):
                    for key in ("traceId", "spanId"):
                        if key in link:
                            link[key] = _hex_to_b64(link[key])


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


# DateTime64(9) holds Int64 nanoseconds: 2262-04-11T23:47:16.854775807 is its last instant, and
# a start time at or past 2^63 would wrap negative where ClickHouse reads it as Int64.
MAX_TIMESTAMP_NS = 2**63 - 1
ZERO_TRACE_ID = bytes(16)
ZERO_SPAN_ID = bytes(8)


def _when(nanos: int) -> str:
    if 0 < nanos <= MAX_TIMESTAMP_NS:
        return datetime.fromtimestamp(nanos // 1_000_000_000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{nanos} ns"


def span_problem(span: Any, first: int = 1, last: int = MAX_TIMESTAMP_NS) -> str | None:
    """Why a span cannot be stored, or None; `first`/`last` bound its start time (ns). The
    defaults are what the columns hold; the receiver narrows them to a window around its clock.

    `canonical._check_spans` tests the same conditions inline (its hot loop) and asks this only
    for the reason: a rule added here goes there too (test_canonical holds both equal)."""
    trace_id = span.trace_id
    if len(trace_id) != 16 or trace_id == ZERO_TRACE_ID:
        return "trace_id must be 16 bytes (32 hex characters) and not all zero"
    span_id = span.span_id
    if len(span_id) != 8 or span_id == ZERO_SPAN_ID:
        return "span_id must be 8 bytes (16 hex characters) and not all zero"
    if len(span.parent_span_id) not in (0, 8):
        return "parent_span_id must be empty or 8 bytes (16 hex characters)"
    if not span.name:
        return "name is missing"
    start = span.start_time_unix_nano
    if start == 0:
        return "start_time_unix_nano is missing"
    end = span.end_time_unix_nano
    if end < start:
        return "end_time_unix_nano is before start_time_unix_nano"
    if start < first or start > last:
        return (
            f"start_time_unix_nano {_when(start)} is outside the accepted window "
            f"{_when(first)} .. {_when(last)}; check the client's clock"
        )
    if end > last:
        return f"end_time_unix_nano {_when(end)} is past the accepted window's end {_when(last)}"
    return None


OPENINFERENCE_AGENT_KIND = "AGENT"
AGENT_SPAN_VALUES = (attr.OPERATION_INVOKE_AGENT, OPENINFERENCE_AGENT_KIND)
"""The rendered values that make a span an agent-run span (`otlp_wire` looks for them in bytes)."""


def is_agent_span(operation: str | None, span_kind: str | None) -> bool:
    """Whether a span's rendered operation / OpenInference kind make it an agent-run span."""
    return operation == attr.OPERATION_INVOKE_AGENT or span_kind == OPENINFERENCE_AGENT_KIND


def decode_request(request: Any) -> DecodedBatch:
    """Turn a parsed ExportTraceServiceRequest into rows in OTEL_TRACES_COLUMNS order."""
    batch = DecodedBatch()
    rows = batch.rows
    for resource_spans in request.resource_spans:
        resource_attrs = attributes_to_map(resource_spans.resource.attributes)
        service_name = resource_attrs.get("service.name", "")
        for scope_spans in resource_spans.scope_spans:
            scope_name = scope_spans.scope.name
            scope_version = scope_spans.scope.version
            for span in scope_spans.spans:
                problem = span_problem(span)
                if problem is not None:
                    batch.reject(f"span {span.name[:80]!r}: {problem}")
                    continue
                span_attrs = attributes_to_map(span.attributes)
                trace_id = span.trace_id.hex()
                is_agent = is_agent_span(
                    span_attrs.get(attr.GEN_AI_OPERATION_NAME), span_attrs.get(attr.OPENINFERENCE_SPAN_KIND)
                )
                batch.accept_span(trace_id, is_agent)
                start = span.start_time_unix_nano
                status = span.status
                kind = span.kind
                events = span.events
                links = span.links
                rows.append(
                    (
                        ns_to_clickhouse(start),
                        trace_id,
                        span.span_id.hex(),
                        span.parent_span_id.hex(),
                        span.trace_state,
                        span.name,
                        _SPAN_KINDS[kind] if 0 <= kind < len(_SPAN_KINDS) else "Unspecified",
                        service_name,
                        resource_attrs,
                        scope_name,
                        scope_version,
                        span_attrs,
                        span.end_time_unix_nano - start,
                        _STATUS_CODES[status.code] if 0 <= status.code < 3 else "Unset",
                        status.message,
                        [ns_to_clickhouse(event.time_unix_nano) for event in events] if events else [],
                        [event.name for event in events] if events else [],
                        [attributes_to_map(event.attributes) for event in events] if events else [],
                        [link.trace_id.hex() for link in links] if links else [],
                        [link.span_id.hex() for link in links] if links else [],
                        [link.trace_state for link in links] if links else [],
                        [attributes_to_map(link.attributes) for link in links] if links else [],
                    )
                )
    return batch
