"""A seeded end-to-end fuzzer for the sidecar's OTLP receivers (issue 19).

`FuzzCases(seed)` yields requests for OTLP/HTTP protobuf, OTLP/HTTP JSON and OTLP/gRPC: valid
agent runs mutated at the message level (odd ids and timestamps, NaN, huge names, thousands of
attributes, deep values) or at the byte level (flipped, cut, inserted, repeated bytes), broken
JSON documents and transports (wrong content type, bad gzip), and every `canary_every`-th case a
canary: a valid agent run whose tool calls are known. `run_fuzz` sends the cases several at a
time to a running sidecar and judges every answer against the receivers' contract:

- HTTP: 200 with a parseable ExportTraceServiceResponse (a reason whenever spans were rejected),
  or 4xx with a message; 5xx only as 503 with Retry-After (429 must carry one too); never a
  dropped connection;
- gRPC: OK, or INVALID_ARGUMENT / RESOURCE_EXHAUSTED / UNAVAILABLE with a message; never
  INTERNAL or UNKNOWN;
- a canary is acknowledged whole (retried while refused with a retry hint).

`check_sidecar` then asserts what the sidecar holds: every acknowledged canary readable as its
trajectory, everything accepted stored (nothing quarantined, the spool drained), and ready.
Used by tests/collector/test_fuzz.py (a short run) and benchmarks/bench_fuzz.py (a long one).
"""

from __future__ import annotations

import gzip
import http.client
import json
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import json_format
from google.rpc import status_pb2  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

HTTP_PROTOBUF = "http/protobuf"
HTTP_JSON = "http/json"
GRPC = "grpc"
TRANSPORTS = (HTTP_PROTOBUF, HTTP_JSON, GRPC)
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
_GRPC_ALLOWED = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.UNAVAILABLE,
}
_MS = 1_000_000


@dataclass
class Case:
    """One request: its transport, body and headers; `canary` is set on a known-good run."""

    index: int
    transport: str
    mutation: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    canary: tuple[str, tuple[str, ...]] | None = None  # (trace id hex, tool names in order)


@dataclass
class Outcome:
    """How the sidecar answered one case; `violation` says what broke the contract, if anything."""

    case: Case
    kind: str  # accepted, partial, rejected (4xx / INVALID_ARGUMENT), refused (retry hint), violation
    detail: str = ""
    violation: str | None = None


# -- building requests -----------------------------------------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _kv(key: str, value: Any) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    if isinstance(value, bytes):
        return KeyValue(key=key, value=AnyValue(bytes_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=str(value)))


