"""Collector ingest benchmark: spans/s persisted by one `agenttrail serve` process.

The collector runs as its own process on an embedded store; this process sends pre-encoded
OTLP/gRPC requests of 512 agent-shaped spans (an agent span, tool spans with arguments and
results, chat spans with token usage) from several client threads, and measures the time
until the collector reports every span stored in ClickHouse. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans

SPANS_PER_REQUEST = 512
TOOLS = ["lookup_order", "search_kb", "issue_refund", "send_email"]


def _kv(key: str, value: str | int) -> KeyValue:
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def agent_request(seed: int, start_ns: int | None = None) -> bytes:
    """512 spans: runs of 1 agent span + 1 chat span + 6 tool spans (8 spans a run), the runs
    10 ms apart from `start_ns` (default: now)."""
    resource = ResourceSpans()
    resource.resource.attributes.extend(
        [_kv("service.name", "support-agent"), _kv("service.version", "1.4.2"), _kv("host.name", "pod-7f9c")]
    )
    scope = ScopeSpans()
    scope.scope.name = "agenttrail"
    start = time.time_ns() if start_ns is None else start_ns
    runs = SPANS_PER_REQUEST // 8
    for run in range(runs):
        trace_id = os.urandom(16)
        root_id = os.urandom(8)
        t0 = start + run * 10_000_000
        root = scope.spans.add(
            trace_id=trace_id,
            span_id=root_id,
            name="invoke_agent support-agent",
            kind=1,
            start_time_unix_nano=t0,
            end_time_unix_nano=t0 + 9_000_000,
        )
        root.attributes.extend(
            [
                _kv("gen_ai.operation.name", "invoke_agent"),
                _kv("gen_ai.agent.name", "support-agent"),
                _kv("agenttrail.task", "refund"),
                _kv("openinference.span.kind", "AGENT"),
                _kv(
                    "input.value",
                    json.dumps({"question": f"Please refund order {seed}-{run}, it arrived broken."}),
                ),
                _kv("output.value", json.dumps("Your refund is on its way.")),
            ]
        )
        chat = scope.spans.add(
            trace_id=trace_id,
            span_id=os.urandom(8),
            parent_span_id=root_id,
            name="chat gpt-4o-mini",
            kind=3,
            start_time_unix_nano=t0 + 100_000,
            end_time_unix_nano=t0 + 900_000,
        )
        chat.attributes.extend(
            [
                _kv("gen_ai.operation.name", "chat"),
                _kv("gen_ai.request.model", "gpt-4o-mini"),
                _kv("gen_ai.usage.input_tokens", 812),
                _kv("gen_ai.usage.output_tokens", 64),
            ]
        )
        for step in range(6):
            tool = TOOLS[step % len(TOOLS)]
            span = scope.spans.add(
                trace_id=trace_id,
                span_id=os.urandom(8),
                parent_span_id=root_id,
                name=f"execute_tool {tool}",
                kind=1,
                start_time_unix_nano=t0 + (step + 1) * 1_000_000,
                end_time_unix_nano=t0 + (step + 1) * 1_000_000 + 700_000,
            )
            arguments = json.dumps({"order_id": 1000 + run, "reason": "damaged item", "amount": 42.5})
            result = json.dumps({"status": "ok", "reference": f"r-{seed}-{run}-{step}"})
            span.attributes.extend(
                [
                    _kv("gen_ai.operation.name", "execute_tool"),
                    _kv("gen_ai.tool.name", tool),
                    _kv("gen_ai.tool.call.id", os.urandom(8).hex()),
                    _kv("gen_ai.tool.type", "function"),
                    _kv("gen_ai.tool.call.arguments", arguments),
                    _kv("gen_ai.tool.call.result", result),
                    _kv("openinference.span.kind", "TOOL"),
                    _kv("tool.name", tool),
                    _kv("input.value", arguments),
                    _kv("output.value", result),
                ]
            )
    resource.scope_spans.append(scope)
    return ExportTraceServiceRequest(resource_spans=[resource]).SerializeToString()


def health(http: str) -> dict[str, int]:
    with urllib.request.urlopen(f"http://{http}/healthz", timeout=10) as response:
        data: dict[str, int] = json.loads(response.read())
        return data


def wait_ready(store: Path, process: subprocess.Popen[bytes], timeout_s: float = 600) -> dict[str, Any]:
    """The sidecar's addresses once its lock file names the bound ports (a busy machine may
    take minutes to import and migrate); the benchmarks' one wait for a serve they started."""
    lock = store / "agenttrail.agenttrail.lock"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"agenttrail serve exited during start-up (exit code {process.returncode})")
        try:
            info: dict[str, Any] = json.loads(lock.read_text() or "{}")
            if info.get("pid") == process.pid and not info.get("starting"):
                return info
        except (FileNotFoundError, json.JSONDecodeError):
            pass
        time.sleep(0.1)
    raise SystemExit(f"agenttrail serve did not start within {timeout_s:.0f} s")


