"""Run-level rollups: the latest version of every run and score, sorted by time, kept by ClickHouse.

`trajectories` and `scores` are sorted by trace id (re-assembly and point reads), so a query
over a day of runs read every row of the table with FINAL: about 10 s on 1M runs under load.
`runs_by_start` and `scores_by_start` hold the columns monitoring reads, sorted by agent (or
metric) and start time, filled by materialized views as rows arrive; stats, drift, the report
and the console's agent overview read a time range of them with FINAL, which reads only that
range. They are partitioned by day of that time, which is part of their sorting key, so every
version of a row is in one partition: a day whose partition has merged into one part is read
without de-duplication work, and only the days still receiving rows pay for FINAL.

The base tables are versioned (ReplacingMergeTree), and so are the copies, with the same
version column: a re-assembled run that keeps its agent and start time replaces its older row
in the copy as in the base table, with no extra work. A version under another key (a
deletion row, whose start is the time of deletion; a start time that moved, as when an
incomplete run's root span arrives) would leave the old row counted. For those, the `_moved`
views look up the run's earlier rows in the base table, and in the inserted block itself (which
a view does not see in the table: migration 121), and write a deletion marker under each
earlier key (for a score, of every evaluator version since migration 124: a moved run's rows
of another version stayed live under the old start). The lookup runs only for rows that can
have an earlier row: deletions and revisions after the first (Revision != 1), a few percent of
the rows, so first assemblies and first scores cost one plain copy each. The views read the
base tables through the plain views `trajectories_stored` and `scores_stored`: inside a
materialized view the table's own name means the inserted block only.

What the copies do not see, the writers repeat: the sweep that deletes the scores of deleted
runs (deleted_runs.py) deletes them from `scores_by_start` too, and retention ages both copies
as it ages their base tables. A first assembly stored twice (a crash between storing the runs
and their assembly state) would be two Revision 1 rows, the second looked up by no view: the
assembler's recovery reads the runs such a trace has stored, so the second is Revision 2.

Answers equal those of the queries over the base tables (tests/evaluators/monitoring/
test_rollups.py holds this on re-assembled, moved, deleted and re-scored runs).

Drift reads a hash sample of each window's runs (`cityHash64(TraceId, RootSpanId)` under a
limit), which a time-sorted table spreads over every granule of the window: reading 10 % of a
window's runs cost nearly what reading all of them did. `runs_by_start_sample` and
`scores_by_start_sample` (migration 119) hold the rows of the two copies whose run hash is at
most `SAMPLE_LIMIT` (a quarter of the hash space), written by views on the copies themselves
(so deletion markers and moved runs reach them too); a window whose limit is at or below it
reads its sample there, a quarter of the rows, and larger limits read the copies as before.
Every version of a run shares its hash, so each sample table holds, key by key, exactly the
copy's rows of the runs it keeps.

A version's drift asks, for every score of its windows, whether the score's run is of that
agent version now. Migration 122 carries the run's `AgentVersion` on the scores' rollup rows:
the evaluator and the judges write the scored revision's version with their scores
(`scores.AgentVersion`, NULL from writers that do not know it), and the scores' view copies it; the
migration fills the rows stored before from their runs' latest rows. A score's version is
the version of the revision it scored, and stays right as long as the
run is not stored again: `runs_revised` (a view on `trajectories`, no look-up: every row with
Revision != 1 or a deletion) holds every later row of each run that was re-assembled or
deleted, whose version may have changed since; its latest row there is the run's latest. Drift
trusts a score's version only for a run not named there, reads the version of those from
there, and looks a NULL one up in `trajectories` by trace id (drift.py).
"""

from __future__ import annotations

from agenttrail.collector.schema import Migration
from agenttrail.evaluators.monitoring.hourly import HOURLY_MIGRATIONS

