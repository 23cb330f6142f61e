"""The store layer: locations, migrations, error translation, and a real ClickHouse server when given."""

from __future__ import annotations

import os
import socket
import time
import uuid
from typing import Any

import pytest
from clickhouse_connect.driver.binding import format_bind_value
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agenttrail.collector.errors import StoreError, StoreOutOfMemory, StoreRefused, StoreUnavailable
from agenttrail.collector.schema import MIGRATIONS, migrate
from agenttrail.collector.store import FileSource, Store, _bound, parse_store, settings_clause


def test_parse_store_locations(tmp_path: Any) -> None:
    """Directories become chdb URLs; server URLs keep credentials and take the database from the path."""
    embedded = parse_store(str(tmp_path / "data"))
    assert embedded.embedded
    assert embedded.url == f"chdb://{tmp_path / 'data'}"
    server = parse_store("https://user:pw@ch.example:8443/agents")
    assert (server.url, server.database, server.embedded) == (
        "https://user:pw@ch.example:8443",
        "agents",
        False,
    )
    assert "pw" not in server.describe()
    with pytest.raises(StoreError, match="not a valid ClickHouse identifier"):
        parse_store(str(tmp_path), database="bad-name;")


def test_migrations_are_idempotent(store: Any) -> None:
    """Running migrations again applies nothing and keeps one record per version."""
    assert migrate(store) == []
    versions = store.query("SELECT Version FROM schema_migrations FINAL ORDER BY Version")
    assert [row[0] for row in versions] == [m.version for m in MIGRATIONS]


def test_unreachable_server_is_a_clear_error(closed_port: socket.socket) -> None:
    """A ClickHouse URL nobody listens on raises StoreUnavailable saying what to check."""
    with pytest.raises(StoreUnavailable, match="Check the URL and that ClickHouse is running"):
        Store(parse_store(f"http://127.0.0.1:{closed_port.getsockname()[1]}/agenttrail"))


def test_bound_parameters_carry_hostile_values(store: Any) -> None:
    """Values travel as parameters: quotes and SQL in a value are data, not SQL."""
    hostile = "x'); DROP TABLE otel_traces; --"
    store.insert_rows(
        "trace_arrivals",
        ("TraceId", "ArrivedAt", "HasAgent"),
        [(hostile, f"{time.time():.6f}", 1)],  # recent: older rows fall under the 7-day TTL
    )
    rows = store.query("SELECT TraceId FROM trace_arrivals WHERE TraceId = {t:String}", {"t": hostile})
    assert rows == [(hostile,)]
    assert store.query("EXISTS TABLE otel_traces") == [(1,)]


# Lists long enough for the pre-rendered path, of strings with and without what must be escaped.
_STRING_LISTS = st.lists(
    st.one_of(
        st.text(alphabet="0123456789abcdef", min_size=32, max_size=32),
        st.text(alphabet=st.sampled_from(["a", "'", "\\", "`", "\t", "\n", "é", " ", "]"]), max_size=6),
    ),
    min_size=14,
    max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=_STRING_LISTS)
def test_long_string_lists_bind_as_clickhouse_connect_renders_them(store: Any, values: list[str]) -> None:
    """The pre-rendered Array(String) parameter is the text clickhouse-connect would send, and
    ClickHouse reads back the same list, whatever the strings hold."""
    bound = _bound({"values": values})["values"]
    assert format_bind_value(bound) == format_bind_value(values)
    assert store.query("SELECT {values:Array(String)}", {"values": values}) == [(values,)]


_DAYS = FileSource("CustomSeparated", "a UInt64, d Date")
_SESSION = "SELECT getSetting('max_partitions_per_insert_block'), getSetting('max_memory_usage')"


def _days_file(path: Any, rows: list[tuple[int, str]]) -> Any:
    path.write_text("".join(f"{a};{d}\n" for a, d in rows))
    return path


