"""End-to-end pipeline benchmark: spans in, trajectories and scores out, in one table.

`agenttrail serve` runs as its own process on an embedded store, with a reference for the
generated task, so the evaluator scores every assembled run with the deterministic metrics.
This process sends agent-shaped OTLP/gRPC requests (bench_ingest's 512 spans, 64 runs of 8
spans; `--protocol http`: OTLP/HTTP protobuf, a kept-alive connection per client thread) at a
fixed offered rate for `--seconds` (an open loop: requests start on schedule whatever the
answers, as production agents send), samples the sidecar's RSS every second, waits until every
run is assembled and scored, stops the sidecar, and reads the stored times back:

- stored spans/s, assembled runs/s, scored runs/s: over the sending window plus the catch-up;
- assembly lag: a trajectory's first `AssembledAt` minus its trace's last arrival (the quiet
  period is part of it, by design);
- scoring lag: a run's first score `CreatedAt` minus its trace's last arrival;
- ack p50/p99 at the client, and the sidecar's peak RSS.

The previous figures at the same offered rate (benchmarks/pipeline-baseline.json, keyed by the
rate) print beside the new ones; `--save` replaces that rate's. Prints figures; asserts nothing.
About `--seconds` + 1-2 minutes of start-up and catch-up on two cores.
"""

from __future__ import annotations

import argparse
import http.client
import json
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).parent))

from bench_ingest import SPANS_PER_REQUEST, agent_request, health, wait_ready

from agenttrail.collector.store import Store, parse_store

BASELINE = Path(__file__).parent / "pipeline-baseline.json"
QUIET_PERIOD_S = 2.0
REFERENCE = {
    "refund": [
        {"tool_name": "lookup_order"},
        {"tool_name": "search_kb"},
        {"tool_name": "issue_refund"},
        {"tool_name": "send_email"},
    ]
}
AGENTTRAIL = [sys.executable, "-c", "from agenttrail.evaluators.cli.entry import main; main()"]
_LAGS = """
SELECT quantiles(0.5, 0.95)(lag), max(lag), count(), toUnixTimestamp64Micro(max(done)) / 1e6
FROM (
    SELECT (toUnixTimestamp64Micro(t.done) - toUnixTimestamp64Micro(a.last)) / 1e6 AS lag, t.done AS done
    FROM (SELECT TraceId, min({column:Identifier}) AS done FROM {table:Identifier} GROUP BY TraceId) AS t
    JOIN (SELECT TraceId, max(ArrivedAt) AS last FROM trace_arrivals GROUP BY TraceId) AS a USING TraceId
)
"""


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def grpc_export(address: str) -> tuple[Callable[[bytes], object], Callable[[], None]]:
    """One OTLP/gRPC request per call, over one channel; and how to close it."""
    channel = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 64 << 20)])
    export = channel.unary_unary(
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        request_serializer=None,
        response_deserializer=None,
    )
    return (lambda body: export(body, timeout=120)), channel.close


def http_export(address: str) -> tuple[Callable[[bytes], object], Callable[[], None]]:
    """One OTLP/HTTP protobuf request per call, each client thread on its own kept-alive
    connection (as an SDK's exporter keeps one); and how to close them."""
    host, port = address.rsplit(":", 1)
    local = threading.local()
    opened: list[http.client.HTTPConnection] = []

    def export(body: bytes) -> object:
        connection = getattr(local, "connection", None)
        if connection is None:
            connection = local.connection = http.client.HTTPConnection(host, int(port), timeout=120)
            opened.append(connection)
        connection.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
        response = connection.getresponse()
        answer = response.read()
        if response.status != 200:
            raise RuntimeError(f"OTLP/HTTP answered {response.status}: {answer[:200]!r}")
        return answer

    def close() -> None:
        for connection in opened:
            connection.close()

    return export, close


def send(
    address: str, rate: float, seconds: float, clients: int, protocol: str = "grpc"
) -> tuple[list[float], float, float]:
    """Requests at `rate` spans/s for `seconds`; the ack latencies (s), send start and end."""
    interval = SPANS_PER_REQUEST / rate
    count = max(1, int(seconds / interval))
    bodies = [agent_request(i) for i in range(count)]
    export, close = (http_export if protocol == "http" else grpc_export)(address)
    latencies: list[float] = []
    lock = threading.Lock()

    def one(body: bytes) -> None:
        sent = time.perf_counter()
        export(body)
        with lock:
            latencies.append(time.perf_counter() - sent)

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        for index, body in enumerate(bodies):
            delay = started + index * interval - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            pool.submit(one, body)
    ended = time.perf_counter()
    close()
    return latencies, started, ended


