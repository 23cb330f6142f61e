"""The embedded engine writes granules of at most ~1 MiB (store.ENGINE_MERGE_TREE), so a merge,
which holds a granule of a column of every part it merges, stays small with wide span rows.

Runs in a fresh process: chDB reads its engine options (the config file among them) once, when
the first client in a process opens it."""

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = """
    from agenttrail.collector.schema import MIGRATIONS, migrate
    from agenttrail.collector.store import Store, parse_store

    store = Store(parse_store({path!r}))
    migrate(store, MIGRATIONS)
    store.command("SYSTEM STOP MERGES otel_traces")
    for part in range(2):  # 8,192 spans with ~2 KB of tool arguments each: ~16 MiB a part
        store.command(
            "INSERT INTO otel_traces (Timestamp, TraceId, SpanId, SpanName, ServiceName, SpanAttributes) "
            f"SELECT now64(9) - number, hex(cityHash64(number + {{part * 8192}})), hex(number), "
            "'execute_tool', 'support-agent', map('gen_ai.tool.call.arguments', repeat(hex(number), 128)) "
            "FROM numbers(8192)"
        )
    store.command("SYSTEM START MERGES otel_traces")
    store.command("OPTIMIZE TABLE otel_traces FINAL")
    [(setting,)] = store.query(
        "SELECT value FROM system.merge_tree_settings WHERE name = 'index_granularity_bytes'"
    )
    [(parts, rows, granules)] = store.query(
        "SELECT count(), sum(rows), sum(marks) - count() FROM system.parts "
        "WHERE database = currentDatabase() AND table = 'otel_traces' AND active"
    )
    print(setting, parts, rows, granules)
"""


def test_span_parts_are_written_and_merged_in_granules_of_about_1_mib(tmp_path: Path) -> None:
    """~32 MiB of span rows merged into one part: ~32 granules of 1 MiB, where ClickHouse's own
    10 MiB would give 4 (a granule every 8,192 rows at most)."""
    code = textwrap.dedent(SCRIPT.format(path=str(tmp_path / "store")))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    setting, parts, rows, granules = result.stdout.split()
    assert (setting, parts, rows) == ("1048576", "1", "16384")
    assert int(granules) >= 16, f"{granules} granules for ~32 MiB of spans"
