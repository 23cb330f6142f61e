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

from agenttrail.collector.errors import StoreError, StoreUnavailable
from agenttrail.collector.schema import MIGRATIONS, migrate
from agenttrail.collector.store import Store, _bound, parse_store


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


def test_unreachable_server_is_a_clear_error() -> None:
    """A ClickHouse URL nobody listens on raises StoreUnavailable saying what to check."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(StoreUnavailable, match="Check the URL and that ClickHouse is running"):
        Store(parse_store(f"http://127.0.0.1:{port}/agenttrail"))


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