# serve's threads by what they do, from their names (/proc/<pid>/task/*/comm): Python 3.11 does
# not name its threads, so every Python thread carries the process's name.
THREAD_GROUPS = {
    "QueryPipelineEx": "engine queries",
    "QueryPullPipeEx": "engine queries",
    "ThreadPool": "engine queries",  # the global pool the query pipelines run on
    "QueryCompPipeEx": "engine queries",
    "Unknown": "engine queries",  # pool threads between jobs' names (the insert's squashing, writing)
    "MergeMutate": "merges",
    "event_engine": "gRPC",
    "grpc_global_tim": "gRPC",
}
# Exited threads' CPU is in the process's total but in no task: it is reported as "exited".
GROUP_ORDER = ("python", "engine queries", "merges", "gRPC", "engine other", "exited")
# How often the benchmark asks serve for its counters. Each /healthz (as /livez: uvicorn's and
# Starlette's own work) costs serve 1.1-1.5 ms of CPU, so polling every 10 ms took ~10% of a core
# from what it measures, and more the longer a slow run lasted. So: every 0.25 s until at most a
# segment's spans are left to store, then every 20 ms (the stored count moves a segment at a time).
POLL_S = 0.02
SLOW_POLL_S = 0.25
SEGMENT_SPANS = 50_000  # the writer's batch_max_spans
# `--ingest-only`: serve with nothing beside ingest (no run is due within the benchmark, none
# is scored), so the figure holds receivers, inserts and merges alone. With assembly beside it,
# the spans stored in a slow run meet more assembly and scoring (they begin after the quiet
# period), which slows the run further: that work is why two runs differ by up to a factor 6.
INGEST_ONLY_CONFIG = "quiet_period_s: 86400\nevaluators:\n  sample_rate: 0\n"