RUNS_BY_START = """
CREATE TABLE IF NOT EXISTS runs_by_start (
    Agent LowCardinality(String),
    Start DateTime64(6),
    TraceId String,
    RootSpanId String,
    AgentVersion String,
    Task String,
    Model LowCardinality(String),
    LatencyS Float64,
    Failure UInt8,
    ErrorType String,
    InputTokens UInt64,
    OutputTokens UInt64,
    ToolCount UInt32,
    ToolNames Array(LowCardinality(String)),
    ToolStatuses Array(LowCardinality(String)),
    Version UInt64,
    IsDeleted UInt8
) ENGINE = ReplacingMergeTree(Version, IsDeleted)
PARTITION BY toYYYYMMDD(Start)
ORDER BY (Agent, Start, TraceId, RootSpanId)
"""

# Stats, drift and the report read evaluation metrics only; latency and failure come from the runs.
SCORES_BY_START = """
CREATE TABLE IF NOT EXISTS scores_by_start (
    Metric LowCardinality(String),
    RunStart DateTime64(6),
    TraceId String,
    RootSpanId String,
    EvaluatorVersion LowCardinality(String),
    Score Nullable(Float64),
    Label String,
    Agent LowCardinality(String),
    Task String,
    CreatedAt DateTime64(6),
    IsDeleted UInt8
) ENGINE = ReplacingMergeTree(CreatedAt, IsDeleted)
PARTITION BY toYYYYMMDD(RunStart)
ORDER BY (Metric, RunStart, TraceId, RootSpanId, EvaluatorVersion)
"""

TRAJECTORIES_STORED = "CREATE VIEW IF NOT EXISTS trajectories_stored AS SELECT * FROM trajectories"
SCORES_STORED = "CREATE VIEW IF NOT EXISTS scores_stored AS SELECT * FROM scores"

_RUN_COLUMNS = (
    "Agent, Start, TraceId, RootSpanId, AgentVersion, Task, Model, LatencyS, Failure, ErrorType, "
    "InputTokens, OutputTokens, ToolCount, ToolNames, ToolStatuses, Version, IsDeleted"
)
_SCORE_COLUMNS = (
    "Metric, RunStart, TraceId, RootSpanId, EvaluatorVersion, Score, Label, Agent, Task, CreatedAt, "
    "toUInt8(0) AS IsDeleted"
)
_EVALUATION_METRICS = "Metric NOT IN ('latency', 'failure')"

RUNS_BY_START_MV = f"""
CREATE MATERIALIZED VIEW IF NOT EXISTS runs_by_start_mv TO runs_by_start
AS SELECT {_RUN_COLUMNS} FROM trajectories WHERE IsDeleted = 0
"""

# A deletion marker under every earlier key of a deleted or moved run, with the new version.
RUNS_BY_START_MOVED_MV = """
CREATE MATERIALIZED VIEW IF NOT EXISTS runs_by_start_moved_mv TO runs_by_start
AS SELECT o.Agent AS Agent, o.Start AS Start, n.TraceId AS TraceId, n.RootSpanId AS RootSpanId,
    n.Version AS Version, toUInt8(1) AS IsDeleted
FROM trajectories AS n
INNER JOIN (
    SELECT TraceId, RootSpanId, Agent, Start, Version FROM trajectories_stored
    WHERE TraceId IN (SELECT TraceId FROM trajectories WHERE Revision != 1 OR IsDeleted = 1)
) AS o ON o.TraceId = n.TraceId AND o.RootSpanId = n.RootSpanId
WHERE (n.Revision != 1 OR n.IsDeleted = 1) AND o.Version < n.Version
  AND (n.IsDeleted = 1 OR o.Start != n.Start OR o.Agent != n.Agent)
"""

SCORES_BY_START_MV = f"""
CREATE MATERIALIZED VIEW IF NOT EXISTS scores_by_start_mv TO scores_by_start
AS SELECT {_SCORE_COLUMNS} FROM scores WHERE {_EVALUATION_METRICS}
"""