class FuzzCases:
    """Deterministic cases for one seed: the same seed gives the same mutations and canaries."""

    def __init__(self, seed: int, canary_every: int = 10) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.canary_every = canary_every
        self.now_ns = time.time_ns()

    # valid material

    def _id(self, size: int) -> bytes:
        return bytes(self.rng.getrandbits(8) for _ in range(size - 1)) + b"\x01"

    def agent_run(
        self, tools: tuple[str, ...], agent: str = "fuzz-bot"
    ) -> tuple[bytes, ExportTraceServiceRequest]:
        """A valid run: one invoke_agent span and one execute_tool child per tool, in order."""
        rng = self.rng
        trace, root = self._id(16), self._id(8)
        start = self.now_ns - rng.randrange(1, 3_600_000) * _MS
        request = ExportTraceServiceRequest()
        resource_spans = request.resource_spans.add()
        resource_spans.resource.attributes.extend(
            [_kv("service.name", f"fuzz-svc-{rng.randrange(3)}"), _kv("host.name", "fuzz")]
        )
        scope_spans = resource_spans.scope_spans.add()
        scope_spans.scope.name = "otlp_fuzz"
        spans = scope_spans.spans
        agent_span = spans.add(
            trace_id=trace,
            span_id=root,
            name=f"invoke_agent {agent}",
            kind=Span.SPAN_KIND_INTERNAL,
            start_time_unix_nano=start,
            end_time_unix_nano=start + (10 * len(tools) + 5) * _MS,
        )
        agent_span.attributes.extend(
            [_kv("gen_ai.operation.name", "invoke_agent"), _kv("gen_ai.agent.name", agent)]
        )
        for position, tool in enumerate(tools):
            tool_start = start + (1 + 10 * position) * _MS
            span = spans.add(
                trace_id=trace,
                span_id=self._id(8),
                parent_span_id=root,
                name=f"execute_tool {tool}",
                kind=Span.SPAN_KIND_INTERNAL,
                start_time_unix_nano=tool_start,
                end_time_unix_nano=tool_start + 5 * _MS,
            )
            span.attributes.extend(
                [
                    _kv("gen_ai.operation.name", "execute_tool"),
                    _kv("gen_ai.tool.name", tool),
                    _kv("gen_ai.tool.call.arguments", json.dumps({"q": rng.randrange(1000)})),
                    _kv("fuzz.ratio", rng.random()),
                    _kv("fuzz.flag", rng.random() < 0.5),
                    _kv("fuzz.blob", rng.randbytes(rng.randrange(0, 12))),
                ]
            )
            if rng.random() < 0.3:
                span.status.CopyFrom(Status(code=Status.STATUS_CODE_ERROR, message="tool failed"))
                event = span.events.add(name="exception", time_unix_nano=tool_start + _MS)
                event.attributes.append(_kv("exception.type", "ValueError"))
        return trace, request

    def canary(self, index: int) -> Case:
        tools = tuple(f"canary-{self.seed}-{index}-{k}" for k in range(self.rng.randrange(1, 4)))
        trace, request = self.agent_run(tools, agent="canary")
        transport = self.rng.choice(TRANSPORTS)
        body, headers = self._encode(request, transport)
        return Case(index, transport, "canary", body, headers, canary=(trace.hex(), tools))

    def _encode(self, request: ExportTraceServiceRequest, transport: str) -> tuple[bytes, dict[str, str]]:
        if transport == HTTP_JSON:
            return json.dumps(to_otlp_json(request)).encode(), {"Content-Type": "application/json"}
        headers = {"Content-Type": "application/x-protobuf"} if transport == HTTP_PROTOBUF else {}
        return request.SerializeToString(), headers

    # mutations of the message (both encodings)

    def _pick_span(self, request: ExportTraceServiceRequest) -> Any:
        return self.rng.choice(list(request.resource_spans[0].scope_spans[0].spans))

    def _mutate_message(self, request: ExportTraceServiceRequest) -> str:
        rng = self.rng
        span = self._pick_span(request)
        choice = rng.randrange(13)
        if choice == 12:
            choice = 2  # times: the guard with the most cases
        if choice == 0:
            span.trace_id = rng.choice([b"", b"\x01", bytes(16), self._id(15), self._id(17), self._id(32)])
            return "trace id"
        if choice == 1:
            span.span_id = rng.choice([b"", bytes(8), self._id(7), self._id(9)])
            if rng.random() < 0.5:
                span.parent_span_id = self._id(rng.choice([1, 4, 16]))
            return "span id"
        if choice == 2:
            day = 86_400 * 10**9
            odd = [0, 1, 2**63 - 1, 2**63, 2**64 - 1, self.now_ns - 50 * 365 * day, self.now_ns + 30 * day]
            which = rng.randrange(3)
            if which != 1:
                span.start_time_unix_nano = rng.choice(odd)
            if which != 0:
                span.end_time_unix_nano = rng.choice(odd[2:])
            return ("start time", "end time", "start and end times")[which]
        if choice == 3:
            span.end_time_unix_nano = max(0, span.start_time_unix_nano - rng.randrange(1, 10**9))
            return "end before start"
        if choice == 4:
            event = span.events.add(name="odd", time_unix_nano=rng.choice([0, 2**63, 2**64 - 1]))
            event.attributes.append(_kv("x", rng.choice([math.nan, math.inf, -math.inf])))
            return "event time"
        if choice == 5:
            span.attributes.extend(
                [_kv(f"nan{k}", rng.choice([math.nan, math.inf, -math.inf, -0.0, 5e-324])) for k in range(3)]
            )
            return "nan"
        if choice == 6:
            span.name = rng.choice(["", "x" * rng.randrange(1025, 200_000), "\u0000\ud7ff\U0010ffff" * 50])
            return "name"
        if choice == 7:
            span.attributes.extend([_kv(f"k{k}", k) for k in range(rng.randrange(1001, 3000))])
            return "many attributes"
        if choice == 8:
            for k in range(rng.randrange(1001, 1500)):
                span.events.add(name=f"e{k}", time_unix_nano=span.start_time_unix_nano)
            return "many events"
        if choice == 9:
            value = span.attributes.add(key="deepish").value
            for _ in range(rng.randrange(2, 30)):
                value = (
                    value.kvlist_value.values.add(key="k").value
                    if rng.random() < 0.5
                    else (value.array_value.values.add())
                )
            value.string_value = "leaf"
            return "nested value"
        if choice == 10:
            request.resource_spans[0].resource.attributes.extend(
                [_kv(f"r{k}", "v" * rng.randrange(0, 50)) for k in range(rng.randrange(1, 1500))]
            )
            return "resource attributes"
        span.links.add(trace_id=self._id(rng.choice([0, 3, 16])), span_id=self._id(rng.choice([0, 8, 12])))
        span.kind = rng.choice([0, 5, 6])
        return "links and kind"

    # mutations of bytes (protobuf)

    def _mutate_bytes(self, body: bytes) -> tuple[bytes, str]:
        rng = self.rng
        data = bytearray(body)
        choice = rng.randrange(8)
        if choice == 0 and data:
            for _ in range(rng.randrange(1, 6)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            return bytes(data), "flipped bits"
        if choice == 1 and data:
            for _ in range(rng.randrange(1, 4)):
                data[rng.randrange(len(data))] = rng.getrandbits(8)
            return bytes(data), "random bytes"
        if choice == 2:
            return bytes(data[: rng.randrange(len(data) + 1)]), "truncated"
        if choice == 3:
            at = rng.randrange(len(data) + 1)
            return bytes(data[:at] + rng.randbytes(rng.randrange(1, 16)) + data[at:]), "inserted bytes"
        if choice == 4 and data:
            at = rng.randrange(len(data))
            chunk = data[at : at + rng.randrange(1, 64)]
            return bytes(data[:at] + chunk * rng.randrange(2, 5) + data[at:]), "repeated bytes"
        if choice == 5:
            return rng.randbytes(rng.randrange(0, 256)), "garbage"
        if choice == 6:
            # An attribute value nested past the parser's limit, appended to the first span.
            value = _field(1, b"leaf")
            for _ in range(rng.randrange(30, 120)):
                value = _field(5, _field(1, value))
            return bytes(data) + _field(
                1, _field(2, _field(2, _field(9, _field(1, b"deep") + _field(2, value))))
            ), ("deep value")
        # An unknown field or a wrong wire type at the top level.
        extra = rng.choice([_field(rng.randrange(2, 2000), rng.randbytes(8)), b"\x0f\xff\xff\xff\xff\x0f"])
        return bytes(data) + extra, "unknown field"

    # mutations of OTLP/JSON documents

    def _mutate_json(self, document: dict[str, Any]) -> tuple[bytes, str]:
        rng = self.rng
        span = rng.choice(document["resourceSpans"][0]["scopeSpans"][0]["spans"])
        choice = rng.randrange(9)
        if choice == 0:
            span[rng.choice(["traceId", "spanId", "parentSpanId"])] = rng.choice(
                ["zz", "abc", "", 12, None, [1]]
            )
            mutation = "json id"
        elif choice == 1:
            span[rng.choice(["startTimeUnixNano", "endTimeUnixNano"])] = rng.choice(
                ["-1", "abc", 1.5, str(2**64), str(2**70), -5, None, {}]
            )
            mutation = "json timestamp"
        elif choice == 2:
            span[rng.choice(["name", "kind", "attributes", "events", "status"])] = rng.choice(
                [17, "x", [], {}, [None], [{"key": 1}], True]
            )
            mutation = "json wrong type"
        elif choice == 3:
            span["attributes"] = [
                {"key": "v", "value": {"doubleValue": rng.choice(["NaN", "Infinity", "nope", 1e308])}}
            ]
            mutation = "json double"
        elif choice == 4:
            value: dict[str, Any] = {"stringValue": "leaf"}
            for _ in range(rng.randrange(20, 200)):
                value = {"arrayValue": {"values": [value]}}
            span.setdefault("attributes", []).append({"key": "deep", "value": value})
            mutation = "json deep value"
        elif choice == 5:
            depth = rng.randrange(1000, 50_000)
            return b'{"resourceSpans": ' + b"[" * depth + b"]" * depth + b"}", "json nested document"
        elif choice == 6:
            text = json.dumps(document).encode()
            return text[: rng.randrange(len(text))], "json truncated"
        elif choice == 7:
            edited = bytearray(json.dumps(document).encode())
            for _ in range(rng.randrange(1, 4)):
                edited[rng.randrange(len(edited))] = rng.choice([0xFF, 0xC3, ord("{"), ord('"'), 0])
            return bytes(edited), "json bytes"
        else:
            document[rng.choice(["resourceSpans", "unknownKey"])] = rng.choice([None, 5, "x", {}, [[]]])
            mutation = "json top level"
        return json.dumps(document).encode(), mutation

    # the stream of cases

    def case(self, index: int) -> Case:
        if index % self.canary_every == self.canary_every - 1:
            return self.canary(index)
        rng = self.rng
        transport = rng.choice(TRANSPORTS)
        tools = tuple(f"tool-{rng.randrange(5)}" for _ in range(rng.randrange(1, 4)))
        _, request = self.agent_run(tools)
        mutations = [self._mutate_message(request) for _ in range(rng.choice([0, 1, 1, 2]))]
        body, headers = self._encode(request, transport)
        if transport == HTTP_JSON:
            if rng.random() < 0.5:
                body, mutation = self._mutate_json(to_otlp_json(request))
                mutations.append(mutation)
        elif rng.random() < 0.5:
            body, mutation = self._mutate_bytes(body)
            mutations.append(mutation)
        if transport != GRPC and rng.random() < 0.1:
            choice = rng.randrange(4)
            if choice == 0:
                headers["Content-Type"] = rng.choice(
                    ["text/plain", "", "application/grpc", "application/json; x"]
                )
                mutations.append("content type")
            elif choice == 1:
                body, headers["Content-Encoding"] = gzip.compress(body), "gzip"
                mutations.append("gzip")
            elif choice == 2:
                headers["Content-Encoding"] = rng.choice(["gzip", "br", "deflate"])
                mutations.append("bad content encoding")
            else:
                compressed = gzip.compress(body)
                body, headers["Content-Encoding"] = compressed[: rng.randrange(len(compressed))], "gzip"
                mutations.append("truncated gzip")
        return Case(index, transport, "+".join(mutations) or "valid", body, headers)

    def cases(self, count: int) -> Iterator[Case]:
        for index in range(count):
            yield self.case(index)


def to_otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """OTLP/JSON as the spec writes it: hex ids (protobuf's JSON mapping would give base64)."""
    document: dict[str, Any] = json_format.MessageToDict(request)
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = _b64_to_hex(span[key])
                for link in span.get("links", []):
                    for key in ("traceId", "spanId"):
                        if key in link:
                            link[key] = _b64_to_hex(link[key])
    return document


def _b64_to_hex(value: str) -> str:
    import base64

    return base64.b64decode(value).hex()


# -- sending and judging ---------------------------------------------------------------------


class Sender:
    """Sends cases to one sidecar: a fresh HTTP connection per request (a dropped connection
    shows as such), one shared gRPC channel."""

    def __init__(self, http_address: str, grpc_address: str, timeout_s: float = 60.0) -> None:
        self.http_address = http_address
        self.timeout_s = timeout_s
        self._channel = grpc.insecure_channel(
            grpc_address, options=[("grpc.max_send_message_length", 256 << 20)]
        )
        self._export = self._channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)

    def close(self) -> None:
        self._channel.close()

    def send(self, case: Case) -> Outcome:
        if case.transport == GRPC:
            return self._send_grpc(case)
        return self._send_http(case)

    def _send_http(self, case: Case) -> Outcome:
        host, port = self.http_address.rsplit(":", 1)
        connection = http.client.HTTPConnection(host, int(port), timeout=self.timeout_s)
        try:
            connection.request("POST", "/v1/traces", body=case.body, headers=case.headers)
            response = connection.getresponse()
            status, headers, body = response.status, response.headers, response.read()
        except (OSError, http.client.HTTPException) as exc:
            return Outcome(case, "violation", violation=f"connection failed: {exc!r}")
        finally:
            connection.close()
        json_reply = (headers.get("Content-Type") or "").startswith("application/json")
        if status == 200:
            try:
                if json_reply:
                    reply = json_format.Parse(body or b"{}", ExportTraceServiceResponse())
                else:
                    reply = ExportTraceServiceResponse.FromString(body)
            except Exception as exc:
                return Outcome(
                    case, "violation", violation=f"200 with an unreadable body {body[:80]!r}: {exc}"
                )
            return _judge_partial(
                case, reply.partial_success.rejected_spans, reply.partial_success.error_message
            )
        message = _status_message(body, json_reply)
        if status in (429, 503):
            if not headers.get("Retry-After"):
                return Outcome(case, "violation", violation=f"{status} without Retry-After: {message}")
            return Outcome(case, "refused", f"{status} {message}")
        if 400 <= status < 500 and message:
            return Outcome(case, "rejected", f"{status} {message}")
        return Outcome(case, "violation", violation=f"HTTP {status} {message or body[:200]!r}")

    def _send_grpc(self, case: Case) -> Outcome:
        try:
            body = self._export(case.body, timeout=self.timeout_s)
        except grpc.RpcError as exc:
            code, details = exc.code(), exc.details() or ""
            if code in _GRPC_ALLOWED and details:
                kind = "rejected" if code == grpc.StatusCode.INVALID_ARGUMENT else "refused"
                return Outcome(case, kind, f"{code.name} {details}")
            return Outcome(case, "violation", violation=f"gRPC {code.name} {details}")
        reply = ExportTraceServiceResponse.FromString(body)
        return _judge_partial(case, reply.partial_success.rejected_spans, reply.partial_success.error_message)


