"""Where each span lies in a binary OTLP request, read from the wire bytes without parsing them.

`canonicalize` reads every span of a request through the parsed message, at several
microseconds per span of Python. Two of its questions the bytes answer for all spans at once:
a span whose bytes do not contain "invoke_agent" or "AGENT" cannot be an agent-run span (the
values `is_agent_span` looks for are string values, stored verbatim on the wire), and a span of
L bytes cannot hold more than L // 2 attributes, links or link attributes (each entry takes at
least a tag and a length byte). So only the spans the bytes cannot rule out are read further.

The walk follows only the request's `resource_spans` (1), their `scope_spans` (2) and those's
`spans` (2), as length-delimited fields, in wire order, which is the order of the parsed
repeated fields; every other field is skipped by its wire type, as a parser keeps it unknown.
"""

from __future__ import annotations

from dataclasses import dataclass

from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.otlp_decode import AGENT_SPAN_VALUES

_OPERATION, _KIND = (value.encode() for value in AGENT_SPAN_VALUES)
_LEN = 2
_START_GROUP = 3
_END_GROUP = 4


class _Unwalkable(AgentTrailError):
    """The bytes are not a protobuf message this walk follows (the caller reads every span)."""


@dataclass(frozen=True, slots=True)
class SpanLayout:
    """Where each span of a request lies, in order over all resources and scopes (one flat index)."""

    body: bytes
    starts: list[int]  # offset of each span's message in `body`
    ends: list[int]
    per_scope: list[int]  # spans in each ScopeSpans, in order over all resources

    def size(self, index: int) -> int:
        """Bytes of the span's message."""
        return self.ends[index] - self.starts[index]

    def may_be_agent(self, index: int) -> bool:
        """False if the span's bytes hold no value that makes an agent-run span."""
        start, end = self.starts[index], self.ends[index]
        return self.body.find(_OPERATION, start, end) >= 0 or self.body.find(_KIND, start, end) >= 0


def span_layout(body: bytes) -> SpanLayout | None:
    """The layout of a binary ExportTraceServiceRequest's spans, or None if the walk cannot
    follow the bytes (the parser may still accept them: then every span is read)."""
    starts: list[int] = []
    ends: list[int] = []
    per_scope: list[int] = []
    try:
        for resource_start, resource_end in _messages(body, 0, len(body), 1):
            for scope_start, scope_end in _messages(body, resource_start, resource_end, 2):
                before = len(starts)
                _spans(body, scope_start, scope_end, starts, ends)
                per_scope.append(len(starts) - before)
    except (_Unwalkable, IndexError):
        return None
    return SpanLayout(body, starts, ends, per_scope)


def _messages(data: bytes, offset: int, end: int, number: int) -> list[tuple[int, int]]:
    """[start, end) of each length-delimited field `number` of the message in data[offset:end]."""
    found: list[tuple[int, int]] = []
    while offset < end:
        tag, offset = _varint(data, offset)
        wire = tag & 7
        if wire == _LEN:
            length, offset = _varint(data, offset)
            if tag >> 3 == number:
                found.append((offset, offset + length))
            offset += length
        else:
            offset = _skip(data, offset, tag)
    if offset != end:
        raise _Unwalkable
    return found


def _spans(data: bytes, offset: int, end: int, starts: list[int], ends: list[int]) -> None:
    """`_messages(data, offset, end, 2)` into `starts` / `ends`, unrolled for the one case met
    hundreds of times a request: a span (tag 0x12) of under 16 KiB (a length of 1-2 bytes)."""
    while offset < end:
        if data[offset] == 0x12:
            length = data[offset + 1]
            if length < 0x80:
                offset += 2
            else:
                high = data[offset + 2]
                if high >= 0x80:
                    length, offset = _varint(data, offset + 1)
                else:
                    length = (length & 0x7F) | (high << 7)
                    offset += 3
            starts.append(offset)
            offset += length
            ends.append(offset)
            continue
        tag, offset = _varint(data, offset)
        if tag & 7 == _LEN:
            length, offset = _varint(data, offset)
            if tag >> 3 == 2:
                starts.append(offset)
                ends.append(offset + length)
            offset += length
        else:
            offset = _skip(data, offset, tag)
    if offset != end:
        raise _Unwalkable


def _skip(data: bytes, offset: int, tag: int) -> int:
    """The offset after a field that is not length-delimited (a group with all it holds)."""
    wire = tag & 7
    if wire == 0:
        return _varint(data, offset)[1]
    if wire == 1:
        return offset + 8
    if wire == 5:
        return offset + 4
    if wire == _START_GROUP:
        while True:
            inner, offset = _varint(data, offset)
            if inner & 7 == _END_GROUP:
                if inner >> 3 != tag >> 3:
                    raise _Unwalkable
                return offset
            if inner & 7 == _LEN:
                length, offset = _varint(data, offset)
                offset += length
            else:
                offset = _skip(data, offset, inner)
            if offset > len(data):
                raise _Unwalkable
    raise _Unwalkable


def _varint(data: bytes, offset: int) -> tuple[int, int]:
    byte = data[offset]
    if byte < 0x80:
        return byte, offset + 1
    value = byte & 0x7F
    shift = 7
    while True:
        offset += 1
        byte = data[offset]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, offset + 1
        shift += 7
        if shift > 63:
            raise _Unwalkable