# A re-scored revision whose run start moved: a deletion marker under the score's earlier key.
SCORES_BY_START_MOVED_MV = f"""
CREATE MATERIALIZED VIEW IF NOT EXISTS scores_by_start_moved_mv TO scores_by_start
AS SELECT n.Metric AS Metric, o.RunStart AS RunStart, n.TraceId AS TraceId, n.RootSpanId AS RootSpanId,
    n.EvaluatorVersion AS EvaluatorVersion, n.CreatedAt AS CreatedAt, toUInt8(1) AS IsDeleted
FROM scores AS n
INNER JOIN (
    SELECT TraceId, RootSpanId, Metric, EvaluatorVersion, RunStart, CreatedAt FROM scores_stored
    WHERE TraceId IN (SELECT TraceId FROM scores WHERE Revision != 1 AND {_EVALUATION_METRICS})
) AS o ON o.TraceId = n.TraceId AND o.RootSpanId = n.RootSpanId AND o.Metric = n.Metric
    AND o.EvaluatorVersion = n.EvaluatorVersion
WHERE n.Revision != 1 AND o.CreatedAt < n.CreatedAt AND o.RunStart != n.RunStart
"""

# Migration 121: the same views, whose earlier rows also come from the inserted block itself.
# A view reads the base table without the block being inserted, so when one block holds two
# versions of a run (a server coalescing inserts: async_insert), the older one's key got no
# marker and stayed live beside the newer. Our writers put one version of a run in an insert;
# the block's own rows cost the views nothing where no row of it has an earlier one.
_EARLIER_RUNS = "(SELECT TraceId FROM trajectories WHERE Revision != 1 OR IsDeleted = 1)"
RUNS_BY_START_MOVED_IN_BLOCK = f"""
ALTER TABLE runs_by_start_moved_mv MODIFY QUERY
SELECT o.Agent AS Agent, o.Start AS Start, n.TraceId AS TraceId, n.RootSpanId AS RootSpanId,
    n.Version AS Version, toUInt8(1) AS IsDeleted
FROM trajectories AS n
INNER JOIN (
    SELECT TraceId, RootSpanId, Agent, Start, Version FROM trajectories_stored
    WHERE TraceId IN {_EARLIER_RUNS}
    UNION ALL
    SELECT TraceId, RootSpanId, Agent, Start, Version FROM trajectories
    WHERE TraceId IN {_EARLIER_RUNS}
) AS o ON o.TraceId = n.TraceId AND o.RootSpanId = n.RootSpanId
WHERE (n.Revision != 1 OR n.IsDeleted = 1) AND o.Version < n.Version
  AND (n.IsDeleted = 1 OR o.Start != n.Start OR o.Agent != n.Agent)
"""
_EARLIER_SCORES = f"(SELECT TraceId FROM scores WHERE Revision != 1 AND {_EVALUATION_METRICS})"
SCORES_BY_START_MOVED_IN_BLOCK = f"""
ALTER TABLE scores_by_start_moved_mv MODIFY QUERY
SELECT n.Metric AS Metric, o.RunStart AS RunStart, n.TraceId AS TraceId, n.RootSpanId AS RootSpanId,
    n.EvaluatorVersion AS EvaluatorVersion, n.CreatedAt AS CreatedAt, toUInt8(1) AS IsDeleted
FROM scores AS n
INNER JOIN (
    SELECT TraceId, RootSpanId, Metric, EvaluatorVersion, RunStart, CreatedAt FROM scores_stored
    WHERE TraceId IN {_EARLIER_SCORES}
    UNION ALL
    SELECT TraceId, RootSpanId, Metric, EvaluatorVersion, RunStart, CreatedAt FROM scores
    WHERE TraceId IN {_EARLIER_SCORES}
) AS o ON o.TraceId = n.TraceId AND o.RootSpanId = n.RootSpanId AND o.Metric = n.Metric
    AND o.EvaluatorVersion = n.EvaluatorVersion
WHERE n.Revision != 1 AND o.CreatedAt < n.CreatedAt AND o.RunStart != n.RunStart
"""

