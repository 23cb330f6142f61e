"""The SQL tool's second line: whatever the gate lets through runs under settings with which the
store itself refuses writes and stops at the row limit, on a client of its own, so the other
clients (the sidecar's writers) keep writing."""

from __future__ import annotations

from typing import Any

import pytest

from agenttrail.collector.errors import StoreError
from agenttrail.evaluators.mcp_server.queries import run_sql, sql_settings


def test_the_settings_make_the_store_refuse_writes(store: Any) -> None:
    """An INSERT run under the tool's settings fails in ClickHouse; another client still writes."""
    store.command("CREATE TABLE t (a UInt32) ENGINE = MergeTree ORDER BY a")
    reader = store.clone()
    with pytest.raises(StoreError, match="readonly"):
        reader.query_with_names("INSERT INTO t VALUES (1)", settings=sql_settings(10))
    store.command("INSERT INTO t VALUES (2)")
    assert store.query("SELECT a FROM t") == [(2,)]
    reader.close()


def test_a_query_cannot_change_the_limits(store: Any) -> None:
    """A SETTINGS clause of the query's own (one the gate missed) is refused by the store: a
    query-level clause is applied after the tool's settings, so it could raise the row limit or
    the timeout."""
    reader = store.clone()
    for clause in ("max_result_rows = 100000", "max_execution_time = 3600", "max_threads = 1"):
        with pytest.raises(StoreError, match="readonly mode"):
            reader.query_with_names(
                f"SELECT number FROM numbers(1000) SETTINGS {clause}", settings=sql_settings(5)
            )
    reader.close()


@pytest.mark.parametrize("tail", ["", ";", " -- a note", " /* a note */", "\n-- a note\n"])
def test_the_limits_hold_after_a_trailing_semicolon_or_comment(store: Any, tail: str) -> None:
    """The store's settings clause goes after whatever the query ends in, on a line of its own."""
    reader = store.clone()
    names, rows = reader.query_with_names(
        f"SELECT getSetting('max_result_rows') AS m{tail}", settings=sql_settings(5)
    )
    assert (names, rows) == (["m"], [(6,)])
    reader.close()


def test_rows_stop_at_the_limit(store: Any) -> None:
    """A query over many rows returns the limit and says it was truncated; a small one is whole."""
    many = run_sql(store.clone(), "SELECT number FROM numbers(100000) ORDER BY number DESC", 5)
    assert many["rows"] == [[99999], [99998], [99997], [99996], [99995]]
    assert many["truncated"] is True
    few = run_sql(store.clone(), "SELECT number FROM numbers(3)", 5)
    assert few == {"columns": ["number"], "rows": [[0], [1], [2]], "row_count": 3, "truncated": False}


def test_a_long_query_stops_at_the_timeout(store: Any) -> None:
    """A query that would run for 10 s is stopped by ClickHouse at the timeout, with its reason."""
    with pytest.raises(StoreError, match="Timeout exceeded"):
        run_sql(
            store.clone(),
            # ~10 s however fast the machine: 16 blocks of 64 rows (the tool's block size), 10 ms a row
            "SELECT sum(sleepEachRow(0.01)) FROM numbers(1000)",
            5,
            timeout_s=1,
        )
