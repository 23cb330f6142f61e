"""The migrations rewritten for a replicated ClickHouse cluster (`agenttrail schema --cluster`).

Every table becomes a Replicated*MergeTree table `<name>_local` created ON CLUSTER, with a
Distributed table under the original name over it, sharded by trace id where the table has
one. The sidecar keeps its own SQL: it writes to and reads from the original names.
Sharding by trace id keeps every row of a run (spans, trajectory versions, scores) on one
shard, which ReplacingMergeTree's FINAL and the `IN` subqueries rely on.

With `distributed=False` (one shard, several replicas) the replicated tables keep the
original names and no Distributed table is made; every statement the sidecar runs, lightweight
DELETE included, then works unchanged.

Only the statement shapes our migrations use are understood; anything else raises ValueError,
so a new kind of migration cannot be silently printed wrong.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from agenttrail.collector.schema import (
    MIGRATIONS_TABLE,
    MIGRATIONS_TABLE_CHECKSUM,
    Migration,
    Retention,
    combine,
    ttl_expression,
)

REPLICA_PATH = "'/clickhouse/tables/{shard}/{database}/{table}', '{replica}'"

_CREATE_TABLE = re.compile(r"^\s*CREATE TABLE IF NOT EXISTS (\w+) \(", re.S)
_ENGINE = re.compile(r"ENGINE = (\w*MergeTree)(?:\(([^)]*)\))?")
_ORDER_BY = re.compile(r"ORDER BY \(?(\w+)")
_CREATE_VIEW = re.compile(
    r"^\s*CREATE MATERIALIZED VIEW IF NOT EXISTS (\w+) TO (\w+)(\s+AS SELECT .*)$", re.S
)
_CREATE_PLAIN_VIEW = re.compile(r"^\s*CREATE VIEW IF NOT EXISTS (\w+)(\s+AS SELECT .*)$", re.S)
_INSERT_SELECT = re.compile(r"^\s*INSERT INTO (\w+)(\s.*)$", re.S)
# A table a statement reads (an ARRAY JOIN's arrays are columns, not tables).
_SOURCE = re.compile(r"\b(FROM|(?<!ARRAY )JOIN) (\w+)\b")
_NULL_ENGINE = re.compile(r"ENGINE = Null\s*$")
_ALTER = re.compile(r"^\s*ALTER TABLE (\w+) (.*)$", re.S)
_ALTER_VIEW_QUERY = re.compile(r"^\s*ALTER TABLE (\w+) MODIFY QUERY(\s+SELECT .*)$", re.S)


def _ident(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"{name!r} is not a plain ClickHouse identifier (letters, digits, _)")
    return name


class ClusterSchema:
    """Rewrites single-node migration statements into their cluster form."""

    def __init__(self, cluster: str, database: str, *, distributed: bool = True) -> None:
        self.cluster = _ident(cluster)
        self.database = _ident(database)
        self.distributed = distributed
        self.tables: list[str] = []  # original names of the tables made, in order
        self.views: list[str] = []  # plain views, made on every node under their own names

    def local(self, table: str) -> str:
        return f"{table}_local" if self.distributed else table

    def on(self, table: str) -> str:
        return f"{self.database}.{table} ON CLUSTER {self.cluster}"

    def rewrite(self, statement: str) -> list[str]:
        if match := _CREATE_TABLE.match(statement):
            return self._create_table(match.group(1), statement[match.end() :])
        if match := _CREATE_VIEW.match(statement):
            # Each node's view reads the rows stored on that node: the local tables.
            view, target, select = match.groups()
            return [
                f"CREATE MATERIALIZED VIEW IF NOT EXISTS {self.on(view)} "
                f"TO {self.database}.{self.local(target)}{self._sources(select, local=True)}"
            ]
        if match := _CREATE_PLAIN_VIEW.match(statement):
            view, select = match.groups()
            self.views.append(view)
            return [f"CREATE VIEW IF NOT EXISTS {self.on(view)}{self._sources(select, local=True)}"]
        if match := _INSERT_SELECT.match(statement):
            # A one-off fill, run once against the cluster through the Distributed tables.
            table, rest = match.groups()
            return [f"INSERT INTO {self.database}.{table}{self._sources(rest, local=False)}"]
        if match := _ALTER_VIEW_QUERY.match(statement):
            # A materialized view's new query: like its CREATE, it reads each node's own rows.
            view, select = match.groups()
            return [f"ALTER TABLE {self.on(view)} MODIFY QUERY{self._sources(select, local=True)}"]
        if match := _ALTER.match(statement):
            table, change = match.groups()
            # Settings, projections and skip indexes belong to the MergeTree tables; a Distributed
            # table has none.
            storage_only = re.match(
                r"\s*(MODIFY SETTING|RESET SETTING|(ADD|MATERIALIZE|DROP) (PROJECTION|INDEX))", change
            )
            names = [self.local(table)]
            if self.distributed and not storage_only:
                names.append(table)
            return [f"ALTER TABLE {self.on(name)} {change.strip()}" for name in names]
        raise ValueError(f"no cluster form for this migration statement: {statement.strip()[:120]}")

    def _sources(self, select: str, *, local: bool) -> str:
        """`select` with every table it reads qualified by the database (the local tables if asked)."""

        def qualify(match: re.Match[str]) -> str:
            keyword, name = match.groups()
            if name in self.tables:
                return f"{keyword} {self.database}.{self.local(name) if local else name}"
            if name in self.views:
                return f"{keyword} {self.database}.{name}"
            raise ValueError(f"this migration reads {name!r}, which no earlier migration makes")

        return _SOURCE.sub(qualify, select)

    def _create_table(self, table: str, body: str) -> list[str]:
        if _NULL_ENGINE.search(body):
            # An entry table that keeps nothing (its views write on): nothing to replicate; the
            # Distributed table sends each row to its shard's, whose views write the local rows.
            statements = [f"CREATE TABLE IF NOT EXISTS {self.on(self.local(table))} ({body.rstrip()}"]
            self.tables.append(table)
            if self.distributed:
                statements.append(self._distributed(table, body))
            return statements
        engine = _ENGINE.search(body)
        if engine is None:
            raise ValueError(f"table {table}: no MergeTree engine to replicate")
        kind, args = engine.group(1), engine.group(2)
        replicated = f"ENGINE = Replicated{kind}({REPLICA_PATH}{', ' + args if args else ''})"
        body = body[: engine.start()] + replicated + body[engine.end() :]
        # Blocks re-sent with the same insert_deduplication_token are dropped by every replica,
        # for a week (the default forgets after an hour; a spool may be replayed later than that).
        body = body.replace(
            "non_replicated_deduplication_window = 10000",
            "replicated_deduplication_window = 10000, replicated_deduplication_window_seconds = 604800",
        )
        statements = [f"CREATE TABLE IF NOT EXISTS {self.on(self.local(table))} ({body.rstrip()}"]
        self.tables.append(table)
        if self.distributed:
            statements.append(self._distributed(table, body))
        return statements

    def _distributed(self, table: str, body: str) -> str:
        return (
            f"CREATE TABLE IF NOT EXISTS {self.on(table)} AS {self.database}.{self.local(table)}\n"
            f"ENGINE = Distributed({self.cluster}, {self.database}, {self.local(table)}, "
            f"{self._shard_key(table, body)})"
        )

    @staticmethod
    def _shard_key(table: str, body: str) -> str:
        if re.search(r"^\s*TraceId String", body, re.M):
            return "cityHash64(TraceId)"
        order = _ORDER_BY.search(body)
        if order is None:
            raise ValueError(f"table {table}: no ORDER BY to shard by")
        return f"cityHash64({order.group(1)})"


def cluster_ddl(
    migrations: Iterable[Migration],
    cluster: str,
    database: str,
    retention: Retention | None = None,
    *,
    distributed: bool = True,
) -> list[str]:
    """Every statement, in order, that sets up (or, run again, upgrades) the cluster schema.

    Ends with the migrations' records in `schema_migrations`, so a sidecar started against the
    cluster finds them applied and runs no single-node DDL of its own, and with the retention
    TTLs on the replicated tables.
    """
    schema = ClusterSchema(cluster, database, distributed=distributed)
    statements = [f"CREATE DATABASE IF NOT EXISTS {database} ON CLUSTER {schema.cluster}"]
    statements += schema.rewrite(MIGRATIONS_TABLE)
    statements += schema.rewrite(MIGRATIONS_TABLE_CHECKSUM)  # a cluster set up before checksums
    seen: set[str] = set()
    ordered = combine(migrations)
    for migration in ordered:
        for statement in migration.statements:
            if statement not in seen:  # e.g. drift_events, created by two migrations
                seen.add(statement)
                statements += schema.rewrite(statement)
    values = ", ".join(f"({m.version}, '{_quote(m.name)}', '{m.checksum}')" for m in ordered)
    statements.append(f"INSERT INTO {database}.schema_migrations (Version, Name, Checksum) VALUES {values}")
    for table, column, days in (retention or Retention()).by_table():
        if days and table in schema.tables:
            statements.append(
                f"ALTER TABLE {schema.on(schema.local(table))} MODIFY TTL {ttl_expression(column, days)}"
            )
    return statements


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")