# Migration 124: a re-scored revision whose run start moved deletes the run's rows of the metric
# under every earlier start, whichever evaluator version wrote them. With only its own version's
# deleted, a run moved out of a period, whose newer score (another version's) lies outside it,
# kept the older version's row there: read as one version's (FINAL alone) wherever no other
# version scored the period, so the run counted in the period with its old score, and a run's
# live rows at two starts made the hourly rows pick within each hour what the period picks
# over all the run's rows (stats.score_plan reads those hours raw).
_MOVED_SCORE_MARKERS = """
SELECT n.Metric AS Metric, o.RunStart AS RunStart, n.TraceId AS TraceId, n.RootSpanId AS RootSpanId,
    o.EvaluatorVersion AS EvaluatorVersion, n.CreatedAt AS CreatedAt, toUInt8(1) AS IsDeleted
FROM {new} AS n
INNER JOIN ({earlier}) AS o ON o.TraceId = n.TraceId AND o.RootSpanId = n.RootSpanId AND o.Metric = n.Metric
WHERE n.Revision != 1 AND o.CreatedAt < n.CreatedAt AND o.RunStart != n.RunStart
"""
_EARLIER_SCORE_ROWS = (
    "SELECT TraceId, RootSpanId, Metric, EvaluatorVersion, RunStart, CreatedAt FROM {table} "
    f"WHERE TraceId IN {_EARLIER_SCORES}"
)
SCORES_BY_START_MOVED_ANY_VERSION = (
    "ALTER TABLE scores_by_start_moved_mv MODIFY QUERY"
    + _MOVED_SCORE_MARKERS.format(
        new="scores",
        earlier=" UNION ALL ".join(
            _EARLIER_SCORE_ROWS.format(table=table) for table in ("scores_stored", "scores")
        ),
    )
)
# Existing stores: the markers the view would have written, from each latest row of a re-scored
# revision against the latest rows of the other versions (the view wrote its own version's).
FILL_MOVED_SCORE_MARKERS = (
    "INSERT INTO scores_by_start (Metric, RunStart, TraceId, RootSpanId, EvaluatorVersion, CreatedAt, "
    "IsDeleted)"
    + _MOVED_SCORE_MARKERS.format(
        new=f"(SELECT * FROM scores FINAL WHERE TraceId IN {_EARLIER_SCORES} AND {_EVALUATION_METRICS})",
        earlier=_EARLIER_SCORE_ROWS.format(table="scores FINAL"),
    )
)

# Existing stores: the latest live rows, once (running it again only repeats rows the copies replace).
FILL_RUNS_BY_START = (
    f"INSERT INTO runs_by_start ({_RUN_COLUMNS}) "
    f"SELECT {_RUN_COLUMNS} FROM trajectories FINAL WHERE IsDeleted = 0"
)
FILL_SCORES_BY_START = (
    "INSERT INTO scores_by_start (Metric, RunStart, TraceId, RootSpanId, EvaluatorVersion, Score, "
    f"Label, Agent, Task, CreatedAt, IsDeleted) SELECT {_SCORE_COLUMNS} FROM scores FINAL "
    f"WHERE {_EVALUATION_METRICS}"
)

# The run hashes the sample tables keep: a quarter of the hash space (drift's windows of more
# than 4 x max_samples runs read them; a 6-day baseline of 1M runs over 7 days and 4 agents
# samples 9 % of its runs, a version's half of them 16 %).
SAMPLE_LIMIT = 2**62
_RUN_HASH = "cityHash64(TraceId, RootSpanId)"
_IN_SAMPLE = f"{_RUN_HASH} <= {SAMPLE_LIMIT}"

