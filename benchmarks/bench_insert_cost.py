"""Where the CPU of one spool-segment insert goes, inside the embedded engine.

Builds a spool segment of bench_ingest's agent requests (checked and re-serialised as the
receivers spool them), then runs the writer's `INSERT ... SELECT` (otlp_sql) and cut-down forms
of it, each a few times with merges stopped, and prints the process CPU of the best run: the
engine runs in this process, so CPU is the figure a shared machine moves least. Then the same
insert over segments of several sizes: its CPU per 20,000 spans and its peak memory (ClickHouse's
query log, enabled through a chDB config file). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench_ingest import SPANS_PER_REQUEST, agent_request

import agenttrail.collector.store as store_module
from agenttrail.collector import otlp_sql
from agenttrail.collector.canonical import canonicalize
from agenttrail.collector.ingest import INSERT_BLOCK_SPANS, READ_BLOCK_BYTES
from agenttrail.collector.otlp_decode import OTEL_TRACES_COLUMNS, parse_protobuf
from agenttrail.collector.schema import migrate
from agenttrail.collector.spool import encode_records
from agenttrail.collector.store import Store, parse_store

# A section of the engine's config file (store.engine_config_xml keeps its MergeTree defaults).
QUERY_LOG_SECTION = """<query_log><database>system</database><table>query_log</table>
<flush_interval_milliseconds>1000</flush_interval_milliseconds></query_log>"""


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _best(run: Callable[[int], None], repeat: int) -> float:
    """The least process CPU seconds of `repeat` runs (each given its index)."""
    times = []
    for index in range(repeat):
        before = _cpu()
        run(index)
        times.append(_cpu() - before)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=200, help="512-span requests in the segment")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each statement (the best counts)")
    parser.add_argument(
        "--sizes", default="20000,50000,100000", help="segment sizes (spans) for the per-size figures"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agenttrail-bench-insert-") as tmp:
        config = Path(tmp) / "query_log.xml"
        config.write_text(store_module.engine_config_xml(QUERY_LOG_SECTION))
        store_module.EMBEDDED_ENGINE["config-file"] = str(config)
        store = Store(parse_store(str(Path(tmp) / "store")))
        migrate(store)
        store.command("CREATE TABLE null_traces AS otel_traces ENGINE = Null")
        store.command("SYSTEM STOP MERGES")
        records = []
        for index in range(args.requests):
            request = parse_protobuf(agent_request(index))
            canonicalize(request)
            records.append(request.SerializeToString())
        spans = args.requests * SPANS_PER_REQUEST
        segment = Path(tmp) / "segment.spool"
        segment.write_bytes(encode_records(records))
        empty = Path(tmp) / "empty.spool"
        empty.write_bytes(b"")
        settings: dict[str, str | int] = {
            **otlp_sql.format_settings(store.location),
            "input_format_max_block_size_bytes": READ_BLOCK_BYTES,
            "min_insert_block_size_rows": INSERT_BLOCK_SPANS,
            "max_partitions_per_insert_block": 0,
        }
        structure = "'" + otlp_sql.INPUT_STRUCTURE.replace("'", "\\'") + "'"

        def source(path: Path) -> str:
            return f"file('{path}', 'Protobuf', {structure})"

        columns = ", ".join(f"`{column}`" for column in OTEL_TRACES_COLUMNS)

        def insert(table: str, path: Path) -> str:
            return f"INSERT INTO {table} ({columns}) " + otlp_sql.span_rows_select(source(path))

        spans_joined = (
            f"SELECT span.name FROM {source(segment)} ARRAY JOIN resource_spans AS r "
            "ARRAY JOIN r.scope_spans AS s ARRAY JOIN s.spans AS span FORMAT Null"
        )
        rendered = otlp_sql.span_rows_select(source(segment))
        stages = [
            ("a statement (SELECT 1)", "SELECT 1", None),
            ("the insert over an empty segment (fixed cost)", insert("otel_traces", empty), None),
            (
                "EXPLAIN of the SELECT (its analysis)",
                "EXPLAIN " + otlp_sql.span_rows_select(source(empty)),
                None,
            ),
            (
                "decode (resource_spans' lengths)",
                f"SELECT sum(length(resource_spans)) FROM {source(segment)}",
                spans,
            ),
            ("decode + ARRAY JOIN of the spans", spans_joined, spans),
            ("decode + render every column (FORMAT Null)", rendered + " FORMAT Null", spans),
            ("... INSERT into a Null table", insert("null_traces", segment), spans),
            ("... INSERT into otel_traces", insert("otel_traces", segment), spans),
        ]
        megabytes = segment.stat().st_size / 2**20
        print(f"one segment of {spans:,} spans ({megabytes:.1f} MiB), best of {args.repeat}:")
        for name, sql, count in stages:

            def run_stage(index: int, sql: str = sql) -> None:
                store.command(
                    sql, settings={**settings, "insert_deduplication_token": f"{time.time()}-{index}"}
                )

            cpu = _best(run_stage, args.repeat)
            per_span = f"  {cpu / count * 1e6:5.1f} us/span" if count else ""
            print(f"  {name:48s} {cpu * 1000:8.0f} ms CPU{per_span}")
        print("the insert by segment size (CPU per 20,000 spans, peak memory from the query log):")
        for size in (int(text) for text in args.sizes.split(",")):
            path = Path(tmp) / f"segment-{size}.spool"
            path.write_bytes(encode_records(records[: max(1, size // SPANS_PER_REQUEST)]))
            size = max(1, size // SPANS_PER_REQUEST) * SPANS_PER_REQUEST
            sql = insert("otel_traces", path)

            def run_segment(index: int, sql: str = sql, size: int = size) -> None:
                store.command(
                    sql,
                    settings={
                        **settings,
                        "insert_deduplication_token": f"{size}-{index}-{time.time()}",
                        "log_comment": f"segment-{size}",
                    },
                )

            cpu = _best(run_segment, args.repeat)
            store.command("SYSTEM FLUSH LOGS")
            [(memory,)] = store.query(
                "SELECT max(memory_usage) FROM system.query_log WHERE type = 'QueryFinish' "
                "AND log_comment = {comment:String}",
                {"comment": f"segment-{size}"},
            )
            print(
                f"  {size:>7,} spans: {cpu / size * 20_000 * 1000:6.0f} ms CPU per 20,000 spans, "
                f"peak {int(memory) / 2**20:5.0f} MiB"
            )
        store.close()


if __name__ == "__main__":
    main()
