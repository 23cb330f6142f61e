"""The embedded engine's MergeTree defaults (store.ENGINE_MERGE_TREE), which bound what one
merge holds: granules of ~1 MiB (a merge holds a granule of a column of each part), and merges of
16,384 rows and more column by column in a table that does not say otherwise (a row-by-row merge
of many small parts holds a block of every column of every part: `scores` under overload, 110 MiB).

Runs in a fresh process: chDB reads its engine options (the config file among them) once, when
the first client in a process opens it. The part log, on through the same config file, says how
each merge ran."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

PART_LOG = """<part_log><database>system</database><table>part_log</table>
<flush_interval_milliseconds>1000</flush_interval_milliseconds></part_log>"""

# A fresh engine with the part log on, its store open as `store`: both scripts start so.
ENGINE_WITH_PART_LOG = """
    import agenttrail.collector.store as store_module
    from agenttrail.collector.store import Store, parse_store

    config = {config!r}
    with open(config, "w") as file:
        file.write(store_module.engine_config_xml({part_log!r}))
    store_module.EMBEDDED_ENGINE["config-file"] = config
    store = Store(parse_store({path!r}))
"""

SCRIPT = (
    ENGINE_WITH_PART_LOG
    + """
    columns = ", ".join(f"c{{i}} String" for i in range(12))  # >= 11 columns: ClickHouse's own bar
    # "large" merges into a Wide part (> 10 MB), which a column-by-column merge needs
    for table, rows in (("small", 4000), ("large", 60000)):
        engine = "ENGINE = ReplacingMergeTree ORDER BY k"
        store.command(f"CREATE TABLE {{table}} (k UInt64, {{columns}}) {{engine}}")
        store.command(f"SYSTEM STOP MERGES {{table}}")
        for part in range(4):
            store.command(
                f"INSERT INTO {{table}} SELECT number, "
                + ", ".join(f"repeat(toString(number * {{i}}), 4)" for i in range(12))
                + f" FROM numbers({{part * rows // 4}}, {{rows // 4}})"
            )
        store.command(f"SYSTEM START MERGES {{table}}")
        store.command(f"OPTIMIZE TABLE {{table}} FINAL")
    store.command("SYSTEM FLUSH LOGS")
    print(store.query(
        "SELECT table, merge_algorithm FROM system.part_log WHERE database = currentDatabase() "
        "AND event_type = 'MergeParts' ORDER BY table"
    ))
"""
)


def test_merges_of_16384_rows_and_more_go_column_by_column(tmp_path: Path) -> None:
    """4 parts of 60,000 rows in all merge column by column (ClickHouse's own bar is 131,072
    rows); 4,000 rows in all still merge row by row."""
    code = textwrap.dedent(
        SCRIPT.format(config=str(tmp_path / "engine.xml"), part_log=PART_LOG, path=str(tmp_path / "store"))
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "[('large', 'Vertical'), ('small', 'Horizontal')]"


GRANULES = """
    from agenttrail.collector.schema import MIGRATIONS, migrate
    from agenttrail.collector.store import Store, parse_store

    store = Store(parse_store({path!r}))
    migrate(store, MIGRATIONS)
    store.command("SYSTEM STOP MERGES otel_traces")
    for part in range(2):  # 8,192 spans with ~0.6 KB of tool arguments each: ~5 MiB a part
        store.command(
            "INSERT INTO otel_traces (Timestamp, TraceId, SpanId, SpanName, ServiceName, SpanAttributes) "
            f"SELECT now64(9) - number, hex(cityHash64(number + {{part * 8192}})), hex(number), "
            "'execute_tool', 'support-agent', map('gen_ai.tool.call.arguments', repeat(hex(number), 128)) "
            "FROM numbers(8192)"
        )
    granules = (
        "SELECT count(), sum(rows), sum(marks) - count() FROM system.parts "
        "WHERE database = currentDatabase() AND table = 'otel_traces' AND active"
    )
    [(_, _, written)] = store.query(granules)
    store.command("SYSTEM START MERGES otel_traces")
    store.command("OPTIMIZE TABLE otel_traces FINAL")
    [(parts, rows, merged)] = store.query(granules)
    print(parts, rows, written, merged)
