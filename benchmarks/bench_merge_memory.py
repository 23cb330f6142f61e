"""How much memory one background merge of span parts takes, row by row and column by column.

Each variant runs in its own process on a fresh embedded store: `otel_traces` as migration 1
creates it (ClickHouse's default: merges below 131,072 rows go row by row) or with migration 5
too (column by column). It writes `--parts` parts of `--rows` agent-shaped spans (tool
arguments and results in the attribute map, as the sidecar's inserts write them), merges them
into one with OPTIMIZE, and samples the process's RSS every 10 ms meanwhile. Prints the RSS rise
during the merge (ClickHouse runs in-process) and the merge's time, median over `--repeat`
runs of each variant, alternating. Prints figures; asserts nothing.

`--table trajectories`: the same for `trajectories` (parts of `--rows` runs with ~1.4 KB of tool
calls each) as migration 5 left it (the `by_start` projection rebuilt by every merge), with
migration 6's projection drop alone (row by row), and with all of migration 6 (column by column).
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
# trajectories: (migrations applied whole, statements of migration 6 applied)
TRAJECTORY_VARIANTS = {
    "projection by_start (migration 5)": 0,
    "no projection, row by row": 2,
    "no projection, column by column (6)": 3,
}
_RUNS = """
INSERT INTO trajectories (TraceId, RootSpanId, Agent, Task, ServiceName, Start, LatencyS, Input, Output,
    ToolCount, ToolNames, ToolStatuses, ToolCalls, SpanCount, Revision, AssembledAt, Version)
SELECT hex(cityHash64(number + OFFSET)), hex(number), 'support-agent', 'refund', 'svc',
    now64(6) - number, 1.5, repeat('question ', 20), repeat('answer ', 30), 4,
    ['search', 'lookup', 'refund', 'email'], ['ok', 'ok', 'ok', 'ok'],
    concat('[', arrayStringConcat(arrayMap(i -> concat('{"name":"tool', toString(i), '","input":"',
        repeat(toString(number + i), 30), '","output":"', repeat(hex(number * i), 10), '"}'),
        range(4)), ','), ']'),
    5, 1, now64(6), 1
FROM numbers(ROWS)
"""


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) * 1024
    return 0


def measure(through_version: int, parts: int, rows: int, table: str = "otel_traces") -> tuple[float, float]:
    """(RSS rise in MiB, seconds) of merging `parts` parts of `rows` spans (or runs) into one."""
    import clickhouse_connect

    from agenttrail.collector.schema import MIGRATIONS

    with tempfile.TemporaryDirectory(prefix="agenttrail-merge-") as tmp:
        client = clickhouse_connect.get_client(dsn=f"chdb://{tmp}/store")
        client.command("CREATE DATABASE IF NOT EXISTS bench")
        client.command("USE bench")
        for migration in MIGRATIONS:
            if table == "trajectories":
                # through_version here: how many of migration 6's statements to apply
                count = through_version if migration.version == 6 else len(migration.statements)
                for statement in migration.statements[:count]:
                    client.command(statement)
            elif migration.version == 1:
                client.command(migration.statements[0])  # otel_traces alone
            elif migration.version <= through_version and "otel_traces" in migration.statements[0]:
                for statement in migration.statements:
                    client.command(statement)
        client.command(f"SYSTEM STOP MERGES {table}")
        for part in range(parts):
            if table == "trajectories":
                client.command(_RUNS.replace("OFFSET", str(part * rows)).replace("ROWS", str(rows)))
                continue
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
        client.command(f"SYSTEM START MERGES {table}")
        sampler.start()
        client.command(f"OPTIMIZE TABLE {table} FINAL")
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
    parser.add_argument("--table", choices=("otel_traces", "trajectories"), default="otel_traces")
    parser.add_argument("--variant", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant is not None:
        rise, seconds = measure(args.variant, args.parts, args.rows, args.table)
        print(f"{rise:.1f} {seconds:.3f}")
        return
    variants = TRAJECTORY_VARIANTS if args.table == "trajectories" else VARIANTS
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for _ in range(args.repeat):
        for name, version in variants.items():
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
                    "--table",
                    args.table,
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.split()
            results[name].append((float(out[0]), float(out[1])))
    what = "runs" if args.table == "trajectories" else "spans"
    print(
        f"merging {args.parts} {args.table} parts of {args.rows:,} {what} into one (median of {args.repeat}):"
    )
    for name, runs in results.items():
        rise = statistics.median(r for r, _ in runs)
        seconds = statistics.median(s for _, s in runs)
        print(f"  {name:36s} RSS rise {rise:6.1f} MiB   {seconds:5.2f} s")


if __name__ == "__main__":
    main()