RUNS_BY_START_SAMPLE = RUNS_BY_START.replace("runs_by_start", "runs_by_start_sample")
SCORES_BY_START_SAMPLE = SCORES_BY_START.replace("scores_by_start", "scores_by_start_sample")
_SCORE_SAMPLE_COLUMNS = (
    "Metric, RunStart, TraceId, RootSpanId, EvaluatorVersion, Score, Label, Agent, Task, CreatedAt, IsDeleted"
)
# Views on the copies (a view's insert into its target fires the target's views): every row a
# copy receives, deletion markers included, with the hash the sample keeps.
RUNS_BY_START_SAMPLE_MV = f"""
CREATE MATERIALIZED VIEW IF NOT EXISTS runs_by_start_sample_mv TO runs_by_start_sample
AS SELECT {_RUN_COLUMNS} FROM runs_by_start WHERE {_IN_SAMPLE}
"""
SCORES_BY_START_SAMPLE_MV = f"""
CREATE MATERIALIZED VIEW IF NOT EXISTS scores_by_start_sample_mv TO scores_by_start_sample
AS SELECT {_SCORE_SAMPLE_COLUMNS} FROM scores_by_start WHERE {_IN_SAMPLE}
"""
# Existing stores: the copies' latest live rows under the limit, once (again, on a restart
# mid-migration: the same rows, which the sample replaces as the copies do).
FILL_RUNS_BY_START_SAMPLE = (
    f"INSERT INTO runs_by_start_sample ({_RUN_COLUMNS}) "
    f"SELECT {_RUN_COLUMNS} FROM runs_by_start FINAL WHERE IsDeleted = 0 AND {_IN_SAMPLE}"
)
FILL_SCORES_BY_START_SAMPLE = (
    f"INSERT INTO scores_by_start_sample ({_SCORE_SAMPLE_COLUMNS}) "
    f"SELECT {_SCORE_SAMPLE_COLUMNS} FROM scores_by_start FINAL WHERE IsDeleted = 0 AND {_IN_SAMPLE}"
)

# Migration 122: the run's agent version on the scores' rollup rows (see the module docstring).
_ADD_AGENT_VERSION = "ADD COLUMN IF NOT EXISTS AgentVersion LowCardinality(Nullable(String))"
SCORES_VERSION = f"ALTER TABLE scores {_ADD_AGENT_VERSION}"  # the evaluator writes it (ScoreRow)
SCORES_BY_START_VERSION = f"ALTER TABLE scores_by_start {_ADD_AGENT_VERSION}"
SCORES_BY_START_SAMPLE_VERSION = f"ALTER TABLE scores_by_start_sample {_ADD_AGENT_VERSION}"

# Runs stored more than once (re-assembled, deleted, revived), with every row after their first:
# a score's AgentVersion may be older than the run's, and the latest row here is the run's
# latest (revisions only grow), so read with FINAL it answers which version the run is now.
# Keyed by the run hash drift's samples are cut by, so a limit reads a range.
RUNS_REVISED = """
CREATE TABLE IF NOT EXISTS runs_revised (
    RunHash UInt64,
    TraceId String,
    RootSpanId String,
    AgentVersion String,
    Start DateTime64(6),
    Version UInt64,
    IsDeleted UInt8
) ENGINE = ReplacingMergeTree(Version)
ORDER BY (RunHash, TraceId, RootSpanId)
"""
_REVISED_COLUMNS = f"{_RUN_HASH} AS RunHash, TraceId, RootSpanId, AgentVersion, Start, Version, IsDeleted"
_REVISED_ROWS = "Revision != 1 OR IsDeleted = 1"
RUNS_REVISED_MV = f"""
CREATE MATERIALIZED VIEW IF NOT EXISTS runs_revised_mv TO runs_revised
AS SELECT {_REVISED_COLUMNS} FROM trajectories WHERE {_REVISED_ROWS}
"""
FILL_RUNS_REVISED = (
    "INSERT INTO runs_revised (RunHash, TraceId, RootSpanId, AgentVersion, Start, Version, IsDeleted) "
    f"SELECT {_REVISED_COLUMNS} FROM trajectories WHERE {_REVISED_ROWS}"
)

