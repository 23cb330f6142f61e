"""Trajectory assembly alone: runs/s from stored spans to stored `trajectories` rows.

bench_ingest's agent-shaped requests (512 spans, 64 runs of 8 spans) are stored through the
ingest pipeline into an embedded store first (not timed); then one `Assembler` assembles every
trace at once (quiet period 0) and the time of that pass gives runs/s. `--profile` runs the pass
under cProfile and prints where the time went (reading spans, building runs, rendering rows, the
INSERT). `--query-log` turns on ClickHouse's query log (a chDB config file) and prints each
statement of the pass: its time, rows read, memory and CPU. Prints figures; asserts nothing.

    python benchmarks/bench_assembly.py [--requests 200] [--chunk N] [--rate 50000] [--history N]
                                        [--rollups] [--profile] [--query-log]

`--rate` gives the spans the start times of that many spans/s (a chunk's spans among as many
others as in a sidecar storing that rate); `--history` stores N traces assembled before (their
lookup rows), as a sidecar has after N / 6,250 s at 50,000 spans/s. `--rollups` migrates the
evaluators' schema too, as `serve` does: monitoring's views on `trajectories` then run in every
chunk's insert (~40 us a run more at chunks of 2,000, asm23).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_ingest import SPANS_PER_REQUEST, agent_request

from agenttrail.collector import store as store_module
from agenttrail.collector.assembler import MAX_TRACES_PER_QUERY, Assembler
from agenttrail.collector.ingest import IngestPipeline
from agenttrail.collector.schema import MIGRATIONS, migrate
from agenttrail.collector.store import Store, parse_store

# chDB has no query log unless its config file asks for one.
# A section of the engine's config file (store.engine_config_xml keeps its MergeTree defaults).
QUERY_LOG_SECTION = """<query_log><database>system</database><table>query_log</table>
<flush_interval_milliseconds>1000</flush_interval_milliseconds></query_log>"""
QUERY_LOG_SQL = """
SELECT query_duration_ms, read_rows, memory_usage, ProfileEvents['UserTimeMicroseconds'] / 1e3,
       ProfileEvents['SystemTimeMicroseconds'] / 1e3, replaceRegexpAll(substring(query, 1, 60), '\\s+', ' ')
FROM system.query_log
WHERE type = 'QueryFinish' AND event_time_microseconds >= {since:DateTime64(6)}
  AND query NOT LIKE '%system.query_log%'
ORDER BY event_time_microseconds
"""


def print_query_log(store: Store, since: float) -> None:
    """Each statement since `since`, from ClickHouse's query log."""
    store.command("SYSTEM FLUSH LOGS")
    rows = store.query(QUERY_LOG_SQL, {"since": f"{since:.6f}"})
    print(f"  {'ms':>6} {'rows read':>10} {'memory MiB':>10} {'user ms':>8} {'sys ms':>7}  statement")
    user = system = 0.0
    for duration, read, memory, user_ms, sys_ms, text in rows:
        user, system = user + user_ms, system + sys_ms
        print(f"  {duration:>6} {read:>10,} {memory / 2**20:>10.1f} {user_ms:>8.1f} {sys_ms:>7.1f}  {text}")
    print(f"  statements' CPU: user {user:,.0f} ms, system {system:,.0f} ms")


def load(
    store: Store, spool: Path, requests: int, rate: float, notify: Callable[[dict[str, bool], float], None]
) -> dict[str, bool]:
    """Store `requests` agent requests through the real ingest path; the traces it stored.
    With `rate`, the requests' spans start as if sent at that many spans/s (a chunk's spans then
    lie among as many others as in a sidecar storing that rate); else they start when built."""
    traces: dict[str, bool] = {}

    def stored(batch: dict[str, bool], arrived_at: float) -> None:
        traces.update(batch)
        notify(batch, arrived_at)  # as the sidecar's writer tells its assembler

    pipeline = IngestPipeline(
        store.clone(), spool, max_queue_rows=requests * SPANS_PER_REQUEST + 1, on_stored=stored
    )
    pipeline.start()
    base = time.time_ns() - int(requests * SPANS_PER_REQUEST / rate * 1e9) if rate else 0
    for index in range(requests):
        start = base + int(index * SPANS_PER_REQUEST / rate * 1e9) if rate else None
        pipeline.accept(agent_request(index, start))
    if not pipeline.flush(timeout_s=600):
        sys.exit("the spans were not stored in 10 minutes")
    pipeline.stop()
    return traces