def test_insert_select_file_applies_its_settings_to_that_insert_only(store: Any, tmp_path: Any) -> None:
    """The settings of `insert_select_file` (in the statement on the embedded engine) reach the
    file's format, the insert's limits and its deduplication, and do not outlast the insert."""
    store.command(
        "CREATE TABLE days (a UInt64, d Date) ENGINE = MergeTree PARTITION BY d ORDER BY a "
        "SETTINGS non_replicated_deduplication_window = 100"
    )
    session = store.query(_SESSION)
    fmt = {"format_custom_field_delimiter": ";", "format_custom_escaping_rule": "CSV"}
    two_days = _days_file(tmp_path / "a.txt", [(1, "2026-01-01"), (2, "2026-01-02")])
    other = _days_file(tmp_path / "b.txt", [(3, "2026-01-01")])

    def insert(path: Any, token: str | None = None, **settings: Any) -> None:
        select = lambda source: f"SELECT a, d FROM {source}"  # noqa: E731
        store.insert_select_file(
            "days", ("a", "d"), select, _DAYS, path, settings={**fmt, **settings}, dedup_token=token
        )

    with pytest.raises(StoreRefused, match="max_partitions_per_insert_block"):  # a limit of one partition
        insert(two_days, max_partitions_per_insert_block=1)
    with pytest.raises(StoreOutOfMemory):
        insert(two_days, max_memory_usage=1, max_untracked_memory=0)
    assert store.query(_SESSION) == session
    insert(two_days, "token-1", max_partitions_per_insert_block=2)
    insert(other, "token-1")  # other rows under the same token: a replay, dropped
    insert(other, "token-2")
    assert store.query("SELECT a, toString(d) FROM days ORDER BY a") == [
        (1, "2026-01-01"),
        (2, "2026-01-02"),
        (3, "2026-01-01"),
    ]
    assert store.query(_SESSION) == session


def test_insert_rows_applies_its_settings_and_dedup_token(store: Any) -> None:
    """`insert_rows`' settings and deduplication token reach the insert on the embedded engine."""
    store.command(
        "CREATE TABLE days (a UInt64, d Date) ENGINE = MergeTree PARTITION BY d ORDER BY a "
        "SETTINGS non_replicated_deduplication_window = 100"
    )
    session = store.query(_SESSION)
    with pytest.raises(StoreRefused, match="max_partitions_per_insert_block"):
        store.insert_rows(
            "days",
            ("a", "d"),
            [(1, "2026-01-01"), (2, "2026-01-02")],
            settings={"max_partitions_per_insert_block": 1},
        )
    store.insert_rows("days", ("a", "d"), [(1, "2026-01-01")], dedup_token="token-1")
    store.insert_rows("days", ("a", "d"), [(2, "2026-01-01")], dedup_token="token-1")
    assert store.query("SELECT a FROM days") == [(1,)]
    assert store.query(_SESSION) == session


def test_settings_clause_quotes_values_and_refuses_bad_names(store: Any) -> None:
    """A setting's string value is a quoted literal ClickHouse reads back as given; a name that is
    not an identifier is refused before any SQL is built."""
    awkward = "it's a \\ path/with 'quotes'"
    clause = settings_clause({"format_schema": awkward, "max_threads": 1})
    assert store.query(f"SELECT getSetting('format_schema'), getSetting('max_threads') {clause}") == [
        (awkward, 1)
    ]
    assert settings_clause({}) == ""
    with pytest.raises(StoreError, match="not a valid ClickHouse identifier"):
        settings_clause({"max_threads = 1, readonly": 1})


@pytest.mark.skipif(
    not os.environ.get("AGENTTRAIL_TEST_CLICKHOUSE_URL"), reason="AGENTTRAIL_TEST_CLICKHOUSE_URL not set"
)
def test_clickhouse_server_round_trip() -> None:
    """Against a real ClickHouse server: migrate, insert with a dedup token twice, read once."""
    database = f"agenttrail_test_{uuid.uuid4().hex[:8]}"
    server = Store(parse_store(os.environ["AGENTTRAIL_TEST_CLICKHOUSE_URL"], database))
    try:
        migrate(server)
        row = ("ab" * 16, "1790000000.000001", 1)
        for _ in range(2):
            server.insert_rows(
                "trace_arrivals", ("TraceId", "ArrivedAt", "HasAgent"), [row], dedup_token="tok-1"
            )
        assert server.query("SELECT count() FROM trace_arrivals") == [(1,)]
    finally:
        server.command(f"DROP DATABASE IF EXISTS `{database}`")
        server.close()