# The rollups copy the version as written (a look-up of the run here cost ~14 us a run on each
# insert of scores, ~5 ms an insert even with nothing to look up: measured, not kept).
SCORES_BY_START_MV_WITH_VERSION = f"""
ALTER TABLE scores_by_start_mv MODIFY QUERY
SELECT {_SCORE_COLUMNS}, AgentVersion FROM scores WHERE {_EVALUATION_METRICS}
"""
_SCORE_COLUMNS_FROM_S = ", ".join(
    f"s.{column} AS {column}"
    for column in ("Metric", "RunStart", "TraceId", "RootSpanId", "EvaluatorVersion", "Score", "Label")
)
SCORES_BY_START_SAMPLE_MV_WITH_VERSION = f"""
ALTER TABLE scores_by_start_sample_mv MODIFY QUERY
SELECT {_SCORE_SAMPLE_COLUMNS}, AgentVersion FROM scores_by_start WHERE {_IN_SAMPLE}
"""
# Existing stores: the live scores re-stored with their run's version now (the same key and
# CreatedAt: the later insert is the one ReplacingMergeTree keeps; a row it did not would read
# NULL, which drift looks up as before). By the run's ids: a run stored once never moved. Its
# view fills the sample. Again (a restart before the record): only rows still NULL.
FILL_SCORES_VERSION = f"""
INSERT INTO scores_by_start ({_SCORE_SAMPLE_COLUMNS}, AgentVersion)
SELECT {_SCORE_COLUMNS_FROM_S}, s.Agent AS Agent, s.Task AS Task, s.CreatedAt AS CreatedAt,
    toUInt8(0) AS IsDeleted, r.AgentVersion AS AgentVersion
FROM (SELECT * FROM scores_by_start FINAL WHERE IsDeleted = 0 AND AgentVersion IS NULL) AS s
INNER JOIN (
    SELECT TraceId, RootSpanId, AgentVersion FROM runs_by_start FINAL WHERE IsDeleted = 0
) AS r ON r.TraceId = s.TraceId AND r.RootSpanId = s.RootSpanId
"""

# Migration 125: the starts at which the runs stored more than once have live score rows, so
# the split-run question (`sources.hours_of_split_runs`) reads a few thousand rows here instead of
# every row of the re-scored metrics (0.2 s CPU a question on 1M runs). A row of `scores_by_start`
# whose run is in `runs_revised` when it arrives leaves (run hash, metric, start) here; the fill
# adds those of every row already stored (markers included: a superset only costs a read). Why
# every live row of a split run (live rows of a metric at two starts) is here: a row that arrived
# before its run was stored again scored revision 1, at revision 1's start; a live row at another
# start scored a later revision (Revision != 1), whose arrival made `scores_by_start_moved_mv`
# delete the run's earlier rows at other starts (migration 124), that row among them, unless it
# came later (CreatedAt), that is after the run was stored again, so it is here too. Retention
# ages it by RunStart with `scores_by_start` (collector/schema.py's RETENTION_TABLES).
SCORE_STARTS_OF_REVISED_RUNS = """
CREATE TABLE IF NOT EXISTS score_starts_of_revised_runs (
    RunHash UInt64,
    Metric LowCardinality(String),
    RunStart DateTime64(6)
) ENGINE = ReplacingMergeTree
ORDER BY (RunHash, Metric, RunStart)
"""
_STARTS_OF_REVISED = (
    f"SELECT {_RUN_HASH} AS RunHash, Metric, RunStart FROM scores_by_start "
    f"WHERE IsDeleted = 0 AND {_RUN_HASH} IN (SELECT RunHash FROM runs_revised"
    # Only the inserted runs' keys: the index reads their granules, not the whole set.
    f" WHERE RunHash IN (SELECT {_RUN_HASH} FROM scores_by_start))"
)
SCORE_STARTS_OF_REVISED_RUNS_MV = f"""
CREATE MATERIALIZED VIEW IF NOT EXISTS score_starts_of_revised_runs_mv TO score_starts_of_revised_runs
AS {_STARTS_OF_REVISED}
"""
# Existing stores, after the view (a row both write is one row here): every stored row's start.
FILL_SCORE_STARTS_OF_REVISED_RUNS = (
    "INSERT INTO score_starts_of_revised_runs (RunHash, Metric, RunStart) "
    f"SELECT {_RUN_HASH} AS RunHash, Metric, RunStart FROM scores_by_start "
    f"WHERE IsDeleted = 0 AND {_RUN_HASH} IN (SELECT RunHash FROM runs_revised)"
)

