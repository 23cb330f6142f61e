"""Versioned schema migrations, run at start-up; running them twice changes nothing.

The store records each applied migration (version, name, checksum) in `schema_migrations`, so a
start on an up-to-date store runs one query and no DDL. The collector's migrations (versions
1-99) are `MIGRATIONS`; the evaluators append theirs (100 and up) through their composition
root, which joins every list with `combine` into the one ordered list the sidecar applies.

`otel_traces` keeps the OpenTelemetry Collector ClickHouse exporter's layout so Grafana's
ClickHouse data source reads it as it is. Our own tables use ReplacingMergeTree so that
re-assembly writes a new version instead of a duplicate.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agenttrail.collector.errors import StoreError
from agenttrail.collector.rows import MigrationRow

if TYPE_CHECKING:
    from agenttrail.collector.store import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: every statement idempotent (IF NOT EXISTS, or a fill whose repeat only
    writes rows the table's versions replace), since two processes may apply it at once."""

    version: int
    name: str
    statements: tuple[str, ...]

    @property
    def checksum(self) -> str:
        """The statements' digest (whitespace aside), recorded when applied: a released migration
        edited afterwards is noticed at the next start instead of silently diverging."""
        text = ";".join(" ".join(statement.split()) for statement in self.statements)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def combine(*lists: Iterable[Migration]) -> tuple[Migration, ...]:
    """The owners' lists as one list in version order. A version two different migrations claim
    is a ValueError naming both (the same migration listed twice counts once)."""
    by_version: dict[int, Migration] = {}
    for migration in (m for migrations in lists for m in migrations):
        other = by_version.setdefault(migration.version, migration)
        if other != migration:
            raise ValueError(
                f"schema migration version {migration.version} is claimed by {other.name!r} and "
                f"{migration.name!r}: give the newer one the next free version"
            )
    return tuple(by_version[version] for version in sorted(by_version))


OTEL_TRACES = """
CREATE TABLE IF NOT EXISTS otel_traces (
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ParentSpanId String CODEC(ZSTD(1)),
    TraceState String CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion String CODEC(ZSTD(1)),
    SpanAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    Duration UInt64 CODEC(ZSTD(1)),
    StatusCode LowCardinality(String) CODEC(ZSTD(1)),
    StatusMessage String CODEC(ZSTD(1)),
    Events Nested (
        Timestamp DateTime64(9),
        Name LowCardinality(String),
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    Links Nested (
        TraceId String,
        SpanId String,
        TraceState String,
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_key mapKeys(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_value mapValues(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_duration Duration TYPE minmax GRANULARITY 1
) ENGINE = MergeTree
PARTITION BY toDate(Timestamp)
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp))
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, non_replicated_deduplication_window = 10000
"""

# The exporter's trace-id lookup table: finds a trace's time range without a full scan.
OTEL_TRACES_TRACE_ID_TS = """
CREATE TABLE IF NOT EXISTS otel_traces_trace_id_ts (
    TraceId String CODEC(ZSTD(1)),
    Start DateTime CODEC(Delta, ZSTD(1)),
    End DateTime CODEC(Delta, ZSTD(1)),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.01) GRANULARITY 1
) ENGINE = MergeTree
PARTITION BY toDate(Start)
ORDER BY (TraceId, Start)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1
"""

OTEL_TRACES_TRACE_ID_TS_MV = """
CREATE MATERIALIZED VIEW IF NOT EXISTS otel_traces_trace_id_ts_mv TO otel_traces_trace_id_ts
AS SELECT TraceId, min(Timestamp) AS Start, max(Timestamp) AS End
FROM otel_traces WHERE TraceId != '' GROUP BY TraceId
"""

# Migration 7's view: the same rows plus the spans' start times to the millisecond (down for the
# first, up past the last: a DateTime64(3) conversion truncates).
TRACE_ID_TS_MV_TO_THE_MILLISECOND = """
ALTER TABLE otel_traces_trace_id_ts_mv MODIFY QUERY
SELECT TraceId, min(Timestamp) AS Start, max(Timestamp) AS End, toDateTime64(Start, 3) AS SpansFrom,
       toDateTime64(End, 3) + toIntervalMillisecond(1) AS SpansUntil
FROM otel_traces WHERE TraceId != '' GROUP BY TraceId
"""

