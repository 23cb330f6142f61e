"""How much memory one background merge of span parts takes, row by row and column by column.

Each variant runs in its own process on a fresh embedded store: `otel_traces` as migration 1
creates it (ClickHouse's default: merges below 131,072 rows go row by row) or with migration 5
too (column by column). It writes `--parts` parts of `--rows` agent-shaped spans (tool
arguments and results in the attribute map, as the sidecar's inserts write them), merges them
into one with OPTIMIZE, and samples the process's RSS every 10 ms meanwhile. Prints the RSS rise
during the merge (ClickHouse runs in-process) and the merge's time, median over `--repeat`
runs of each variant, alternating. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

VARIANTS = {"row by row (migration 1)": 1, "column by column (migration 5)": 5}


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) * 1024
    return 0


def measure(through_version: int, parts: int, rows: int) -> tuple[float, float]:
    """(RSS rise in MiB, seconds) of merging `parts` parts of `rows` spans into one."""
    import clickhouse_connect

    from agenttrail.collector.schema import MIGRATIONS

    with tempfile.TemporaryDirectory(prefix="agenttrail-merge-") as tmp:
        client = clickhouse_connect.get_client(dsn=f"chdb://{tmp}/store")
        client.command("CREATE DATABASE IF NOT EXISTS bench")
        client.command("USE bench")
        for migration in MIGRATIONS:
            if migration.version == 1:
                client.command(migration.statements[0])  # otel_traces alone
            elif migration.version <= through_version and "otel_traces" in migration.statements[0]:
                for statement in migration.statements:
                    client.command(statement)
        client.command("SYSTEM STOP MERGES otel_traces")
        for part in range(parts):
            client.command(
                "INSERT INTO otel_traces (Timestamp, TraceId, SpanId, SpanName, ServiceName, "
                "SpanAttributes, ResourceAttributes, Duration) "
                f"SELECT now64(9) - number, hex(cityHash64(number + {part * rows})), hex(number), "
                "'execute_tool ' || toString(number % 4), 'support-agent', "
                "map('gen_ai.operation.name', 'execute_tool', 'gen_ai.tool.name', toString(number % 4), "
                "'gen_ai.tool.call.arguments', repeat(toString(number), 60), "
                "'gen_ai.tool.call.result', repeat(hex(number * 7), 40), 'agenttrail.task', 'refund'), "
                "map('service.name', 'support-agent', 'host.name', 'pod-7f9c'), number "
                f"FROM numbers({rows})"
            )
        before = _rss()
        peak = before
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, _rss())
                time.sleep(0.01)

        sampler = threading.Thread(target=sample)
        started = time.perf_counter()
        client.command("SYSTEM START MERGES otel_traces")
        sampler.start()
        client.command("OPTIMIZE TABLE otel_traces FINAL")
        elapsed = time.perf_counter() - started
        done.set()
        sampler.join()
        client.close()
        return (peak - before) / 2**20, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--parts", type=int, default=12, help="parts merged into one (default 12)")
    parser.add_argument("--rows", type=int, default=8192, help="spans per part (insert_block_spans)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each variant (default 3)")
    parser.add_argument("--variant", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant is not None:
        rise, seconds = measure(args.variant, args.parts, args.rows)
        print(f"{rise:.1f} {seconds:.3f}")
        return
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in VARIANTS}
    for _ in range(args.repeat):
        for name, version in VARIANTS.items():
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--variant",
                    str(version),
                    "--parts",
                    str(args.parts),
                    "--rows",
                    str(args.rows),
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.split()
            results[name].append((float(out[0]), float(out[1])))
    print(f"merging {args.parts} parts of {args.rows:,} spans into one (median of {args.repeat}):")
    for name, runs in results.items():
        rise = statistics.median(r for r, _ in runs)
        seconds = statistics.median(s for _, s in runs)
        print(f"  {name:32s} RSS rise {rise:6.1f} MiB   {seconds:5.2f} s")


if __name__ == "__main__":
    main()
