"""The receivers' own Python per request: parse, `canonicalize`, re-serialise (CPU ms each).

bench_ingest's agent-shaped requests (512 spans, 64 runs of 8 spans, agent span first in each
run) and the same spans in the order an SDK's batch processor exports them (children end, and
are exported, before their agent span). `canonicalize` with the wire bytes (as the receivers
call it) and without (OTLP/JSON), and the plain reading of every span it replaced
(`tests/canonical_reference.py`). CPU time (`process_time`), the minimum and median of 7 rounds
of 40 requests; the loop is single-threaded, so the load of other processes moves the median
more than the minimum. Prints figures; asserts nothing.

    python benchmarks/bench_canonical.py
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_ingest import agent_request

from agenttrail.collector.canonical import SpanLimits, canonicalize
from agenttrail.collector.otlp_decode import parse_protobuf

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from canonical_reference import reference_canonicalize

ROUNDS = 7
REQUESTS = 40


def sdk_order(body: bytes) -> bytes:
    """The request with each run's agent span moved after its 7 children."""
    request = parse_protobuf(body)
    spans = request.resource_spans[0].scope_spans[0].spans
    copies = [type(span)() for span in spans]
    for copy, span in zip(copies, spans, strict=True):
        copy.CopyFrom(span)
    reordered = []
    for start in range(0, len(copies), 8):
        reordered += [*copies[start + 1 : start + 8], copies[start]]
    del spans[:]
    spans.extend(reordered)
    return request.SerializeToString()


def cpu_ms(bodies: list[bytes], step: Callable[[bytes, Any], object]) -> tuple[float, float]:
    """(min, median) CPU ms per request of `step(body, parsed request)`."""
    rounds = []
    for _ in range(ROUNDS):
        requests = [parse_protobuf(body) for body in bodies]
        started = time.process_time()
        for body, request in zip(bodies, requests, strict=True):
            step(body, request)
        rounds.append((time.process_time() - started) / len(bodies) * 1000)
    return min(rounds), statistics.median(rounds)


def main() -> None:
    limits = SpanLimits()
    first = [agent_request(seed) for seed in range(REQUESTS)]
    orders = {"agent span first": first, "SDK order": [sdk_order(body) for body in first]}
    steps: dict[str, Callable[[bytes, Any], object]] = {
        "parse": lambda body, _: parse_protobuf(body),
        "canonicalize (wire)": lambda body, request: canonicalize(request, limits, wire=body),
        "canonicalize (no wire)": lambda _, request: canonicalize(request, limits),
        "plain reading (before)": lambda _, request: reference_canonicalize(request, limits),
        "re-serialise": lambda _, request: request.SerializeToString(),
    }
    print(f"CPU ms per 512-span request, min / median of {ROUNDS} rounds of {REQUESTS}")
    for order, bodies in orders.items():
        for name, step in steps.items():
            low, median = cpu_ms(bodies, step)
            print(f"  {order:17s} {name:24s} {low:6.2f} / {median:6.2f}")


if __name__ == "__main__":
    main()