# One row per (trace, stored batch): what assembly needs to resume after a restart.
TRACE_ARRIVALS = """
CREATE TABLE IF NOT EXISTS trace_arrivals (
    TraceId String,
    ArrivedAt DateTime64(6),
    HasAgent UInt8
) ENGINE = MergeTree
ORDER BY (ArrivedAt, TraceId)
TTL toDateTime(ArrivedAt) + INTERVAL 7 DAY
SETTINGS non_replicated_deduplication_window = 10000
"""

ASSEMBLY_STATE = """
CREATE TABLE IF NOT EXISTS assembly_state (
    TraceId String,
    AssembledThrough DateTime64(6),
    RunKeys Array(String),
    Revision UInt32,
    Version UInt64
) ENGINE = ReplacingMergeTree(Version)
ORDER BY TraceId
"""

TRAJECTORIES = """
CREATE TABLE IF NOT EXISTS trajectories (
    TraceId String,
    RootSpanId String,
    Agent LowCardinality(String),
    AgentId String,
    AgentVersion String,
    Task String,
    ConversationId String,
    ServiceName LowCardinality(String),
    Start DateTime64(6),
    LatencyS Float64,
    Failure UInt8,
    ErrorType String,
    Input String,
    Output String,
    InputTokens UInt64,
    OutputTokens UInt64,
    ToolCount UInt32,
    ToolNames Array(LowCardinality(String)),
    ToolStatuses Array(LowCardinality(String)),
    ToolCalls String,
    SpanCount UInt32,
    Revision UInt32,
    AssembledAt DateTime64(6),
    Version UInt64,
    IsDeleted UInt8,
    INDEX idx_start Start TYPE minmax GRANULARITY 1,
    INDEX idx_agent Agent TYPE set(1000) GRANULARITY 1,
    INDEX idx_assembled AssembledAt TYPE minmax GRANULARITY 1
) ENGINE = ReplacingMergeTree(Version, IsDeleted)
ORDER BY (TraceId, RootSpanId)
"""

# Migration 8: what a chunk of assembly looks up, at a cost that does not grow with the store.
# Its traces' span ranges by arrival: a row per (stored block, trace), sorted by when ClickHouse
# stored it, so a chunk reads only the rows stored since its traces' first arrival this round
# (Assembler: the writer stores batches one after another, so that is every row of the round).
# The trace-id lookup, sorted by TraceId in 8,192-row granules, made each of a chunk's random
# ids read a granule of its own: min(table, 2,000 x 8,192) rows, ~250 ms of CPU a chunk after
# 2,000,000 traces (docs/performance.md). Kept a week, like trace_arrivals.
ASSEMBLY_RANGES = """
CREATE TABLE IF NOT EXISTS assembly_ranges (
    StoredAt DateTime64(3),
    TraceId String,
    SpansFrom DateTime64(3),
    SpansUntil DateTime64(3)
) ENGINE = MergeTree
ORDER BY (StoredAt, TraceId)
TTL toDateTime(StoredAt) + INTERVAL 7 DAY
"""

# Migration 7's millisecond bounds, stamped with the time ClickHouse stores the block.
ASSEMBLY_RANGES_MV = """
CREATE MATERIALIZED VIEW IF NOT EXISTS assembly_ranges_mv TO assembly_ranges
AS SELECT now64(3) AS StoredAt, TraceId, toDateTime64(min(Timestamp), 3) AS SpansFrom,
       toDateTime64(max(Timestamp), 3) + toIntervalMillisecond(1) AS SpansUntil
FROM otel_traces WHERE TraceId != '' GROUP BY TraceId
"""

# Each trace's assembly state (assembly_state's columns) plus the span range assembled, so a
# late span's round reads the range of the spans before it from here, not by trace id from the
# lookup. Sorted by a 64-bit hash of the id in 256-row granules: a look-up of 2,000 ids costs
# ClickHouse a third of what the 32-byte ids in 8,192-row granules cost (35-55 against 120-170
# ms at 2,000,000 traces), reading a sixteenth of the rows. Rows copied from assembly_state
# have no range (SpansFrom 0): their next round looks it up by id (otel_traces_trace_id_ts).
ASSEMBLED_TRACES = """
CREATE TABLE IF NOT EXISTS assembled_traces (
    TraceId String,
    TraceHash UInt64 MATERIALIZED cityHash64(TraceId),
    AssembledThrough DateTime64(6),
    RunKeys Array(String),
    Revision UInt32,
    Version UInt64,
    SpansFrom DateTime64(3),
    SpansUntil DateTime64(3)
) ENGINE = ReplacingMergeTree(Version)
ORDER BY (TraceHash, TraceId)
SETTINGS index_granularity = 256
"""