# Migration 126: per (metric, evaluator version, UTC day) of `scores_by_start`'s rows as stored
# (markers and replaced rows too, as `sources.overlap_bounds` reads them), the first and last
# start, so drift's versions' overlap reads whole days here instead of every row of its span
# (the whole table against a version: 0.13 s CPU on 1M runs); the edge days are read as before.
# A view writes it, the fill adds the stored rows (min and max: a row both write changes
# nothing). Rows deleted since (the sweep, merges) leave it a superset, which only widens the
# overlap (still exact). Retention ages a day's row a day after its day's last rows
# (`AgedFrom`), so they are gone from `scores_by_start` first.
SCORE_VERSION_DAYS = """
CREATE TABLE IF NOT EXISTS score_version_days (
    Metric LowCardinality(String),
    EvaluatorVersion LowCardinality(String),
    Day Date,
    First SimpleAggregateFunction(min, DateTime64(6)),
    Last SimpleAggregateFunction(max, DateTime64(6)),
    AgedFrom SimpleAggregateFunction(max, DateTime('UTC')) DEFAULT toDateTime(Day, 'UTC') + toIntervalDay(2)
) ENGINE = AggregatingMergeTree
ORDER BY (Metric, EvaluatorVersion, Day)
"""
_VERSION_DAYS = (
    "SELECT Metric, EvaluatorVersion, toDate(RunStart, 'UTC') AS Day, min(RunStart) AS First, "
    "max(RunStart) AS Last FROM scores_by_start GROUP BY Metric, EvaluatorVersion, Day"
)
SCORE_VERSION_DAYS_MV = f"""
CREATE MATERIALIZED VIEW IF NOT EXISTS score_version_days_mv TO score_version_days
AS {_VERSION_DAYS}
"""
FILL_SCORE_VERSION_DAYS = (
    f"INSERT INTO score_version_days (Metric, EvaluatorVersion, Day, First, Last) {_VERSION_DAYS}"
)

# Migration 127: every row of `scores_by_start` again, keyed without the evaluator version, so
# FINAL keeps one row per (metric, start, run): the latest by (CreatedAt, EvaluatorVersion), the
# order `sources._LATEST` takes, as one UInt256 (`Latest`: CreatedAt's microseconds, then the
# version's first `LATEST_VERSION_BYTES` bytes, zero-padded: byte order is ClickHouse's string
# order where no two versions share those bytes, which drift checks for the versions it reads,
# `sources.versions_apart`). Drift's runs stored once inside the versions' overlap read their
# latest score here instead of grouping every version's rows (the re-scored day of 1M runs:
# 0.21 s CPU grouped, 0.04 s read), wherever that row is a live number with a carried
# version; any other (a NULL score, where an older version's number is the answer; a marker;
# a NULL version) is grouped as before (`sources._latest_of_runs_at_one_start`). A view writes
# it, the fill copies the stored rows; the sweep of deleted runs deletes here too
# (scoring/deleted_runs.py) and retention ages it with `scores_by_start`.
LATEST_VERSION_BYTES = 24
_VERSION_BYTES = (
    f"rightPad(substring(EvaluatorVersion, 1, {LATEST_VERSION_BYTES}), {LATEST_VERSION_BYTES}, '\\0')"
)
_LATEST_OF_ROW = (
    f"bitShiftLeft(toUInt256(toUnixTimestamp64Micro(CreatedAt)), {8 * LATEST_VERSION_BYTES}) "
    f"+ reinterpretAsUInt256(reverse({_VERSION_BYTES}))"
)
SCORES_LATEST_BY_START = """
CREATE TABLE IF NOT EXISTS scores_latest_by_start (
    Metric LowCardinality(String),
    RunStart DateTime64(6),
    TraceId String,
    RootSpanId String,
    Score Nullable(Float64),
    Agent LowCardinality(String),
    Task String,
    AgentVersion LowCardinality(Nullable(String)),
    IsDeleted UInt8,
    Latest UInt256
) ENGINE = ReplacingMergeTree(Latest)
PARTITION BY toYYYYMMDD(RunStart)
ORDER BY (Metric, RunStart, TraceId, RootSpanId)
"""
_LATEST_COLUMNS = "Metric, RunStart, TraceId, RootSpanId, Score, Agent, Task, AgentVersion, IsDeleted"
SCORES_LATEST_BY_START_MV = f"""
CREATE MATERIALIZED VIEW IF NOT EXISTS scores_latest_by_start_mv TO scores_latest_by_start
AS SELECT {_LATEST_COLUMNS}, {_LATEST_OF_ROW} AS Latest FROM scores_by_start
"""
# Existing stores, after the view: every stored row (a row both write is one row here).
FILL_SCORES_LATEST_BY_START = (
    f"INSERT INTO scores_latest_by_start ({_LATEST_COLUMNS}, Latest) "
    f"SELECT {_LATEST_COLUMNS}, {_LATEST_OF_ROW} AS Latest FROM scores_by_start"
)

