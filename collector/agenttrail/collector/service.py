"""What the collector's own commands (`trajectories`, `spool`, `schema`, `migrate`, `config show`)
do, as functions tests call without click: the read `trajectories` makes, the quarantine's entries
decoded and re-queued, the schema's DDL, the pending migrations applied, the effective settings
as rows.

Errors are the project's: QueryError for a filter value, `NoSuchEntry` for a quarantine id that
names nothing (the message lists those there are), `CommandUsageError` for options that do not go
together, `SchemaError` when the cluster DDL cannot be written. `serve` builds the sidecar its
wiring gives and stays in `cli.py`: it is a loop over signals around `Sidecar.start`/`stop`.
Importing this module stays light: the sidecar and the OTLP decoder load inside the functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agenttrail.collector.errors import AgentTrailError, ConfigError, StoreError
from agenttrail.collector.queries import TrajectoryFilter, parse_time, query_trajectories
from agenttrail.collector.reads import ReadRequest
from agenttrail.collector.schema import (
    MIGRATIONS_TABLE,
    Migration,
    Retention,
    combine,
    migrate,
    newer_than_known,
    recorded_versions,
)

if TYPE_CHECKING:
    from agenttrail.collector.config import Settings, SidecarConfig
    from agenttrail.collector.quarantine import Quarantine, QuarantineEntry
    from agenttrail.collector.store import Store

TRAJECTORIES_ROUTE = "/api/v1/trajectories"


class CommandUsageError(AgentTrailError, ValueError):
    """Options of a collector command that do not go together; the message says which to give."""


class NoSuchEntry(AgentTrailError, LookupError):
    """A quarantine entry id that names no entry; the message lists the entries there are."""


class SchemaError(AgentTrailError, ValueError):
    """The schema's DDL cannot be written as asked (a migration the cluster rewrite cannot take)."""


def trajectories_read(
    *,
    since: str | None = None,
    until: str | None = None,
    agent: str | None = None,
    task: str | None = None,
    trace_id: str | None = None,
    limit: int = 100,
) -> ReadRequest:
    """Agent runs with their tool calls, newest first (`trace_id` a full id or a prefix the
    caller resolved)."""
    start, end = (parse_time(value) if value else None for value in (since, until))
    where = TrajectoryFilter(start, end, agent, task, trace_id, limit)
    return ReadRequest(TRAJECTORIES_ROUTE, where.to_params(), lambda store: query_trajectories(store, where))


def open_quarantine(spool_dir: str | None, config: SidecarConfig | None = None) -> Quarantine:
    """The quarantine of `spool_dir`, or else of the spool `serve` would use with `config`."""
    from agenttrail.collector.quarantine import Quarantine
    from agenttrail.collector.sidecar import Sidecar

    if spool_dir is not None:
        return Quarantine(Path(spool_dir))
    if config is None:
        raise CommandUsageError("give the spool directory (--spool-dir) or the settings that name it")
    return Quarantine(Sidecar(config).spool_dir())


@dataclass(frozen=True, slots=True)
class SpanLine:
    trace_id: str
    span_id: str
    name: str
    start_ns: int
    end_ns: int


@dataclass(frozen=True, slots=True)
class RecordDetail:
    """One spool record of an entry: its spans, or why it cannot be decoded."""

    index: int
    bytes: int
    spans: list[SpanLine]
    undecodable: str | None = None


@dataclass(frozen=True, slots=True)
class EntryDetail:
    entry: QuarantineEntry
    records: list[RecordDetail]


def _entry_path(quarantine: Quarantine, entry_id: str) -> Path:
    try:
        return quarantine.path(entry_id)
    except KeyError as exc:
        raise NoSuchEntry(str(exc.args[0])) from exc


def describe_entry(quarantine: Quarantine, entry_id: str) -> EntryDetail:
    """One quarantined entry: why it was set aside, and the spans its records hold."""
    from agenttrail.collector.otlp_decode import OtlpDecodeError, parse_protobuf
    from agenttrail.collector.spool import Spool

    path = _entry_path(quarantine, entry_id)
    [entry] = [item for item in quarantine.entries() if item.id == entry_id]
    records = []
    for index, record in enumerate(Spool.read(path)):
        try:
            request = parse_protobuf(record)
        except OtlpDecodeError as exc:
            records.append(RecordDetail(index, len(record), [], str(exc)))
            continue
        spans = [
            SpanLine(
                span.trace_id.hex(),
                span.span_id.hex(),
                span.name,
                span.start_time_unix_nano,
                span.end_time_unix_nano,
            )
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]
        records.append(RecordDetail(index, len(record), spans))
    return EntryDetail(entry, records)