def _status_message(body: bytes, json_reply: bool) -> str:
    try:
        if json_reply:
            return str(json.loads(body).get("message", ""))
        return str(status_pb2.Status.FromString(body).message)
    except Exception:
        return ""


def _judge_partial(case: Case, rejected: int, message: str) -> Outcome:
    if rejected and not message:
        return Outcome(case, "violation", violation=f"{rejected} spans rejected without a reason")
    if case.canary is not None and rejected:
        return Outcome(case, "violation", violation=f"canary lost {rejected} spans: {message}")
    return Outcome(case, "partial" if rejected else "accepted", message)


@dataclass
class FuzzReport:
    outcomes: list[Outcome]
    elapsed_s: float
    acked_canaries: list[tuple[str, tuple[str, ...]]]

    @property
    def violations(self) -> list[Outcome]:
        return [outcome for outcome in self.outcomes if outcome.violation]

    def by_kind(self) -> Counter[str]:
        return Counter(outcome.kind for outcome in self.outcomes)

    def by_transport(self) -> Counter[tuple[str, str]]:
        return Counter((outcome.case.transport, outcome.kind) for outcome in self.outcomes)

    def describe_violations(self, limit: int = 10) -> str:
        return "\n".join(
            f"case {o.case.index} ({o.case.transport}, {o.case.mutation}): {o.violation}"
            for o in self.violations[:limit]
        )