def _thread_cpu(pid: int) -> dict[str, float]:
    """serve's CPU seconds so far by thread group (GROUP_ORDER), exited threads included."""
    ticks = os.sysconf("SC_CLK_TCK")
    groups = dict.fromkeys(GROUP_ORDER, 0.0)
    process_name = Path(f"/proc/{pid}/comm").read_text().strip()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name, rest = (task / "stat").read_text().split(" (", 1)[1].rsplit(")", 1)
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended meanwhile
        fields = rest.split()
        group = "python" if name == process_name else THREAD_GROUPS.get(name, "engine other")
        groups[group] += (int(fields[11]) + int(fields[12])) / ticks
    groups["exited"] = max(0.0, _cpu_seconds(pid) - sum(groups.values()))
    return groups


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc): figures on a shared machine
    are compared per CPU-second, which other load does not change as much as wall time."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_ingest(
    requests: int,
    clients: int,
    *,
    config_file: str | None = None,
    after_stored: Callable[[dict[str, str]], None] | None = None,
    serve_python: str = sys.executable,
    ingest_only: bool = False,
) -> dict[str, Any]:
    """Persisted spans/s; `config_file` configures the sidecar, `after_stored` runs (given the
    sidecar's addresses) once every span is stored, before the sidecar stops; `serve_python`
    runs serve (another checkout's venv: the same clients against another version);
    `ingest_only` keeps assembly and scoring out (INGEST_ONLY_CONFIG) and does not wait for runs."""
    bodies = [agent_request(i) for i in range(requests)]
    total = requests * SPANS_PER_REQUEST
    with tempfile.TemporaryDirectory(prefix="agenttrail-bench-") as tmp:
        store = Path(tmp) / "store"
        if ingest_only:
            if config_file:
                raise SystemExit("--ingest-only brings its own config; give one or the other")
            config_file = str(Path(tmp) / "ingest-only.yaml")
            Path(config_file).write_text(INGEST_ONLY_CONFIG)
        process = subprocess.Popen(
            [
                serve_python,
                "-c",
                "from agenttrail.evaluators.cli.entry import main; main()",
                "--log-level",
                "WARNING",
                "serve",
                "--store",
                str(store),
                "--grpc",
                "127.0.0.1:0",
                "--http",
                "127.0.0.1:0",
                "--max-queue-spans",
                str(max(total, 200_000)),
                *(["--config", config_file] if config_file else []),
            ],
        )
        try:
            info = wait_ready(store, process)
            channel = grpc.insecure_channel(
                info["grpc"], options=[("grpc.max_send_message_length", 64 << 20)]
            )
            export = channel.unary_unary(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                request_serializer=None,
                response_deserializer=None,
            )
            export(bodies[0], timeout=60)  # warm-up: connection, first insert
            while health(info["http"])["stored_spans"] < SPANS_PER_REQUEST:
                time.sleep(POLL_S)
            queue = list(range(1, requests))
            lock = threading.Lock()
            ack_latencies: list[float] = []
            refusals = [0]

            def client() -> None:
                while True:
                    with lock:
                        if not queue:
                            return
                        index = queue.pop()
                    sent = time.perf_counter()
                    while True:
                        try:
                            export(bodies[index], timeout=60)
                            break
                        except grpc.RpcError as exc:
                            # Refused with a retry hint (a loaded machine: no ingest slot within
                            # ingest_max_wait_s): resend as an SDK's exporter would, or the
                            # benchmark waits for spans that were never sent.
                            if exc.code() not in (
                                grpc.StatusCode.UNAVAILABLE,
                                grpc.StatusCode.RESOURCE_EXHAUSTED,
                            ):
                                raise
                            with lock:
                                refusals[0] += 1
                            time.sleep(0.1)
                    ack_latencies.append(time.perf_counter() - sent)

            load_at_start = os.getloadavg()[0]
            cpu_before = _cpu_seconds(process.pid)
            threads_before = _thread_cpu(process.pid)
            clients_cpu_before = time.process_time()
            started = time.perf_counter()
            threads = [threading.Thread(target=client) for _ in range(clients)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            acked = time.perf_counter()
            clients_cpu = time.process_time() - clients_cpu_before
            while (left := total - health(info["http"])["stored_spans"]) > 0:
                time.sleep(POLL_S if left <= SEGMENT_SPANS else SLOW_POLL_S)
            stored = time.perf_counter()
            cpu_stored = _cpu_seconds(process.pid) - cpu_before
            threads_after = _thread_cpu(process.pid)
            by_thread = {group: threads_after[group] - threads_before[group] for group in GROUP_ORDER}
            load_at_stored = os.getloadavg()[0]
            # Assembly runs beside ingestion; the last runs wait out the quiet period.
            while not ingest_only and health(info["http"])["pending_traces"] > 0:
                time.sleep(SLOW_POLL_S / 2)
            assembled = time.perf_counter()
            cpu_assembled = _cpu_seconds(process.pid) - cpu_before
            channel.close()
            if after_stored is not None:
                after_stored(info)
        finally:
            process.terminate()
            process.wait(60)
    sent_spans = total - SPANS_PER_REQUEST
    ack_latencies.sort()
    return {
        "spans": sent_spans,
        "acked_spans_per_s": sent_spans / (acked - started),
        "persisted_spans_per_s": sent_spans / (stored - started),
        "assembled_runs_per_s": sent_spans / 8 / (assembled - started),
        "assembly_lag_s": assembled - stored,
        "sidecar_cpu_s": cpu_stored,
        "spans_per_cpu_s": sent_spans / cpu_stored if cpu_stored else 0.0,
        "ack_p50_ms": ack_latencies[len(ack_latencies) // 2] * 1000,
        "ack_p99_ms": ack_latencies[int(len(ack_latencies) * 0.99)] * 1000,
        "refused_requests": refusals[0],
        "clients_cpu_s": clients_cpu,
        "sidecar_us_per_span": cpu_stored / sent_spans * 1e6,
        "sidecar_us_per_span_assembled": cpu_assembled / sent_spans * 1e6,
        "sidecar_cpu_by_thread": by_thread,
        "load_at_start": load_at_start,
        "load_at_stored": load_at_stored,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=400, help="requests of 512 spans to send")
    parser.add_argument("--clients", type=int, default=4, help="concurrent gRPC client threads")
    parser.add_argument("--config", help="the sidecar's config file (e.g. to compare batch_max_spans)")
    parser.add_argument(
        "--serve-python",
        default=sys.executable,
        help="the Python that runs serve, e.g. another checkout's .venv/bin/python (A/B, same clients)",
    )
    parser.add_argument(
        "--ingest-only",
        action="store_true",
        help="no assembly or scoring beside ingest: the steadier figure of ingest's own cost",
    )
    args = parser.parse_args()
    if args.ingest_only and args.config:
        parser.error("--ingest-only brings its own config; give one or the other")
    figures = bench_ingest(
        args.requests,
        args.clients,
        config_file=args.config,
        serve_python=args.serve_python,
        ingest_only=args.ingest_only,
    )
    print(
        f"collector ingest (OTLP/gRPC, {SPANS_PER_REQUEST}-span requests, {args.clients} clients, "
        f"{figures['spans']:.0f} spans):"
    )
    print(
        f"  persisted: {figures['persisted_spans_per_s']:,.0f} spans/s   "
        f"acknowledged: {figures['acked_spans_per_s']:,.0f} spans/s"
    )
    print(
        f"  sidecar CPU until stored: {figures['sidecar_cpu_s']:.1f} s "
        f"({figures['spans_per_cpu_s']:,.0f} spans per CPU-second)"
    )
    print(
        f"  ack latency per request: p50 {figures['ack_p50_ms']:.1f} ms, p99 {figures['ack_p99_ms']:.1f} ms "
        f"(retries included; {figures['refused_requests']:.0f} refusals resent)"
    )
    if not args.ingest_only:
        print(
            f"  runs assembled into trajectories: {figures['assembled_runs_per_s']:,.0f} runs/s, the last "
            f"{figures['assembly_lag_s']:.1f} s after the last span was stored (quiet period included)"
        )
    by_thread = figures["sidecar_cpu_by_thread"]
    print(
        f"  sidecar CPU per stored span: {figures['sidecar_us_per_span']:.1f} µs until stored "
        + ("" if args.ingest_only else f"({figures['sidecar_us_per_span_assembled']:.1f} µs until assembled)")
        + "; until stored by thread: "
        + ", ".join(f"{group} {by_thread[group]:.2f} s" for group in GROUP_ORDER)
    )
    print(
        f"  the clients' own CPU while sending: {figures['clients_cpu_s']:.1f} s; load average "
        f"{figures['load_at_start']:.1f} at the start, {figures['load_at_stored']:.1f} when stored"
    )


if __name__ == "__main__":
    main()
