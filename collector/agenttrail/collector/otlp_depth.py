"""Attribute values nested too deep to parse: cut them to a marker instead of failing the request.

Protobuf parsers refuse messages nested deeper than about 100 levels (upb), which an attribute
value nested ~47 deep reaches, so the whole request would fail. When parsing fails,
`truncate_deep_values` rewrites the body at the wire level, replacing every AnyValue deeper than
MAX_VALUE_DEPTH with the marker text, and parsing is tried again. OTLP/JSON documents get the
same cut before they are turned into a message (`truncate_deep_json`).
"""

from __future__ import annotations

from typing import Any

from agenttrail.collector.errors import AgentTrailError

MAX_VALUE_DEPTH = 32
DEEP_VALUE_MARKER = f"[agenttrail: value nested deeper than {MAX_VALUE_DEPTH} levels was cut]"

_CHILDREN: dict[str, dict[int, str]] = {
    "request": {1: "resource_spans"},
    "resource_spans": {1: "resource", 2: "scope_spans"},
    "resource": {1: "key_value"},
    "scope_spans": {1: "scope", 2: "span"},
    "scope": {3: "key_value"},
    "span": {9: "key_value", 11: "event", 13: "link"},
    "event": {3: "key_value"},
    "link": {4: "key_value"},
    "key_value": {2: "any_value"},
    "any_value": {5: "array_value", 6: "kvlist_value"},
    "array_value": {1: "any_value"},
    "kvlist_value": {1: "key_value"},
}


class _Malformed(AgentTrailError):
    """The bytes are not a well-formed protobuf message; the body is left as it came."""


def _read_varint(data: bytes, offset: int) -> tuple[int, int]:
    value = shift = 0
    while offset < len(data):
        byte = data[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, offset
        shift += 7
        if shift > 63:
            break
    raise _Malformed


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_MARKER_VALUE = b"\x0a" + _varint(len(DEEP_VALUE_MARKER.encode())) + DEEP_VALUE_MARKER.encode()


def _rewrite(data: bytes, message: str, depth: int) -> tuple[bytes, int]:
    """(rewritten message, values cut); `depth` counts the AnyValues above this message."""
    children = _CHILDREN[message]
    out = bytearray()
    cut = 0
    offset = 0
    while offset < len(data):
        start = offset
        tag, offset = _read_varint(data, offset)
        wire = tag & 7
        if wire == 0:
            _, offset = _read_varint(data, offset)
        elif wire == 1:
            offset += 8
        elif wire == 5:
            offset += 4
        elif wire == 2:
            length, offset = _read_varint(data, offset)
            child = children.get(tag >> 3)
            if child is not None:
                body = data[offset : offset + length]
                if len(body) != length:
                    raise _Malformed
                offset += length
                if child == "any_value" and depth >= MAX_VALUE_DEPTH:
                    body, child_cut = _MARKER_VALUE, 1
                else:
                    body, child_cut = _rewrite(body, child, depth + (child == "any_value"))
                out += _varint(tag) + _varint(len(body)) + body
                cut += child_cut
                continue
            offset += length
        else:
            raise _Malformed  # groups: no OTLP message uses them
        if offset > len(data):
            raise _Malformed
        out += data[start:offset]
    return bytes(out), cut


def truncate_deep_values(body: bytes) -> bytes | None:
    """The body with over-deep attribute values replaced by a marker, or None if it has none
    (or is not a well-formed protobuf message at all)."""
    try:
        rewritten, cut = _rewrite(body, "request", 0)
    except _Malformed:
        return None
    return rewritten if cut else None


_JSON_CHILDREN = {"arrayValue": "values", "kvlistValue": "values"}


def _truncate_json_value(value: Any, depth: int) -> Any:
    if not isinstance(value, dict):
        return value
    if depth >= MAX_VALUE_DEPTH:
        return {"stringValue": DEEP_VALUE_MARKER}
    for kind in ("arrayValue", "kvlistValue"):
        inner = value.get(kind)
        if isinstance(inner, dict) and isinstance(inner.get("values"), list):
            if kind == "arrayValue":
                inner["values"] = [_truncate_json_value(item, depth + 1) for item in inner["values"]]
            else:
                for kv in inner["values"]:
                    if isinstance(kv, dict) and "value" in kv:
                        kv["value"] = _truncate_json_value(kv["value"], depth + 1)
    return value


def _truncate_json_attributes(holder: Any) -> None:
    if isinstance(holder, dict) and isinstance(holder.get("attributes"), list):
        for kv in holder["attributes"]:
            if isinstance(kv, dict) and "value" in kv:
                kv["value"] = _truncate_json_value(kv["value"], 0)


def truncate_deep_json(document: dict[str, Any]) -> None:
    """Replace over-deep attribute values of an OTLP/JSON document in place."""
    for resource_spans in _dicts(document.get("resourceSpans")):
        _truncate_json_attributes(resource_spans.get("resource"))
        for scope_spans in _dicts(resource_spans.get("scopeSpans")):
            _truncate_json_attributes(scope_spans.get("scope"))
            for span in _dicts(scope_spans.get("spans")):
                _truncate_json_attributes(span)
                for item in _dicts(span.get("events")) + _dicts(span.get("links")):
                    _truncate_json_attributes(item)


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
