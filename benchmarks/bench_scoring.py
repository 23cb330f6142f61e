"""Scoring benchmark: metrics computed per second, the online worker's throughput on a store
with a history, and the delay from a run's end to its scores.

Throughput: a store holds `--history` runs already decided (stored straight by SQL) and then a
backlog of `--backlog` new runs; the worker drains the backlog, once as it is configured by
default (a queue cursor, batches of 2,000) and once querying the whole lookback for every batch
of 500 (the worker before the cursor), each on a store of its own.

The delay is measured through a real sidecar on an embedded store with the default quiet
period (2 s): agent runs are sent as OTLP with end times of "now", and the delay is the time
from each run's end until the evaluator wrote its scores. Target: quiet period + 1 s.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
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
from agenttrail.evaluators.scoring.worker import DEFAULT_METRICS, EvaluatorConfig, EvaluatorWorker

TOOLS = ["lookup_order", "search_kb", "issue_refund", "send_email", "escalate", "search_kb"]


def bench_metrics(runs: int = 20_000) -> tuple[float, float, float]:
    """(runs/s, metric values/s, runs per CPU-second): the CPU figure holds on a shared machine."""
    specs = [parse_metric(name) for name in DEFAULT_METRICS]
    reference = [ToolCall(name, {"order_id": 1}) for name in TOOLS]
    predicted = [ToolCall(name, {"order_id": 1 if i % 3 else 2}) for i, name in enumerate(TOOLS[::-1])]
    started, cpu_started = time.perf_counter(), time.process_time()
    for _ in range(runs):
        results = compute_metrics(predicted, reference, specs, latency_s=1.0, failure=False)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return runs / elapsed, runs * len(results) / elapsed, runs / cpu


_RUNS = """
INSERT INTO trajectories (TraceId, RootSpanId, Agent, Task, Start, LatencyS, ToolCalls, Revision,
                          AssembledAt, Version)
SELECT lower(hex(MD5(toString(number + {offset:UInt64})))), 'root', 'bot', 'refund',
       now64(6) - toIntervalSecond({age_s:UInt32}), 1.0, {calls:String}, 1,
       now64(6) - toIntervalSecond({age_s:UInt32}), 1
FROM numbers({count:UInt64})
"""
_DECIDE_ALL = """
INSERT INTO evaluation_decisions
SELECT TraceId, RootSpanId, 'trajectory', {version:String}, Revision, 'scored', '', 'bench', now64(6)
FROM trajectories
"""


def bench_queue(history: int, backlog: int, config: EvaluatorConfig) -> float:
    """Runs/s the worker drains a backlog at, with `history` decided runs in the store."""
    from agenttrail.collector.schema import migrate
    from agenttrail.collector.store import Store, parse_store
    from agenttrail.evaluators.composition import ALL_MIGRATIONS

    calls = '[{"name":"lookup_order","input":{"order_id":1},"output":"ok","status":"ok"}]'
    with tempfile.TemporaryDirectory(prefix="agenttrail-bench-") as tmp:
        store = Store(parse_store(str(Path(tmp) / "store"), "agenttrail"))
        try:
            migrate(store, ALL_MIGRATIONS)
            store_reference_set(
                store,
                parse_reference_set({"refund": {"reference_trajectory": [{"tool_name": "lookup_order"}]}}),
                source="bench",
            )
            worker = EvaluatorWorker(lambda: store, config)
            for offset in range(0, history, 100_000):
                count = min(100_000, history - offset)
                store.command(_RUNS, {"offset": offset, "age_s": 3600, "calls": calls, "count": count})
            store.command(_DECIDE_ALL, {"version": worker.version})
            worker.cycle()  # the first (full) scan finds nothing: the cursor is set, as in a running sidecar
            store.command(_RUNS, {"offset": 10**9, "age_s": 1, "calls": calls, "count": backlog})
            started = time.perf_counter()
            worker.cycle()
            elapsed = time.perf_counter() - started
            assert worker.counters.scored_runs == backlog, worker.counters
            return backlog / elapsed
        finally:
            store.close()


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
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--history", type=int, default=1_000_000, help="runs decided before the backlog")
    parser.add_argument("--backlog", type=int, default=20_000, help="new runs the worker drains")
    args = parser.parse_args()
    runs_per_s, metrics_per_s, runs_per_cpu_s = bench_metrics()
    print(
        f"metrics: {runs_per_s:,.0f} runs/s scored offline = {metrics_per_s:,.0f} metric values/s "
        f"({len(DEFAULT_METRICS)} reference metrics + latency + failure, 6-call trajectories), "
        f"{runs_per_cpu_s:,.0f} runs per CPU-second"
    )
    for label, config in (
        ("default (queue cursor, batches of 2,000)", EvaluatorConfig()),
        ("whole lookback per batch of 500 (before)", EvaluatorConfig(batch_size=500, full_scan_interval_s=0)),
    ):
        rate = bench_queue(args.history, args.backlog, config)
        print(
            f"online worker, {args.backlog:,} new runs over {args.history:,} decided: "
            f"{rate:,.0f} runs/s, {label}",
            flush=True,
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
