"""Schema versions recorded in the store: applied once, checked in one query, old stores upgraded,
two clients migrating at once, a version claimed twice or an edited migration noticed."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agenttrail.collector import schema
from agenttrail.collector.errors import StoreError
from agenttrail.collector.schema import MIGRATIONS, Migration, combine, migrate
from agenttrail.collector.store import Store, parse_store

# schema_migrations as the code before checksums created it, and how it recorded a migration.
OLD_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    Version UInt32,
    Name String,
    AppliedAt DateTime64(3) DEFAULT now64(3)
) ENGINE = ReplacingMergeTree ORDER BY Version
"""


@pytest.fixture
def fresh(chdb_dir: Path, database: str) -> Iterator[Store]:
    """A database nothing has migrated yet."""
    opened = Store(parse_store(str(chdb_dir), database))
    yield opened
    opened.close()


def commands_run(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements `store.command` runs from now on (DDL goes through it)."""
    seen: list[str] = []
    command = store.command

    def recording(sql: str, parameters: Any = None) -> Any:
        seen.append(" ".join(sql.split()))
        return command(sql, parameters)

    monkeypatch.setattr(store, "command", recording)
    return seen


def records(store: Store) -> list[tuple[Any, ...]]:
    return store.query("SELECT Version, Name, Checksum FROM schema_migrations FINAL ORDER BY Version")


def test_up_to_date_store_runs_no_ddl(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A start on a migrated store checks the versions and runs no statement at all."""
    seen = commands_run(store, monkeypatch)
    assert migrate(store) == []
    assert seen == []
    assert records(store) == [(m.version, m.name, m.checksum) for m in MIGRATIONS]


def test_store_made_before_checksums_upgrades_cleanly(fresh: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store the previous code migrated (no Checksum column) gets the column, re-runs none of
    its migrations, and from then on is checked with no DDL."""
    fresh.command(OLD_MIGRATIONS_TABLE)
    for migration in MIGRATIONS:
        for statement in migration.statements:
            fresh.command(statement)
        fresh.insert_rows("schema_migrations", ("Version", "Name"), [(migration.version, migration.name)])
    seen = commands_run(fresh, monkeypatch)
    assert migrate(fresh) == []
    assert seen == ["ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS Checksum String DEFAULT ''"]
    assert records(fresh) == [(m.version, m.name, "") for m in MIGRATIONS]
    seen.clear()
    later = Migration(98, "later", ("ALTER TABLE trajectories ADD COLUMN IF NOT EXISTS Later UInt8",))
    assert migrate(fresh, (*MIGRATIONS, later)) == [98]
    assert seen == [" ".join(later.statements[0].split())]
    assert records(fresh)[-1] == (98, "later", later.checksum)


def test_fresh_store_applies_in_version_order(fresh: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Migrations given out of order run in version order, each once, each recorded."""
    seen = commands_run(fresh, monkeypatch)
    assert migrate(fresh, tuple(reversed(MIGRATIONS))) == [m.version for m in MIGRATIONS]
    expected = [" ".join(s.split()) for m in MIGRATIONS for s in m.statements]
    assert seen[1:] == expected  # after creating schema_migrations
    assert records(fresh) == [(m.version, m.name, m.checksum) for m in MIGRATIONS]


def test_failed_migration_keeps_the_records_of_those_before(fresh: Store) -> None:
    """A migration that fails leaves the earlier ones recorded, itself not, so the next start
    resumes at it."""
    broken = Migration(99, "broken", ("ALTER TABLE no_such_table ADD COLUMN IF NOT EXISTS X UInt8",))
    with pytest.raises(Exception, match="no_such_table"):
        migrate(fresh, (*MIGRATIONS, broken))
    assert [row[0] for row in records(fresh)] == [m.version for m in MIGRATIONS]


def test_two_clients_migrating_at_once_agree(fresh: Store) -> None:
    """Two processes opening one server store at once may both apply a migration: every statement
    is idempotent, so both succeed, the schema is the one a single client makes, one record each."""
    clients = [fresh.clone(), fresh.clone()]
    start = threading.Barrier(len(clients))
    errors: list[BaseException] = []

    def run(client: Store) -> None:
        start.wait()
        try:
            migrate(client)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    for client in clients:
        client.close()
    assert errors == []
    assert records(fresh) == [(m.version, m.name, m.checksum) for m in MIGRATIONS]
    columns = {name for name, _type, *_ in fresh.query("DESCRIBE TABLE trajectories")}
    assert {"Model", "AvailableTools", "Incomplete"} <= columns


def test_a_statement_failing_while_another_process_migrates_is_tried_again(
    fresh: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race the test above can hit: the other process ran ahead, a later migration undid what
    this one's statement needs, and the statement fails. After a pause this process reads the
    other's records and skips what they hold instead of failing its start."""
    other = fresh.clone()
    command = fresh.command
    failed: list[str] = []

    def racing(sql: str, parameters: Any = None) -> Any:
        if "ADD PROJECTION" in sql and not failed:
            failed.append(sql)
            migrate(other)  # the other process finishes first
            raise StoreError("ADD PROJECTION is not supported (deduplicate_merge_projection_mode)")
        return command(sql, parameters)

    monkeypatch.setattr(fresh, "command", racing)
    monkeypatch.setattr(schema, "RACE_PAUSES_S", (0.0,))
    # Its own migrations, up to the one that failed (4 adds the projection).
    assert migrate(fresh) == [m.version for m in MIGRATIONS if m.version < 4]
    other.close()
    assert failed
    assert records(fresh) == [(m.version, m.name, m.checksum) for m in MIGRATIONS]


def test_a_failure_of_its_own_is_raised_after_the_pauses(
    fresh: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A statement that goes on failing is raised as it was, after every pause."""
    pauses: list[float] = []
    monkeypatch.setattr(schema.time, "sleep", pauses.append)
    broken = Migration(99, "broken", ("ALTER TABLE no_such_table ADD COLUMN IF NOT EXISTS X UInt8",))
    with pytest.raises(StoreError, match="no_such_table"):
        migrate(fresh, (*MIGRATIONS, broken))
    assert pauses == list(schema.RACE_PAUSES_S)


def test_a_version_claimed_twice_is_refused() -> None:
    """Two different migrations under one version: an error naming both; the same one twice is one."""
    first = Migration(200, "first", ("SELECT 1",))
    with pytest.raises(ValueError, match="version 200 is claimed by 'first' and 'second'"):
        combine((first,), (Migration(200, "second", ("SELECT 2",)),))
    assert combine((first,), (first,)) == (first,)


def test_an_edited_migration_is_reported(store: Store, caplog: pytest.LogCaptureFixture) -> None:
    """A released migration whose statements changed after a store applied it is logged, not re-run."""
    edited = Migration(MIGRATIONS[-1].version, MIGRATIONS[-1].name, ("SELECT 1",))
    with caplog.at_level(logging.WARNING, logger="agenttrail.collector.schema"):
        assert migrate(store, (*MIGRATIONS[:-1], edited)) == []
    assert f"schema migration {edited.version} ({edited.name}) differs" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="agenttrail.collector.schema"):
        migrate(store)
    assert caplog.text == ""


def test_checksum_ignores_layout_only() -> None:
    """Re-indenting a statement keeps its checksum; changing it does not."""
    one = Migration(1, "x", ("CREATE TABLE t (a UInt8)\n ENGINE = Memory",))
    assert one.checksum == Migration(1, "x", ("CREATE TABLE t (a UInt8) ENGINE = Memory",)).checksum
    assert one.checksum != Migration(1, "x", ("CREATE TABLE t (a UInt16) ENGINE = Memory",)).checksum


def test_span_parts_merge_column_by_column(store: Store) -> None:
    """Migration 5: small span parts merge column by column (less memory), and a merge keeps
    every span and its attributes."""
    settings = store.query(
        "SELECT name, value FROM system.merge_tree_settings WHERE name LIKE 'vertical_merge%' ORDER BY name"
    )
    defaults = dict(settings)
    assert defaults["vertical_merge_algorithm_min_rows_to_activate"] != "1"  # so the migration matters
    table = store.query(
        "SELECT engine_full FROM system.tables WHERE database = currentDatabase() AND name = 'otel_traces'"
    )[0][0]
    assert "vertical_merge_algorithm_min_rows_to_activate = 1" in table
    assert "vertical_merge_algorithm_min_bytes_to_activate = 0" in table
    for part in range(3):
        store.command(
            "INSERT INTO otel_traces (Timestamp, TraceId, SpanId, SpanName, ServiceName, SpanAttributes) "
            f"SELECT now64(9), hex(number + {part * 1000}), hex(number), 'tool', 'svc', "
            "map('gen_ai.tool.name', toString(number)) FROM numbers(1000)"
        )
    store.command("OPTIMIZE TABLE otel_traces FINAL")
    assert store.query(
        "SELECT count(), uniqExact(TraceId), countIf(SpanAttributes['gen_ai.tool.name'] = '') "
        "FROM otel_traces"
    ) == [(3000, 3000, 0)]
    assert store.query(
        "SELECT count() FROM system.parts "
        "WHERE database = currentDatabase() AND table = 'otel_traces' AND active"
    ) == [(1,)]


def test_a_store_migrated_by_a_newer_agenttrail_is_reported(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """An older binary on a store a newer one migrated (a rollback) is told so, by version and
    name; versions of a part it does not run (another hundred) are not its concern."""
    newest = max(m.version for m in MIGRATIONS)
    later = Migration(newest + 1, "a later collector change", ("SELECT 1",))
    other_part = Migration(9_900, "another part's schema", ("SELECT 1",))
    migrate(store, (*MIGRATIONS, later, other_part))
    with caplog.at_level(logging.WARNING, logger="agenttrail.collector.schema"):
        assert migrate(store) == []
    assert f"migration(s) {later.version} (a later collector change) that this agenttrail does not know" in (
        caplog.text
    )
    assert "9900" not in caplog.text