# Traces assembled before the pass: one row each in the trace-id lookup, the arrival-ordered
# ranges and the assembly state, as a sidecar has after running a while (6,250 traces/s is 50,000
# spans/s of 8-span runs), stored an hour before.
HISTORY_SQL = (
    "INSERT INTO otel_traces_trace_id_ts (TraceId, Start, End, SpansFrom, SpansUntil) "
    "SELECT lower(hex(MD5(toString(number)))), t, t, t, t FROM "
    "(SELECT number, now64(3) - 3600 + number / 6250 AS t FROM numbers({rows:UInt64}))",
    "INSERT INTO assembly_ranges (StoredAt, TraceId, SpansFrom, SpansUntil) "
    "SELECT t, lower(hex(MD5(toString(number)))), t, t FROM "
    "(SELECT number, now64(3) - 3600 + number / 6250 AS t FROM numbers({rows:UInt64}))",
    "INSERT INTO assembled_traces "
    "(TraceId, AssembledThrough, RunKeys, Revision, Version, SpansFrom, SpansUntil) "
    "SELECT lower(hex(MD5(toString(number)))), t, [hex(number)], 1, number, t, t FROM "
    "(SELECT number, now64(3) - 3600 + number / 6250 AS t FROM numbers({rows:UInt64}))",
)


# Tables the load writes, merged before the timed pass.
MERGED_BEFORE = (
    "otel_traces",
    "otel_traces_trace_id_ts",
    "trace_arrivals",
    "assembly_ranges",
    "assembled_traces",
)


def assemble(assembler: Assembler, profile: bool) -> tuple[float, float, int, str]:
    profiler = cProfile.Profile() if profile else None
    started, cpu_started = time.perf_counter(), time.process_time()
    if profiler is not None:
        profiler.enable()
    runs = assembler.assemble_due()
    if profiler is not None:
        profiler.disable()
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    report = ""
    if profiler is not None:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(40)
        report = text.getvalue()
    return elapsed, cpu, runs, report


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=200, help="requests of 512 spans (64 runs) to store")
    parser.add_argument("--profile", action="store_true", help="print the cProfile of the assembly pass")
    parser.add_argument(
        "--python-only", action="store_true", help="assemble every trace with build_runs (no SQL path)"
    )
    parser.add_argument(
        "--query-log",
        action="store_true",
        help="print each statement of the pass from ClickHouse's query log",
    )
    parser.add_argument(
        "--chunk",
        type=int,
        default=MAX_TRACES_PER_QUERY,
        help=f"most traces per assembly query (default {MAX_TRACES_PER_QUERY:,}, the sidecar's)",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="spans start as if stored at this many spans/s (e.g. 50000); default: as built",
    )
    parser.add_argument(
        "--rollups",
        action="store_true",
        help="the evaluators' schema too, as serve has it (their views fire on each trajectories insert)",
    )
    parser.add_argument(
        "--history",
        type=int,
        default=0,
        help="traces assembled before the pass, as rows of the lookups a chunk reads (e.g. 2000000)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agenttrail-bench-assembly-") as tmp:
        if args.query_log:
            config = Path(tmp) / "query_log.xml"
            config.write_text(store_module.engine_config_xml(QUERY_LOG_SECTION))
            store_module.EMBEDDED_ENGINE["config-file"] = str(config)
        store = Store(parse_store(str(Path(tmp) / "store")))
        if args.rollups:
            from agenttrail.evaluators.composition import ALL_MIGRATIONS

            migrate(store, ALL_MIGRATIONS)
        else:
            migrate(store, MIGRATIONS)
        for sql in HISTORY_SQL if args.history else ():
            store.command(sql, {"rows": args.history})
        assembler = Assembler(
            store.clone(),
            quiet_period_s=0.0,
            idle_timeout_s=0.0,
            sql_assembly=not args.python_only,
            max_traces_per_query=args.chunk,
        )
        assembler.recover()  # as the sidecar starts: before the writer stores anything
        load_started = time.perf_counter()
        traces = load(store, Path(tmp) / "spool", args.requests, args.rate, assembler.notify)
        loaded = time.perf_counter() - load_started
        # Merge what the load wrote first: the merges would otherwise run during the timed pass
        # and count in its CPU time.
        for table in MERGED_BEFORE:
            store.command(f"OPTIMIZE TABLE {table} FINAL")
        started_at = time.time()
        elapsed, cpu, runs, report = assemble(assembler, args.profile)
        stored = store.query("SELECT count() FROM trajectories WHERE NOT IsDeleted")[0][0]
        if args.query_log:
            print_query_log(store, started_at)
        store.close()
    spans = args.requests * SPANS_PER_REQUEST
    path = "build_runs only" if args.python_only else "plain traces in ClickHouse, the rest build_runs"
    print(f"assembly ({path}): {spans:,} spans stored in {loaded:.1f} s; {len(traces):,} traces assembled")
    print(f"  runs written      {runs:>10,}   (rows in trajectories: {stored:,})")
    print(f"  assembly time s   {elapsed:>10.2f}")
    print(f"  process CPU s     {cpu:>10.2f}   (all threads, chDB's included)")
    print(f"  runs/s            {runs / elapsed:>10,.0f}")
    print(f"  runs/CPU-s        {runs / cpu:>10,.0f}")
    print(f"  spans/s           {runs * 8 / elapsed:>10,.0f}")
    if report:
        print(report)


if __name__ == "__main__":
    main()
