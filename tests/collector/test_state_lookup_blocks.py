"""The previous-state look-up's table keeps a compressed block per granule (migration 9).

Each of a chunk's ids reads the granule its hash falls in, in every part of `assembled_traces`,
and a new trace (nearly every one) matches nothing there. With ClickHouse's default 64 KiB
blocks the look-up's CPU grew with the table (2,000 ids, one merged part: 36-39 against
79-88 ms at 8,000,000 states, docs/performance.md "asm20"); the states still read right."""

from __future__ import annotations

import uuid
from typing import Any

from agenttrail.collector import assembler
from agenttrail.collector.assembly_sql import CHUNK_TABLE, CREATE_CHUNK_TABLE

FILL = (
    "INSERT INTO assembled_traces "
    "(TraceId, AssembledThrough, RunKeys, Revision, Version, SpansFrom, SpansUntil) "
    "SELECT lower(hex(MD5(toString(number)))), now64(3), [hex(number)], 1, number, now64(3), now64(3) "
    "FROM numbers({rows:UInt64})"
)


def test_the_state_table_writes_a_small_block_per_granule_and_reads_states_back(store: Any) -> None:
    settings = store.query("SELECT engine_full FROM system.tables WHERE name = 'assembled_traces'")[0][0]
    assert "index_granularity = 256" in settings
    assert "min_compress_block_size = 1024" in settings  # a granule's 2 KiB of hashes is a block
    assert "max_compress_block_size = 4096" in settings
    store.command(FILL, {"rows": 20_000})
    store.command("OPTIMIZE TABLE assembled_traces FINAL")
    known = store.query("SELECT lower(hex(MD5(toString(12345))))")[0][0]
    store.command(CREATE_CHUNK_TABLE)
    store.command(f"TRUNCATE TABLE {CHUNK_TABLE}")
    store.insert_rows(CHUNK_TABLE, ["TraceId"], [(known,), (uuid.uuid4().hex,)])
    rows = store.query(assembler._PREVIOUS_STATE)
    assert [(row[1], list(row[2]), row[3]) for row in rows] == [(known, ["3039"], 1)]