ASSEMBLED_TRACES_SMALL_BLOCKS = (
    "ALTER TABLE assembled_traces MODIFY SETTING "
    "min_compress_block_size = 1024, max_compress_block_size = 4096"
)

ASSEMBLED_TRACES_FILL = """
INSERT INTO assembled_traces (TraceId, AssembledThrough, RunKeys, Revision, Version)
SELECT TraceId, AssembledThrough, RunKeys, Revision, Version FROM assembly_state
"""

OTEL_TRACES_DROP_ATTRIBUTE_INDEXES = (
    "ALTER TABLE otel_traces DROP INDEX IF EXISTS idx_res_attr_key, "
    "DROP INDEX IF EXISTS idx_res_attr_value, DROP INDEX IF EXISTS idx_span_attr_key, "
    "DROP INDEX IF EXISTS idx_span_attr_value"
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "spans, arrivals, trajectories",
        (
            OTEL_TRACES,
            OTEL_TRACES_TRACE_ID_TS,
            OTEL_TRACES_TRACE_ID_TS_MV,
            TRACE_ARRIVALS,
            ASSEMBLY_STATE,
            TRAJECTORIES,
        ),
    ),
    # The model a run used, for metrics per model (filled by assembly from its chat spans).
    Migration(
        2,
        "trajectories.Model",
        ("ALTER TABLE trajectories ADD COLUMN IF NOT EXISTS Model LowCardinality(String) AFTER ServiceName",),
    ),
    # The tools the trace says the agent could call (judges' `available_tools`, spec/judges.md),
    # and whether the run's root span never arrived (an agent span that never ended).
    Migration(
        3,
        "trajectories.AvailableTools, trajectories.Incomplete",
        (
            "ALTER TABLE trajectories ADD COLUMN IF NOT EXISTS AvailableTools String DEFAULT '[]'",
            "ALTER TABLE trajectories ADD COLUMN IF NOT EXISTS Incomplete UInt8 DEFAULT 0",
        ),
    ),
    # The console's newest-first pages over millions of runs: `trajectories` is sorted by trace
    # id, so "the newest 50" read every row's Start. A copy of each part sorted by the runs
    # pages' own key (Start, TraceId, RootSpanId: sorted by Start alone, the tie-break made
    # ClickHouse read 4x more) lets ORDER BY ... LIMIT read a few granules. Merges
    # rebuild it and a lightweight DELETE drops it from the parts it touches (their reads fall back
    # to the table; "rebuild" there kept deleted rows visible through the projection in chDB 26.9;
    # ClickHouse refuses both on a ReplacingMergeTree with a
    # projection otherwise). Costs about the table's size again. Dropped by migration 6.
    Migration(
        4,
        "trajectories projection by start time",
        (
            "ALTER TABLE trajectories MODIFY SETTING deduplicate_merge_projection_mode = 'rebuild', "
            "lightweight_mutation_projection_mode = 'drop'",
            "ALTER TABLE trajectories ADD PROJECTION IF NOT EXISTS by_start "
            "(SELECT * ORDER BY (Start, TraceId, RootSpanId))",
            "ALTER TABLE trajectories MATERIALIZE PROJECTION by_start",
        ),
    ),
    # Span parts are small (a part every `insert_block_spans`), so ClickHouse's default merged
    # them row by row (vertical merges start at 131,072 rows), holding a block of every column,
    # the attribute maps included, at once: a background merge was the largest unbounded
    # allocation under overload. Merged column by column it holds one column's block
    # (benchmarks/bench_merge_memory.py).
    Migration(
        5,
        "otel_traces merges column by column",
        (
            "ALTER TABLE otel_traces MODIFY SETTING vertical_merge_algorithm_min_rows_to_activate = 1, "
            "vertical_merge_algorithm_min_bytes_to_activate = 0, "
            "vertical_merge_algorithm_min_columns_to_activate = 1",
        ),
    ),
    # Migration 4's copy, gone: every merge of `trajectories` rebuilt it, a sort of every column
    # (the calls' JSON too), the largest allocation under overload (251-343 MiB of one merge,
    # benchmarks/memory_probe.py). The console's newest-first pages read the time-sorted
    # run-level rollup `runs_by_start` instead (evaluators' migration 116, which only the
    # evaluators make; the collector's own reads use FINAL, which never read the projection).
    # The two settings only allowed a projection on a ReplacingMergeTree; back to ClickHouse's.
    Migration(
        6,
        "trajectories without the by_start projection",
        (
            "ALTER TABLE trajectories DROP PROJECTION IF EXISTS by_start",
            "ALTER TABLE trajectories RESET SETTING deduplicate_merge_projection_mode, "
            "lightweight_mutation_projection_mode",
            "ALTER TABLE trajectories MODIFY SETTING vertical_merge_algorithm_min_rows_to_activate = 1, "
            "vertical_merge_algorithm_min_bytes_to_activate = 0, "
            "vertical_merge_algorithm_min_columns_to_activate = 1",
        ),
    ),
    # The trace-id lookup to the millisecond, for assembly: its Start/End (the exporter's
    # layout, whole seconds, kept for Grafana) made each chunk read every span of up to a
    # second more than its own. Rows stored before keep those seconds through the defaults
    # (SpansUntil = End + 1 s), so both hold: every span of the trace starts in
    # [SpansFrom, SpansUntil). Defaults are computed on read: old parts are not rewritten.
    Migration(
        7,
        "otel_traces_trace_id_ts to the millisecond",
        (
            "ALTER TABLE otel_traces_trace_id_ts ADD COLUMN IF NOT EXISTS "
            "SpansFrom DateTime64(3) DEFAULT Start",
            "ALTER TABLE otel_traces_trace_id_ts ADD COLUMN IF NOT EXISTS "
            "SpansUntil DateTime64(3) DEFAULT End + 1",
            TRACE_ID_TS_MV_TO_THE_MILLISECOND,
        ),
    ),
    # A chunk's look-ups bounded by the arrival window and a hashed key (above): the assembler
    # reads assembly_ranges and writes assembled_traces; assembly_state is no longer written
    # (its rows are copied; the fill's repeat writes rows of the same versions).
    Migration(
        8,
        "assembly look-ups by arrival: assembly_ranges, assembled_traces",
        (ASSEMBLY_RANGES, ASSEMBLY_RANGES_MV, ASSEMBLED_TRACES, ASSEMBLED_TRACES_FILL),
    ),
    # A chunk's state look-up reads, for each of its ids, the granule its hash falls in, in every
    # part: a new trace's (nearly all of them) matches no row there. ClickHouse reads a whole
    # compressed block (64 KiB by default, ~8,000 hashes) for a 256-row granule, so the look-up's
    # CPU grew with the table until every block is read (2,000 ids: 15 ms at 1M states, 48 at 4M,
    # 95 at 12M). A block per granule: 16, 32, 44 ms. Parts written before keep their blocks
    # until merged.
    Migration(
        9,
        "assembled_traces in a compressed block per granule",
        (ASSEMBLED_TRACES_SMALL_BLOCKS,),
    ),
    # The spans' four attribute Bloom filters, gone: each insert computed them over its whole
    # block (mapKeys / mapValues of every span's attributes, then their hashes), a third of the
    # spool insert's memory (a 50,176-span segment: 72-76 MiB of the query log's peak without
    # them, 118-233 with; docs/performance.md "rss22"), the largest allocation left under
    # overload. None of our reads used them: they filter by trace id (idx_trace_id, kept) and
    # time, and in 1 MiB granules (store.ENGINE_MERGE_TREE) of agent spans every granule holds
    # the common keys. An ad-hoc search by attribute value (Grafana's tag filter) reads its time
    # range instead; a deployment that wants one back adds it (docs/performance.md).
    Migration(
        10,
        "otel_traces without the attribute bloom filters",
        (OTEL_TRACES_DROP_ATTRIBUTE_INDEXES,),
    ),
)

MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    Version UInt32,
    Name String,
    AppliedAt DateTime64(3) DEFAULT now64(3),
    Checksum String DEFAULT ''
) ENGINE = ReplacingMergeTree ORDER BY Version
"""
# Stores made before checksums were recorded (their rows keep '', which is never checked).
MIGRATIONS_TABLE_CHECKSUM = (
    "ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS Checksum String DEFAULT ''"
)


_RECORDED = "SELECT Version, argMax(Checksum, AppliedAt) FROM schema_migrations GROUP BY Version"
_NAMES = (
    "SELECT Version, any(Name) FROM schema_migrations "
    "WHERE Version IN {versions:Array(UInt32)} GROUP BY Version"
)


def recorded_migrations(store: Store) -> dict[int, str]:
    """Version -> checksum of every migration the store records as applied ('' when recorded
    without one). On an up-to-date store this is one query and no DDL; only when it fails is
    the record table created (a new store) or given its Checksum column (an older one)."""
    try:
        rows = store.query(_RECORDED)
    except StoreError:
        columns = {
            row[0]
            for row in store.query(
                "SELECT name FROM system.columns "
                "WHERE database = currentDatabase() AND table = 'schema_migrations'"
            )
        }
        if not columns:
            store.command(MIGRATIONS_TABLE)
            return {}
        if "Checksum" not in columns:
            store.command(MIGRATIONS_TABLE_CHECKSUM)
        # With the column there, another process created the table since the first query, or
        # the failure was something else and this query fails again.
        rows = store.query(_RECORDED)
    return {int(version): str(checksum) for version, checksum in rows}


def newer_than_known(ordered: Sequence[Migration], recorded: Iterable[int]) -> list[int]:
    """Recorded versions past the newest this code knows in their own hundred (the collector's
    1-99, the evaluators' 100-199): a newer agenttrail migrated the store. A hundred this code
    knows nothing of belongs to a part it does not run (the collector alone, on a store the
    evaluators migrated too), so it is left alone."""
    newest: dict[int, int] = {}
    for migration in ordered:
        hundred = migration.version // 100
        newest[hundred] = max(newest.get(hundred, 0), migration.version)
    return sorted(v for v in recorded if v // 100 in newest and v > newest[v // 100])


def recorded_versions(store: Store) -> set[int]:
    """The versions the store records as applied, read without writing anything (unlike
    `recorded_migrations`, which creates the record table: a dry run must change nothing)."""
    has_records = store.query(
        "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = 'schema_migrations'"
    )[0][0]
    if not has_records:
        return set()
    return {int(version) for (version,) in store.query("SELECT DISTINCT Version FROM schema_migrations")}


def migrate(store: Store, migrations: Iterable[Migration] = MIGRATIONS) -> list[int]:
    """Apply, in version order, the migrations the store does not record yet; returns their versions.

    Every statement is idempotent, so two processes migrating one server at once (each may run a
    statement the other already ran), or a crash before the record is written, leave the same
    schema. The records are written in one insert after the last migration (or the one that failed).
    A failed statement is tried again after a pause, with the records read again (RACE_PAUSES_S).
    """
    ordered = combine(migrations)
    recorded = recorded_migrations(store)
    if newer := newer_than_known(ordered, recorded):
        names = dict(store.query(_NAMES, {"versions": newer}))
        log.warning(
            "this store records schema migration(s) %s that this agenttrail does not know: a newer "
            "agenttrail migrated it. Run that version or a later one; this one may misread what "
            "the newer migrations changed",
            ", ".join(f"{version} ({names.get(version, '?')})" for version in newer),
        )
    for migration in ordered:
        checksum = recorded.get(migration.version)
        if checksum and checksum != migration.checksum:
            log.warning(
                "schema migration %d (%s) differs from the one this store recorded: a released "
                "migration was edited; add a new migration instead",
                migration.version,
                migration.name,
            )
    applied: list[int] = []
    for pause in RACE_PAUSES_S:
        failed = _apply(store, ordered, recorded, applied)
        if failed is None:
            return applied
        # Another process migrating the same store may be a step ahead (a later migration undid
        # what this statement relies on): once it has recorded its migrations, they are skipped
        # here. A failure of this code's own goes on failing, and is raised after the pauses.
        log.info("a schema statement failed (%s); trying again in %.1f s", failed, pause)
        time.sleep(pause)
        recorded = recorded_migrations(store)
    if failed := _apply(store, ordered, recorded, applied):
        raise failed
    return applied


# Pauses before re-reading the records and trying again after a migration statement failed.
RACE_PAUSES_S = (0.2, 0.5, 1.0, 2.0)


def _apply(
    store: Store, ordered: Sequence[Migration], recorded: dict[int, str], applied: list[int]
) -> StoreError | None:
    """Apply the migrations not recorded, adding each one's version to `applied`, then record the
    ones applied (also when one failed). Returns the error of the statement that failed, if one did."""
    done: list[Migration] = []
    try:
        for migration in ordered:
            if migration.version in recorded:
                continue
            log.info("applying schema migration %d: %s", migration.version, migration.name)
            for statement in migration.statements:
                try:
                    store.command(statement)
                except StoreError as exc:
                    return exc
            done.append(migration)
            applied.append(migration.version)
    finally:
        if done:
            at = f"{time.time():.3f}"
            store.insert("schema_migrations", [MigrationRow(m.version, m.name, at, m.checksum) for m in done])
    return None


@dataclass(frozen=True, slots=True)
class Retention:
    """Days to keep raw spans, trajectories and scores; 0 keeps them for ever."""

    spans_days: int = 0
    trajectories_days: int = 0
    scores_days: int = 0

    def by_table(self) -> list[tuple[str, str, int]]:
        """(table, time column, days) for every table retention applies to."""
        return [(table, column, getattr(self, f"{kind}_days")) for table, column, kind in RETENTION_TABLES]


# Which tables each retention setting covers, and the time column that ages a row. Scores are
# aged by their run's start, like the run itself. Tables of later migrations are skipped
# where they do not exist (the collector alone has no scores).
RETENTION_TABLES: tuple[tuple[str, str, str], ...] = (
    ("otel_traces", "Timestamp", "spans"),
    ("otel_traces_trace_id_ts", "Start", "spans"),
    ("trajectories", "Start", "trajectories"),
    ("scores", "RunStart", "scores"),
    ("evaluation_decisions", "DecidedAt", "scores"),
    # The monitoring rollups age with the rows they copy (evaluators/monitoring/rollups.py).
    ("runs_by_start", "Start", "trajectories"),
    ("scores_by_start", "RunStart", "scores"),
    ("runs_by_start_sample", "Start", "trajectories"),
    ("scores_by_start_sample", "RunStart", "scores"),
    ("runs_revised", "Start", "trajectories"),  # runs stored again, for drift (migration 122)
    # Their score starts (migration 125): rows of `scores_by_start`, aged with them.
    ("score_starts_of_revised_runs", "RunStart", "scores"),
    # Each evaluator version's score starts per day (migration 126), aged a day after the day's
    # last rows (its `AgedFrom`), so they go from `scores_by_start` first.
    ("score_version_days", "AgedFrom", "scores"),
    # Their latest row per run and start, keyed without the version (migration 127).
    ("scores_latest_by_start", "RunStart", "scores"),
    # ... and so do their per-hour rollups (evaluators/monitoring/hourly.py).
    ("runs_by_hour", "Hour", "trajectories"),
    ("scores_by_hour", "Hour", "scores"),
    ("slowest_by_hour", "Hour", "trajectories"),
    ("lowest_by_hour", "Hour", "scores"),
    ("rollup_hours", "Hour", "trajectories"),
)

# A table-level TTL as ClickHouse prints it in the table's CREATE statement.
_TABLE_TTL = re.compile(r"\bTTL (.+?)(?: SETTINGS |$)")


def ttl_expression(column: str, days: int) -> str:
    return f"toDateTime({column}) + toIntervalDay({days})"


def apply_retention(store: Store, retention: Retention) -> list[str]:
    """Set (or remove) each table's TTL to match `retention`; returns the statements run.

    Runs at every start, after the migrations, and changes nothing when the TTLs already match,
    so a config change takes effect at the next restart. A Distributed table (the cluster
    layout) is left alone: `agenttrail schema --cluster` sets the TTLs on its local tables.
    """
    done: list[str] = []
    for table, column, days in retention.by_table():
        rows = store.query(
            "SELECT engine, create_table_query FROM system.tables "
            "WHERE database = currentDatabase() AND name = {table:String}",
            {"table": table},
        )
        if not rows or rows[0][0] == "Distributed":
            continue
        current = _TABLE_TTL.search(str(rows[0][1]))
        wanted = ttl_expression(column, days) if days else None
        if (current.group(1).strip() if current else None) == wanted:
            continue
        if wanted is not None:
            statement = f"ALTER TABLE {table} MODIFY TTL {wanted}"
        elif current is not None:
            statement = f"ALTER TABLE {table} REMOVE TTL"
        else:
            continue
        log.info("retention: %s", statement)
        store.command(statement)
        done.append(statement)
    return done