def run_fuzz(
    http_address: str,
    grpc_address: str,
    cases: Iterator[Case],
    *,
    concurrency: int = 4,
    canary_tries: int = 50,
    progress: Callable[[int], None] | None = None,
) -> FuzzReport:
    """Send `cases` `concurrency` at a time; a canary refused with a retry hint is sent again."""
    sender = Sender(http_address, grpc_address)
    outcomes: list[Outcome] = []
    acked: list[tuple[str, tuple[str, ...]]] = []
    lock = threading.Lock()

    def one(case: Case) -> None:
        outcome = sender.send(case)
        tries = 1
        while case.canary is not None and outcome.kind == "refused" and tries < canary_tries:
            time.sleep(0.2)
            outcome, tries = sender.send(case), tries + 1
        if outcome.violation is None:
            case.body = b""  # kept only where it reproduces a violation
        with lock:
            outcomes.append(outcome)
            if case.canary is not None and outcome.kind == "accepted":
                acked.append(case.canary)
            if progress is not None:
                progress(len(outcomes))

    def client() -> None:
        # Cases are built as they are sent: a long run never holds them all.
        while True:
            with lock:
                case = next(cases, None)
            if case is None:
                return
            one(case)

    started = time.perf_counter()
    try:
        with ThreadPoolExecutor(concurrency, thread_name_prefix="fuzz-client") as pool:
            for future in [pool.submit(client) for _ in range(concurrency)]:
                future.result()
    finally:
        sender.close()
    outcomes.sort(key=lambda outcome: outcome.case.index)
    return FuzzReport(outcomes, time.perf_counter() - started, acked)