ROLLUP_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        116,
        "runs and scores by start time (monitoring rollups)",
        (
            RUNS_BY_START,
            SCORES_BY_START,
            TRAJECTORIES_STORED,
            SCORES_STORED,
            RUNS_BY_START_MV,
            RUNS_BY_START_MOVED_MV,
            SCORES_BY_START_MV,
            SCORES_BY_START_MOVED_MV,
            FILL_RUNS_BY_START,
            FILL_SCORES_BY_START,
        ),
    ),
    *HOURLY_MIGRATIONS,  # 117, 118: per-hour rollups of these (hourly.py)
    Migration(
        119,
        "hash samples of the run-level rollups (drift)",
        (
            RUNS_BY_START_SAMPLE,
            SCORES_BY_START_SAMPLE,
            RUNS_BY_START_SAMPLE_MV,
            SCORES_BY_START_SAMPLE_MV,
            FILL_RUNS_BY_START_SAMPLE,
            FILL_SCORES_BY_START_SAMPLE,
        ),
    ),
    Migration(
        121,
        "rollups' moved-row views see a run's earlier version in the same insert",
        (RUNS_BY_START_MOVED_IN_BLOCK, SCORES_BY_START_MOVED_IN_BLOCK),
    ),
    Migration(
        122,
        "the run's agent version on the scores' rollups, the runs stored more than once (drift)",
        (
            SCORES_VERSION,
            SCORES_BY_START_VERSION,
            SCORES_BY_START_SAMPLE_VERSION,
            RUNS_REVISED,
            RUNS_REVISED_MV,
            SCORES_BY_START_MV_WITH_VERSION,
            SCORES_BY_START_SAMPLE_MV_WITH_VERSION,
            FILL_RUNS_REVISED,
            FILL_SCORES_VERSION,
        ),
    ),
    Migration(
        124,
        "a moved run's re-score deletes its earlier rows of every evaluator version from the rollups",
        (SCORES_BY_START_MOVED_ANY_VERSION, FILL_MOVED_SCORE_MARKERS),
    ),
    Migration(
        125,
        "the score starts of the runs stored more than once (the split-run question)",
        (SCORE_STARTS_OF_REVISED_RUNS, SCORE_STARTS_OF_REVISED_RUNS_MV, FILL_SCORE_STARTS_OF_REVISED_RUNS),
    ),
    Migration(
        126,
        "each evaluator version's first and last score start per day (drift's versions' overlap)",
        (SCORE_VERSION_DAYS, SCORE_VERSION_DAYS_MV, FILL_SCORE_VERSION_DAYS),
    ),
    Migration(
        127,
        "scores' latest row per run and start, keyed without the evaluator version (drift)",
        (SCORES_LATEST_BY_START, SCORES_LATEST_BY_START_MV, FILL_SCORES_LATEST_BY_START),
    ),
)