def requeue_entries(
    quarantine: Quarantine,
    entry_ids: Sequence[str] = (),
    *,
    every: bool = False,
    done: Callable[[str, Path], None] = lambda entry_id, segment: None,
) -> list[Path]:
    """Put the entries (`every`: all of them) back into the spool, in order, once their cause is
    fixed: a running `serve` stores them within a second, otherwise the next start does. `done`
    hears of each as it goes, so an unknown id later in the list leaves the earlier ones done."""
    ids = [entry.id for entry in quarantine.entries()] if every else list(entry_ids)
    if not ids:
        raise CommandUsageError("give entry ids (see `agenttrail spool list`) or --all")
    segments = []
    for entry_id in ids:
        _entry_path(quarantine, entry_id)
        segment = quarantine.requeue(entry_id)
        done(entry_id, segment)
        segments.append(segment)
    return segments


class MigrationFailed(StoreError):
    """A schema migration's statement failed (`agenttrail migrate`): which one, and what applied before it."""


class ClusterLayout(ConfigError):
    """`agenttrail migrate` pointed at a database laid out for a ClickHouse cluster (`schema
    --cluster`: Distributed and Replicated tables), whose migrations that DDL applies, not migrate."""


def cluster_tables(store: Store) -> list[tuple[str, str]]:
    """(table, engine) of the store's database that belong to the cluster layout."""
    rows = store.query(
        "SELECT name, engine FROM system.tables WHERE database = {db:String} "
        "AND (engine = 'Distributed' OR startsWith(engine, 'Replicated')) ORDER BY name",
        {"db": store.location.database},
    )
    return [(str(name), str(engine)) for name, engine in rows]


@dataclass(frozen=True, slots=True)
class MigrateOutcome:
    """What `agenttrail migrate` found and did on one store."""

    pending: list[Migration]  # before it ran
    applied: list[Migration]  # empty on a dry run
    newer: list[int]  # recorded versions this agenttrail does not know: a newer one migrated it


def migrate_store(store: Store, migrations: Sequence[Migration], *, dry_run: bool) -> MigrateOutcome:
    """List the migrations `store` lacks and, unless `dry_run`, apply them as serve does at start;
    ClusterLayout, changing nothing, where the database has the cluster layout's tables.
    A failed statement raises MigrationFailed naming its migration and those applied before it
    (they stay applied and recorded: every statement is idempotent, so running it again resumes)."""
    clustered = cluster_tables(store)
    if clustered:
        shown = ", ".join(f"{name} ({engine})" for name, engine in clustered[:3])
        more = f" and {len(clustered) - 3} more" if len(clustered) > 3 else ""
        raise ClusterLayout(
            f"database {store.location.database} is laid out for a ClickHouse cluster ({shown}{more}): "
            "migrate would run one server's DDL on this member alone. Print the new version's "
            "cluster DDL with `agenttrail schema --cluster CLUSTER` and run it with `clickhouse "
            "client --multiquery` (deploy/README.md, ClickHouse: server and cluster)"
        )
    ordered = combine(migrations)
    recorded = recorded_versions(store)
    pending = [migration for migration in ordered if migration.version not in recorded]
    newer = newer_than_known(ordered, recorded)
    if dry_run or not pending:
        return MigrateOutcome(pending, [], newer)
    try:
        migrate(store, migrations)
    except StoreError as exc:
        recorded = recorded_versions(store)
        done = [migration for migration in pending if migration.version in recorded]
        failed = next(migration for migration in pending if migration.version not in recorded)
        raise MigrationFailed(
            f"schema migration {failed.version} ({failed.name}) failed: {exc}; "
            + (
                f"applied before it: {', '.join(str(m.version) for m in done)}"
                if done
                else "none was applied"
            )
        ) from exc
    return MigrateOutcome(pending, pending, newer)


def schema_statements(
    migrations: Sequence[Migration],
    database: str,
    retention: Retention,
    *,
    cluster: str | None = None,
    replicas_only: bool = False,
) -> list[str]:
    """The schema's DDL: the migrations as the sidecar runs them (each statement once), or, for
    a `cluster`, ReplicatedMergeTree tables ON CLUSTER with Distributed tables over them (none
    with `replicas_only`) and the retention TTLs."""
    from agenttrail.collector.cluster_ddl import cluster_ddl

    if replicas_only and not cluster:
        raise CommandUsageError("--replicas-only needs --cluster NAME")
    if cluster:
        try:
            return cluster_ddl(migrations, cluster, database, retention, distributed=not replicas_only)
        except ValueError as exc:
            raise SchemaError(str(exc)) from exc
    statements = [MIGRATIONS_TABLE]
    for migration in sorted(migrations, key=lambda m: m.version):
        statements += [s for s in migration.statements if s not in statements]
    return statements


def settings_rows(settings: Settings) -> list[dict[str, Any]]:
    """Every setting of every section: its value (secrets masked), type and source."""
    return [
        {
            "section": item.section,
            "key": item.name,
            "value": item.shown(),
            "type": item.setting.kind.type_name if item.setting else type(item.value).__name__,
            "source": item.source,
        }
        for item in settings.resolved
    ]