def check_sidecar(sidecar: Any, report: FuzzReport, timeout_s: float = 120.0) -> list[str]:
    """What the sidecar got wrong after a fuzz run (empty when nothing): canaries acknowledged
    but not readable as their trajectory, accepted spans not stored, quarantine, unreadiness."""
    from agenttrail.collector.queries import TrajectoryFilter, query_trajectories

    problems: list[str] = []
    if not sidecar.wait_until_assembled(timeout_s):
        problems.append(f"the sidecar did not store and assemble everything within {timeout_s:g} s")
    for trace, tools in report.acked_canaries:
        runs = query_trajectories(sidecar.store, TrajectoryFilter(trace_id=trace))
        names = [tuple(call["name"] for call in run["tool_calls"]) for run in runs]
        if names != [tools]:
            problems.append(f"canary {trace} acknowledged with tools {tools}, stored as {names}")
    # What was stored lies inside the window the receiver promised (no wrapped or clamped-away
    # times): start within [now - max age, now + max future], end no later than the window's end.
    config = sidecar.config
    now_ns = time.time_ns()
    ahead_ns = int((config.span_max_future_s + 3600) * 1e9)
    [(outside,)] = sidecar.store.query(
        "SELECT count() FROM otel_traces WHERE Timestamp < now64(9) - toIntervalSecond({age:UInt64}) "
        "OR toUnixTimestamp64Nano(Timestamp) > {last:Int64} "
        "OR Duration > {last:Int64} - toUnixTimestamp64Nano(Timestamp)",
        {"age": int(config.span_max_age_days * 86_400) + 3600, "last": now_ns + ahead_ns},
    )
    if outside:
        problems.append(f"{outside} stored spans start or end outside the accepted window")
    counters = sidecar.pipeline.counters
    if counters.stored_spans != counters.accepted_spans:
        problems.append(
            f"{counters.accepted_spans} spans accepted, {counters.stored_spans} stored, "
            f"{counters.quarantined_spans} quarantined"
        )
    entries = sidecar.pipeline.quarantine.entries()
    if entries:
        problems.append(f"{len(entries)} quarantined: {entries[0].reason}")
    leftover = sorted(path.name for path in sidecar.spool_dir().glob("segment-*.spool"))
    if leftover:
        problems.append(f"spool segments left behind: {leftover}")
    healthy, detail = sidecar.health()
    if not healthy or detail["store"] != "ok":
        problems.append(f"not ready after the run: {detail}")
    return problems