def run(rate: float, seconds: float, clients: int, protocol: str = "grpc") -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="agenttrail-bench-pipeline-") as tmp:
        store_dir = Path(tmp) / "store"
        references = Path(tmp) / "references.json"
        references.write_text(json.dumps(REFERENCE))
        process = subprocess.Popen(
            [
                *AGENTTRAIL,
                "--log-level",
                "WARNING",
                "serve",
                "--store",
                str(store_dir),
                "--grpc",
                "127.0.0.1:0",
                "--http",
                "127.0.0.1:0",
                "--quiet-period-s",
                str(QUIET_PERIOD_S),
            ]
        )
        try:
            info = wait_ready(store_dir, process)
            subprocess.run(
                [*AGENTTRAIL, "references", "load", str(references), "--store", str(store_dir)], check=True
            )
            idle_rss = rss_mb(process.pid)
            peak_rss = idle_rss
            sampling = threading.Event()

            def sample() -> None:
                nonlocal peak_rss
                while not sampling.wait(1.0):
                    peak_rss = max(peak_rss, rss_mb(process.pid))

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            wall_start = time.time()
            address = info["http"] if protocol == "http" else info["grpc"]
            latencies, started, ended = send(address, rate, seconds, clients, protocol)
            sent = len(latencies) * SPANS_PER_REQUEST
            while health(info["http"])["stored_spans"] < sent:
                time.sleep(0.05)
            stored_at = time.perf_counter()
            while health(info["http"])["pending_traces"] > 0:
                time.sleep(0.1)
            runs = sent // 8
            deadline = time.monotonic() + 600
            scored = 0
            while time.monotonic() < deadline:
                scored = scored_runs(info["http"])
                if scored >= runs:
                    break
                time.sleep(1.0)
            sampling.set()
            sampler.join()
        finally:
            process.terminate()
            process.wait(120)
        store = Store(parse_store(str(store_dir)))
        assembly = store.query(_LAGS, {"column": "AssembledAt", "table": "trajectories"})[0]
        scoring = store.query(_LAGS, {"column": "CreatedAt", "table": "scores"})[0]
        store.close()
    latencies.sort()
    return {
        "offered spans/s": rate,
        "spans sent": sent,
        "stored spans/s": sent / (stored_at - started),
        "assembled runs/s": int(assembly[2]) / (assembly[3] - wall_start),
        "scored runs/s": int(scoring[2]) / (scoring[3] - wall_start),
        "assembly lag p50 s": assembly[0][0],
        "assembly lag p95 s": assembly[0][1],
        "assembly lag max s": assembly[1],
        "scoring lag p50 s": scoring[0][0],
        "scoring lag p95 s": scoring[0][1],
        "ack p50 ms": latencies[len(latencies) // 2] * 1000,
        "ack p99 ms": latencies[int(len(latencies) * 0.99)] * 1000,
        "idle RSS MiB": idle_rss,
        "peak RSS MiB": peak_rss,
        "send window s": ended - started,
    }


def scored_runs(http: str) -> int:
    """Runs with a trajectory_exact_match score, from serve's stats route (the last hour)."""
    url = f"http://{http}/api/v1/stats?since=1h&bucket=1h"
    with urllib.request.urlopen(url, timeout=60) as response:
        rows = [json.loads(line) for line in response.read().splitlines() if line.strip()]
    return sum(int(row["metrics"].get("trajectory_exact_match", {}).get("count", 0)) for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=20_000, help="offered spans/s (default 20,000)")
    parser.add_argument("--seconds", type=float, default=60, help="how long to send (default 60)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent requests at most (default 8)")
    parser.add_argument(
        "--protocol",
        choices=("grpc", "http"),
        default="grpc",
        help="OTLP/gRPC (default) or OTLP/HTTP protobuf; the baseline keeps each apart",
    )
    parser.add_argument("--save", action="store_true", help=f"write the figures to {BASELINE.name}")
    args = parser.parse_args()
    figures = run(args.rate, args.seconds, args.clients, args.protocol)
    # Figures only compare at the same offered rate: a baseline holds one set per rate.
    baselines: dict[str, dict[str, float]] = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
    rate_key = f"{args.rate:g}" + ("" if args.protocol == "grpc" else f" {args.protocol}")
    previous = baselines.get(rate_key, {})
    print(
        f"pipeline: {args.rate:,.0f} spans/s offered over {args.protocol} for {args.seconds:.0f} s, "
        f"quiet {QUIET_PERIOD_S} s"
    )
    print(f"  {'':<22}{'now':>12}{'previous':>12}")
    for name, value in figures.items():
        before = previous.get(name)
        print(f"  {name:<22}{value:>12,.2f}{'' if before is None else f'{before:,.2f}':>12}")
    if args.save:
        baselines[rate_key] = figures
        BASELINE.write_text(json.dumps(baselines, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
