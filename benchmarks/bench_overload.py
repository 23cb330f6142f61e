"""Overload benchmark: memory and acknowledgement latency of `agenttrail serve` when clients send
far more than it can store.

One sidecar runs as its own process on an embedded store. 32 clients (half OTLP/HTTP protobuf on
keep-alive connections, half OTLP/gRPC, spread over 4 processes) send 512-span requests (new
trace ids in each; `--same-traces` as before) back to back for `--seconds`, ignoring
Retry-After (the worst case: a fleet of exporters that do not back off). Prints the sidecar's
RSS idle and peak (VmHWM), ack p50/p99 of the acknowledged requests, the refusals, and offered
vs stored spans/s, next to the figures measured on main before the ASGI front and the in-flight
byte budget. Asserts nothing.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).parent))
from bench_ingest import SPANS_PER_REQUEST, agent_request, health, wait_ready

# Measured on main at 708f40c (stdlib ThreadingHTTPServer, no in-flight byte budget), same
# machine, `--seconds 30`: see README "Running the sidecar".
BEFORE = {
    "rss_idle_mib": 512.0,
    "rss_peak_mib": 1349.0,
    "ack_p50_ms": 406.0,
    "ack_p99_ms": 3629.2,
    "offered_spans_per_s": 16_824.0,
    "stored_spans_per_s": 7_499.0,
}

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


class Bodies:
    """The clients' request bodies: 8 built once, each sent with new trace ids (as a fleet of
    agents sends new traces), or, with `same_traces`, as built (the figures before 2026-11-27:
    every trace then got its 8 spans again with each resend, tens of copies in a run, and
    assembly re-read them all)."""

    def __init__(self, seed: int, same_traces: bool) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        self._bodies = [agent_request(seed * 100 + i) for i in range(8)]
        self._same = same_traces
        # Per body: each trace id and the offsets where its bytes occur (16 random bytes: only
        # in the spans' trace_id fields).
        self._offsets: list[list[list[int]]] = []
        for body in self._bodies:
            request = ExportTraceServiceRequest.FromString(body)
            ids = {
                span.trace_id for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans
            }
            self._offsets.append([[m.start() for m in re.finditer(re.escape(i), body)] for i in ids])

    def __call__(self, index: int) -> bytes:
        body = self._bodies[index % len(self._bodies)]
        if self._same:
            return body
        fresh = bytearray(body)
        for offsets in self._offsets[index % len(self._bodies)]:
            trace_id = os.urandom(16)
            for offset in offsets:
                fresh[offset : offset + 16] = trace_id
        return bytes(fresh)


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def client_process(
    http_address: str,
    grpc_address: str,
    threads: int,
    seconds: float,
    queue: Any,
    seed: int,
    same_traces: bool = False,
) -> None:
    """`threads` clients, half HTTP and half gRPC; puts (acked latencies, refused, sent spans)."""
    bodies = Bodies(seed, same_traces)
    results: list[tuple[list[float], int, int, int]] = []
    deadline = time.monotonic() + seconds

    def http_client(index: int) -> None:
        host, port = http_address.rsplit(":", 1)
        connection = http.client.HTTPConnection(host, int(port), timeout=60)
        acked: list[float] = []
        refused = sent = errors = 0
        while time.monotonic() < deadline:
            body = bodies(index + sent)
            started = time.perf_counter()
            try:
                connection.request(
                    "POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"}
                )
                response = connection.getresponse()
                response.read()
            except (OSError, http.client.HTTPException):
                errors += 1
                connection.close()
                connection = http.client.HTTPConnection(host, int(port), timeout=60)
                continue
            sent += 1
            if response.status == 200:
                acked.append(time.perf_counter() - started)
            else:
                refused += 1
            if response.getheader("Connection", "").lower() == "close":
                connection.close()
                connection = http.client.HTTPConnection(host, int(port), timeout=60)
        results.append((acked, refused, sent, errors))

    def grpc_client(index: int) -> None:
        channel = grpc.insecure_channel(grpc_address, options=[("grpc.max_send_message_length", 64 << 20)])
        export = channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)
        acked: list[float] = []
        refused = sent = errors = 0
        while time.monotonic() < deadline:
            body = bodies(index + sent)
            started = time.perf_counter()
            try:
                export(body, timeout=60)
                acked.append(time.perf_counter() - started)
            except grpc.RpcError as exc:
                if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED):
                    refused += 1
                else:
                    errors += 1
            sent += 1
        channel.close()
        results.append((acked, refused, sent, errors))

    workers = [
        threading.Thread(target=http_client if i % 2 == 0 else grpc_client, args=(i,)) for i in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    acked = [latency for result in results for latency in result[0]]
    queue.put((acked, sum(r[1] for r in results), sum(r[2] for r in results), sum(r[3] for r in results)))


def open_loop_process(
    http_address: str,
    grpc_address: str,
    requests_per_s: float,
    threads: int,
    seconds: float,
    queue: Any,
    seed: int,
    same_traces: bool = False,
) -> None:
    """Open loop: start a request every 1/`requests_per_s` s whether or not earlier ones were
    answered (at most `threads` outstanding, half HTTP half gRPC); puts the same tuple as
    client_process plus the starts the clients could not make (all threads busy)."""
    from concurrent.futures import ThreadPoolExecutor

    bodies = Bodies(seed, same_traces)
    host, port = http_address.rsplit(":", 1)
    channel = grpc.insecure_channel(grpc_address, options=[("grpc.max_send_message_length", 64 << 20)])
    export = channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)
    lock = threading.Lock()
    acked: list[float] = []
    counts = {"refused": 0, "sent": 0, "errors": 0, "skipped": 0, "busy": 0}

    def one(index: int) -> None:
        body = bodies(index)
        started = time.perf_counter()
        outcome = "errors"
        if index % 2 == 0:
            connection = http.client.HTTPConnection(host, int(port), timeout=120)
            try:
                connection.request(
                    "POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"}
                )
                response = connection.getresponse()
                response.read()
                outcome = "acked" if response.status == 200 else "refused"
            except (OSError, http.client.HTTPException):
                pass
            finally:
                connection.close()
        else:
            try:
                export(body, timeout=120)
                outcome = "acked"
            except grpc.RpcError as exc:
                if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED):
                    outcome = "refused"
        with lock:
            counts["sent"] += 1
            counts["busy"] -= 1
            if outcome == "acked":
                acked.append(time.perf_counter() - started)
            else:
                counts[outcome] += 1

    interval = 1.0 / requests_per_s
    deadline = time.monotonic() + seconds
    next_start = time.monotonic()
    index = 0
    with ThreadPoolExecutor(threads) as pool:
        while time.monotonic() < deadline:
            with lock:
                free = counts["busy"] < threads
                if free:
                    counts["busy"] += 1
                else:
                    counts["skipped"] += 1
            if free:
                pool.submit(one, index)
            index += 1
            next_start += interval
            time.sleep(max(0.0, next_start - time.monotonic()))
    channel.close()
    queue.put((acked, counts["refused"], counts["sent"], counts["errors"], counts["skipped"]))


def bench_overload(
    seconds: float,
    clients: int,
    processes: int,
    extra_args: list[str],
    factor: float = 0.0,
    calibrate_s: float = 20.0,
    memory_log: Path | None = None,
    offered: float = 0.0,
    same_traces: bool = False,
) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="agenttrail-overload-") as tmp:
        store = Path(tmp) / "store"
        # With a memory log, serve runs under memory_probe.py, which samples where its memory is.
        launcher = (
            [str(Path(__file__).parent / "memory_probe.py"), str(memory_log)]
            if memory_log
            else ["-c", "from agenttrail.evaluators.cli.entry import main; main()"]
        )
        process = subprocess.Popen(
            [
                sys.executable,
                *launcher,
                "--log-level",
                "WARNING",
                "serve",
                "--store",
                str(store),
                "--grpc",
                "127.0.0.1:0",
                "--http",
                "127.0.0.1:0",
                *extra_args,
            ]
        )
        try:
            info = wait_ready(store, process)
            # Warm-up: one request each way, so idle RSS includes what serving imports.
            host, port = info["http"].rsplit(":", 1)
            warm = http.client.HTTPConnection(host, int(port), timeout=60)
            warm.request(
                "POST",
                "/v1/traces",
                body=agent_request(0),
                headers={"Content-Type": "application/x-protobuf"},
            )
            warm.getresponse().read()
            warm.close()
            with grpc.insecure_channel(info["grpc"]) as channel:
                channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)(
                    agent_request(1), timeout=60
                )
            while health(info["http"])["stored_spans"] < 2 * SPANS_PER_REQUEST:
                time.sleep(0.05)
            time.sleep(2)
            idle = rss_mib(process.pid)
            queue: Any = multiprocessing.get_context("spawn").Queue()
            per_process = clients // processes
            sustainable = offered / factor if offered and factor else 0.0
            if factor and not offered:
                # What the sidecar stores when the closed-loop clients saturate it: the rate
                # the open loop then offers `factor` times.
                calibration = [
                    multiprocessing.get_context("spawn").Process(
                        target=client_process,
                        args=(
                            info["http"],
                            info["grpc"],
                            per_process,
                            calibrate_s,
                            queue,
                            50 + index,
                            same_traces,
                        ),
                    )
                    for index in range(processes)
                ]
                stored_before = health(info["http"])["stored_spans"]
                started = time.perf_counter()
                for child in calibration:
                    child.start()
                for _ in calibration:
                    queue.get(timeout=calibrate_s + 300)
                for child in calibration:
                    child.join()
                sustainable = (health(info["http"])["stored_spans"] - stored_before) / (
                    time.perf_counter() - started
                )
                while health(info["http"])["queued_spans"]:
                    time.sleep(0.2)
            stored_before = health(info["http"])["stored_spans"]
            started = time.perf_counter()
            if factor:
                per_second = factor * max(sustainable, 1.0) / SPANS_PER_REQUEST / processes
                children = [
                    multiprocessing.get_context("spawn").Process(
                        target=open_loop_process,
                        args=(
                            info["http"],
                            info["grpc"],
                            per_second,
                            16 * per_process,
                            seconds,
                            queue,
                            index,
                            same_traces,
                        ),
                    )
                    for index in range(processes)
                ]
            else:
                children = [
                    multiprocessing.get_context("spawn").Process(
                        target=client_process,
                        args=(info["http"], info["grpc"], per_process, seconds, queue, index, same_traces),
                    )
                    for index in range(processes)
                ]
            sampler_stop = threading.Event()
            samples: list[float] = []

            def sample() -> None:
                while not sampler_stop.wait(0.5):
                    samples.append(rss_mib(process.pid))

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            for child in children:
                child.start()
            outcomes = [queue.get(timeout=seconds + 300) for _ in children]
            for child in children:
                child.join()
            elapsed = time.perf_counter() - started
            stored = health(info["http"])["stored_spans"] - stored_before
            sampler_stop.set()
            sampler.join()
            peak = rss_mib(process.pid, "VmHWM")
        finally:
            process.terminate()
            process.wait(120)
    acked = sorted(latency for outcome in outcomes for latency in outcome[0])
    sent = sum(outcome[2] for outcome in outcomes)
    return {
        "rss_idle_mib": idle,
        "rss_peak_mib": peak,
        "ack_p50_ms": acked[len(acked) // 2] * 1000 if acked else float("nan"),
        "ack_p99_ms": acked[int(len(acked) * 0.99)] * 1000 if acked else float("nan"),
        "acked_requests": len(acked),
        "refused_requests": sum(outcome[1] for outcome in outcomes),
        "failed_requests": sum(outcome[3] for outcome in outcomes),
        "offered_spans_per_s": sent * SPANS_PER_REQUEST / elapsed,
        "stored_spans_per_s": stored / elapsed,
        "sustainable_spans_per_s": sustainable,
        "rss_max_under_load_mib": max(samples, default=0.0),
        "skipped_requests": sum(outcome[4] for outcome in outcomes if len(outcome) > 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the clients send")
    parser.add_argument("--clients", type=int, default=32, help="client threads in all")
    parser.add_argument("--processes", type=int, default=4, help="client processes")
    parser.add_argument(
        "--factor",
        type=float,
        default=0.0,
        help="open loop: first measure the stored rate with the closed-loop clients for "
        "--calibrate-s, then offer FACTOR times it for --seconds whatever the answers (e.g. 4)",
    )
    parser.add_argument("--calibrate-s", type=float, default=20.0, help="calibration length (with --factor)")
    parser.add_argument(
        "--offered",
        type=float,
        default=0.0,
        help="with --factor: offer this many spans/s instead of calibrating (runs compared back to "
        "back on a loaded machine then get the same offered load; 'sustainable' is offered/factor)",
    )
    parser.add_argument(
        "--memory-log",
        type=Path,
        help="sample where serve's memory is (RSS, ClickHouse's tracked memory by query kind, "
        "caches, merges, backlog) into this JSON-lines file and print a summary (memory_probe.py)",
    )
    parser.add_argument(
        "--same-traces",
        action="store_true",
        help="resend the same 8 bodies (trace ids) as the figures before 2026-11-27 did, instead of "
        "new trace ids in every request: each trace then grows by 8 spans with every resend",
    )
    parser.add_argument("serve_args", nargs="*", help="extra `agenttrail serve` options (after --)")
    args = parser.parse_args()
    now = bench_overload(
        args.seconds,
        args.clients,
        args.processes,
        args.serve_args,
        args.factor,
        args.calibrate_s,
        args.memory_log,
        args.offered,
        args.same_traces,
    )
    if args.factor:
        print(
            f"open loop at {args.factor:g}x the {now['sustainable_spans_per_s']:,.0f} spans/s stored by "
            f"saturating closed-loop clients ({args.calibrate_s:.0f} s); {now['skipped_requests']:.0f} "
            "starts skipped (all client threads waiting)"
        )
    print(
        f"collector under overload ({args.clients} clients, half OTLP/HTTP half OTLP/gRPC, "
        f"{SPANS_PER_REQUEST}-span requests, {args.seconds:.0f} s, no back-off):"
    )
    print(
        f"  acked {now['acked_requests']:.0f}, refused (429/503/UNAVAILABLE) {now['refused_requests']:.0f}, "
        f"failed (connection errors, other codes) {now['failed_requests']:.0f} requests"
    )
    print(f"  {'':24}{'now':>12}{'before':>12}")
    rows = [
        ("RSS idle (MiB)", "rss_idle_mib", "{:.0f}"),
        ("RSS peak (MiB)", "rss_peak_mib", "{:.0f}"),
        ("ack p50 (ms)", "ack_p50_ms", "{:.1f}"),
        ("ack p99 (ms)", "ack_p99_ms", "{:.1f}"),
        ("offered spans/s", "offered_spans_per_s", "{:,.0f}"),
        ("stored spans/s", "stored_spans_per_s", "{:,.0f}"),
    ]
    for label, key, form in rows:
        before = form.format(BEFORE[key]) if BEFORE[key] else "-"
        print(f"  {label:24}{form.format(now[key]):>12}{before:>12}")
    ratio = now["offered_spans_per_s"] / max(now["stored_spans_per_s"], 1)
    growth = now["rss_peak_mib"] / max(now["rss_idle_mib"], 1)
    print(f"  offered/stored {ratio:.1f}x; peak/idle RSS {growth:.2f}x")
    if args.factor:
        offered = now["offered_spans_per_s"] / max(now["sustainable_spans_per_s"], 1)
        print(
            f"  offered/sustainable {offered:.1f}x; "
            f"RSS max while offered {now['rss_max_under_load_mib']:.0f} MiB "
            f"({now['rss_max_under_load_mib'] / max(now['rss_idle_mib'], 1):.2f}x idle)"
        )
    if args.memory_log:
        from memory_probe import summarise

        print(summarise(args.memory_log))


if __name__ == "__main__":
    main()