"""


def test_span_parts_are_written_and_merged_in_granules_of_about_1_mib(tmp_path: Path) -> None:
    """~10 MiB of span rows (uncompressed) in granules of 1 MiB: ~10, where ClickHouse's own
    10 MiB gives 2 (a granule every 8,192 rows at most), written and merged alike: a merge holds
    a granule of a column of each part it merges. (Until migration 10 the attribute Bloom
    filters' expressions counted in a block's bytes too, and the same rows made 16 granules or
    more: docs/performance.md "rss22".)"""
    code = textwrap.dedent(GRANULES.format(path=str(tmp_path / "store")))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    parts, rows, written, merged = result.stdout.split()
    assert (parts, rows) == ("1", "16384")
    assert int(written) >= 8, f"{written} granules written for ~10 MiB of spans"
    assert int(merged) >= 8, f"{merged} granules merged for ~10 MiB of spans"


_CONFIG_FILE_PROBE = """
import json
from agenttrail.collector.store import embedded_engine_options, engine_config_file
print(json.dumps([engine_config_file(), "config-file" in embedded_engine_options(0)]))
"""


def _config_file_in(tmpdir: Path) -> tuple[object, str]:
    import json

    done = subprocess.run(
        [sys.executable, "-c", _CONFIG_FILE_PROBE],
        env={**os.environ, "TMPDIR": str(tmpdir)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout), done.stderr


def test_the_engine_config_file_is_this_users_own_or_left_out(tmp_path: Path) -> None:
    """The file goes in a directory of the user's own (mode 0700) under TMPDIR; where that cannot
    be (a file in its place, the directory another user's), the engine opens without it and a
    warning says what to do, instead of the store failing to open."""
    (written, passed), _ = _config_file_in(tmp_path)
    assert passed is True
    directory = tmp_path / f"agenttrail-{os.getuid()}"
    assert written == str(directory / Path(str(written)).name)
    assert directory.stat().st_mode & 0o777 == 0o700
    assert "<index_granularity_bytes>" in Path(str(written)).read_text()

    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / f"agenttrail-{os.getuid()}").write_text("")  # a file where the directory goes
    (written, passed), stderr = _config_file_in(blocked)
    assert (written, passed) == (None, False)
    assert "point TMPDIR at a directory this user can write" in stderr

    if os.getuid() == 0:  # only root can give the directory to another user
        other = tmp_path / "other"
        (other / "agenttrail-0").mkdir(parents=True)
        os.chown(other / "agenttrail-0", 65534, 65534)
        (written, passed), stderr = _config_file_in(other)
        assert (written, passed) == (None, False)
        assert "is not a directory of this user's" in stderr


BLOCKS = (
    ENGINE_WITH_PART_LOG
    + """
    from agenttrail.collector.schema import MIGRATIONS, migrate

    migrate(store, MIGRATIONS)
    store.command("SYSTEM STOP MERGES otel_traces")
    for part in range(16):  # spans as the spool insert writes them: parts of 8,192
        store.command(
            "INSERT INTO otel_traces (Timestamp, TraceId, SpanId, SpanName, ServiceName, SpanAttributes) "
            f"SELECT now64(9) - number, hex(cityHash64(number + {{part * 8192}})), hex(number), "
            "'execute_tool ' || toString(number % 4), 'support-agent', "
            "map('gen_ai.tool.call.arguments', repeat(toString(number), 60), "
            "'gen_ai.tool.call.result', repeat(hex(number * 7), 40)) FROM numbers(8192)"
        )
    store.command("SYSTEM START MERGES otel_traces")
    store.command("OPTIMIZE TABLE otel_traces FINAL")
    store.command("SYSTEM FLUSH LOGS")
    [(merge_mib,)] = store.query(
        "SELECT max(peak_memory_usage) / 1048576 FROM system.part_log "
        "WHERE database = currentDatabase() AND table = 'otel_traces' AND event_type = 'MergeParts'"
    )
    [(path,)] = store.query(
        "SELECT path FROM system.parts WHERE database = currentDatabase() AND table = 'otel_traces' "
        "AND active"
    )
    print(path, merge_mib)
"""
)


def _largest_block(part: Path) -> int:
    """The largest decompressed size of any compressed block in a part's column files (each block:
    a 16-byte checksum, a method byte, the compressed size with its 9-byte header, the
    decompressed size)."""
    largest = 0
    for column in part.glob("*.bin"):
        data = column.read_bytes()
        offset = 0
        while offset < len(data):
            compressed = int.from_bytes(data[offset + 17 : offset + 21], "little")
            largest = max(largest, int.from_bytes(data[offset + 21 : offset + 25], "little"))
            offset += 16 + compressed
    return largest


def test_a_span_merge_reads_and_writes_blocks_of_at_most_256_kib(tmp_path: Path) -> None:
    """A merge of 16 spool-sized span parts writes compressed blocks of at most 256 KiB (ClickHouse:
    1 MiB, a granule's column of span attributes in one block) and holds less than 57 MiB (the
    part log's peak: 52.7 MiB; 61.9 with ClickHouse's 10 MiB merge blocks), since
    it holds a decompressed block and a block of rows of each part it merges (docs/performance.md
    "rss23")."""
    code = textwrap.dedent(
        BLOCKS.format(config=str(tmp_path / "engine.xml"), part_log=PART_LOG, path=str(tmp_path / "store"))
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    path, merge_mib = result.stdout.split()
    assert _largest_block(Path(path)) <= 256 * 1024
    assert float(merge_mib) < 57, f"a merge of 16 span parts held {merge_mib} MiB"
