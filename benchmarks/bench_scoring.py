"""Scoring benchmark: metrics computed per second, and the delay from a run's end to its scores.

The delay is measured through a real sidecar on an embedded store with the default quiet
period (2 s): agent runs are sent as OTLP with end times of "now", and the delay is the time
from each run's end until the evaluator wrote its scores. Target: quiet period + 1 s.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans

from agenttrail.collector.config import SidecarConfig
from agenttrail.evaluators.composition import build_sidecar
from agenttrail.evaluators.metrics import ToolCall, compute_metrics, parse_metric
from agenttrail.evaluators.scoring.reference_store import store_reference_set
from agenttrail.evaluators.scoring.references import parse_reference_set
from agenttrail.evaluators.scoring.worker import DEFAULT_METRICS

TOOLS = ["lookup_order", "search_kb", "issue_refund", "send_email", "escalate", "search_kb"]


def bench_metrics(runs: int = 20_000) -> tuple[float, float]:
    specs = [parse_metric(name) for name in DEFAULT_METRICS]
    reference = [ToolCall(name, {"order_id": 1}) for name in TOOLS]
    predicted = [ToolCall(name, {"order_id": 1 if i % 3 else 2}) for i, name in enumerate(TOOLS[::-1])]
    started = time.perf_counter()
    for _ in range(runs):
        results = compute_metrics(predicted, reference, specs, latency_s=1.0, failure=False)
    elapsed = time.perf_counter() - started
    return runs / elapsed, runs * len(results) / elapsed


def run_request(count: int) -> bytes:
    scope = ScopeSpans()
    now = time.time_ns()
    for _ in range(count):
        trace, root = os.urandom(16), os.urandom(8)
        span = scope.spans.add(
            trace_id=trace,
            span_id=root,
            name="invoke_agent bot",
            kind=1,
            start_time_unix_nano=now - 50_000_000,
            end_time_unix_nano=now,
        )
        span.attributes.extend(
            [
                KeyValue(key="gen_ai.operation.name", value=AnyValue(string_value="invoke_agent")),
                KeyValue(key="agenttrail.task", value=AnyValue(string_value="refund")),
            ]
        )
        for step, tool in enumerate(TOOLS[:3]):
            child = scope.spans.add(
                trace_id=trace,
                span_id=os.urandom(8),
                parent_span_id=root,
                name=f"execute_tool {tool}",
                kind=1,
                start_time_unix_nano=now - 40_000_000 + step * 10_000_000,
                end_time_unix_nano=now - 35_000_000 + step * 10_000_000,
            )
            child.attributes.extend(
                [
                    KeyValue(key="gen_ai.operation.name", value=AnyValue(string_value="execute_tool")),
                    KeyValue(key="gen_ai.tool.name", value=AnyValue(string_value=tool)),
                ]
            )
    resource = ResourceSpans(scope_spans=[scope])
    resource.resource.attributes.append(KeyValue(key="service.name", value=AnyValue(string_value="bench")))
    return ExportTraceServiceRequest(resource_spans=[resource]).SerializeToString()


def bench_score_delay(rounds: int = 10, runs_per_round: int = 50) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="agenttrail-bench-") as tmp:
        sidecar = build_sidecar(
            SidecarConfig(store=str(Path(tmp) / "store"), grpc="127.0.0.1:0", http="127.0.0.1:0")
        )
        sidecar.start()
        try:
            assert sidecar.store is not None
            assert sidecar.pipeline is not None
            store_reference_set(
                sidecar.store,
                parse_reference_set(
                    {"refund": {"reference_trajectory": [{"tool_name": t} for t in TOOLS[:3]]}}
                ),
                source="bench",
            )
            worker = next(w for w in sidecar.workers if w.name == "evaluator")
            for _ in range(rounds):
                sidecar.pipeline.accept(run_request(runs_per_round))
                time.sleep(0.5)
            deadline = time.monotonic() + 60
            target = rounds * runs_per_round
            while worker.counters.scored_runs < target and time.monotonic() < deadline:  # type: ignore[attr-defined]
                time.sleep(0.05)
            return list(worker.counters.score_delays_s)  # type: ignore[attr-defined]
        finally:
            sidecar.stop()


def main() -> None:
    runs_per_s, metrics_per_s = bench_metrics()
    print(
        f"metrics: {runs_per_s:,.0f} runs/s scored offline = {metrics_per_s:,.0f} metric values/s "
        f"({len(DEFAULT_METRICS)} reference metrics + latency + failure, 6-call trajectories)"
    )
    delays = sorted(bench_score_delay())
    if not delays:
        print("score delay: no run was scored", file=sys.stderr)
        return
    print(
        f"run end -> stored scores (quiet period 2.0 s, {len(delays)} runs): "
        f"p50 {statistics.median(delays):.2f} s, p95 {delays[int(len(delays) * 0.95)]:.2f} s, "
        f"max {delays[-1]:.2f} s (target: quiet period + 1 s = 3.0 s)"
    )


if __name__ == "__main__":
    main()
