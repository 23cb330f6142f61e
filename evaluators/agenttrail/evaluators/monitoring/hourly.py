"""Per-hour rollups of the run-level rollups: what stats and the report read for whole hours.

`runs_by_hour` holds, per (hour, agent, task, model, agent version), the live runs' count,
failures, tokens, tool tally and every latency (an array: exact percentiles need the values);
`scores_by_hour`, per (hour, agent, task, metric), every non-null score. No materialized view
writes them (views on `trajectories` cost the assembler about a quarter of its CPU per run):
the sidecar's rollup job (`HourlyRollup`) aggregates closed hours from `runs_by_start` and
`scores_by_start` and re-aggregates an hour only when its rows changed.

Each aggregation of an hour is a generation: its rows carry the generation, and `rollup_hours`
points at the hour's current generation beside a fingerprint of the hour's rows in the
run-level rollups as they were just before that aggregation (count and a sum of row hashes,
over the rows as stored, versions included). A query reads an hour from the rollup only if the
fingerprint it computes now equals the stored one; any other hour of the period (not rolled
up yet, changed since, the open hour, the partial hours at the edges) it reads from the runs
themselves. So answers equal those over the runs whatever the job has done (an insert, a
deletion marker, a re-score or the sweep's DELETE all change the fingerprint; a background
merge does too, which only costs a re-aggregation). The fingerprint is taken before the
aggregation, so a change landing in between leaves a pointer that no longer matches, never a
matching pointer to stale rows. Rows of a superseded generation are deleted a cycle later,
after any query that read the old pointer has finished.

Scores are rolled up with their run's model and agent version, so stats grouped by them read
no join over every run. The run is looked up in the same hour only: an hour is `ScoresJoined`
when every score of it belongs to a live run started in that hour with the score's agent and
task. In such an hour no change can move a score's run without changing the hour's runs (and so
its fingerprint), so its rows answer "the scores joined to their runs" for any period holding
the hour; a score read run by run whose run lies in such an hour makes the query read that
hour run by run too (stats.joined_plan). `lowest_by_hour` keeps, per hour and agent, the
`WORST_KEPT` runs with the lowest mean score, `slowest_by_hour` the slowest (what the report's
worst runs pick from).

Migration 117 creates the tables empty: the first cycle of the job back-fills every hour, and
until then queries read the runs, as before. Migration 118 adds the model and version columns
and the worst runs' tables; an hour rolled up before it (`Layout` 0) answers what it answered, and
the job rolls it up again (after the hours that changed).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from agenttrail.collector.background import BackgroundLoop
from agenttrail.collector.schema import Migration
from agenttrail.collector.store import Store

log = logging.getLogger(__name__)

HOUR_S = 3600
UNUSED_AFTER_NS = 600 * 10**9
LAYOUT = 1  # what the job writes: 1 since migration 118 (model and version, worst runs)
WORST_KEPT = 100  # runs per hour and agent in slowest_by_hour, lowest_by_hour: the report's largest `worst`
HOURLY_TABLES = ("runs_by_hour", "scores_by_hour", "slowest_by_hour", "lowest_by_hour")
# The hour a row belongs to, in Unix seconds: UTC whatever the server's time zone.
HOUR_OF_START = "intDiv(toUnixTimestamp64Micro(Start), 3600000000) * 3600"
HOUR_OF_RUN_START = "intDiv(toUnixTimestamp64Micro(RunStart), 3600000000) * 3600"

RUNS_BY_HOUR = """
CREATE TABLE IF NOT EXISTS runs_by_hour (
    Hour DateTime('UTC'),
    Generation UInt64,
    Agent LowCardinality(String),
    Task String,
    Model LowCardinality(String),
    AgentVersion String,
    Runs UInt64,
    Failures UInt64,
    InputTokens UInt64,
    OutputTokens UInt64,
    ToolCount UInt64,
    ToolNames Array(String),
    ToolCalls Array(UInt64),
    ToolErrors Array(UInt64),
    Latencies Array(Float64)
) ENGINE = MergeTree
ORDER BY (Hour, Generation, Agent, Task, Model, AgentVersion)
"""

SCORES_BY_HOUR = """
CREATE TABLE IF NOT EXISTS scores_by_hour (
    Hour DateTime('UTC'),
    Generation UInt64,
    Agent LowCardinality(String),
    Task String,
    Metric LowCardinality(String),
    Scores Array(Float64)
) ENGINE = MergeTree
ORDER BY (Hour, Generation, Agent, Metric, Task)
"""

# The current generation of each rolled-up hour and the fingerprints it was aggregated at.
ROLLUP_HOURS = """
CREATE TABLE IF NOT EXISTS rollup_hours (
    Hour DateTime('UTC'),
    Generation UInt64,
    RunRows UInt64,
    RunHash UInt64,
    ScoreRows UInt64,
    ScoreHash UInt64,
    MetricVersions Array(Tuple(String, String))
) ENGINE = ReplacingMergeTree(Generation)
ORDER BY Hour
"""

# The report's worst runs per hour and agent, ranked from 1 (a report of the `worst` runs reads
# ranks up to `worst`), with the columns it shows: the WORST_KEPT slowest runs, and the
# WORST_KEPT runs with the lowest mean evaluation score (the run's columns are those of the
# run of the hour with the scores' agent, when there is one: always in a ScoresJoined hour).
SLOWEST_BY_HOUR = """
CREATE TABLE IF NOT EXISTS slowest_by_hour (
    Hour DateTime('UTC'),
    Generation UInt64,
    Agent LowCardinality(String),
    Rank UInt8,
    LatencyS Float64,
    TraceId String,
    RootSpanId String,
    Start DateTime64(6),
    Task String,
    Failure UInt8,
    ErrorType String
) ENGINE = MergeTree
ORDER BY (Hour, Generation, Agent, Rank)
"""
LOWEST_BY_HOUR = """
CREATE TABLE IF NOT EXISTS lowest_by_hour (
    Hour DateTime('UTC'),
    Generation UInt64,
    Agent LowCardinality(String),
    Rank UInt8,
    Mean Float64,
    TraceId String,
    RootSpanId String,
    Start DateTime64(6),
    Task String,
    LatencyS Float64,
    Failure UInt8,
    ErrorType String
) ENGINE = MergeTree
ORDER BY (Hour, Generation, Agent, Rank)
"""

# Scores by the model and version of their run (Matched: the run is live in the hour with the
# score's agent and task; otherwise both are ''), what layout an hour was rolled up with, and
# whether every score of it matched.
BY_MODEL_AND_VERSION = (
    "ALTER TABLE scores_by_hour ADD COLUMN IF NOT EXISTS Model LowCardinality(String)",
    "ALTER TABLE scores_by_hour ADD COLUMN IF NOT EXISTS AgentVersion String",
    "ALTER TABLE scores_by_hour ADD COLUMN IF NOT EXISTS Matched UInt8",
    "ALTER TABLE rollup_hours ADD COLUMN IF NOT EXISTS Layout UInt8",
    "ALTER TABLE rollup_hours ADD COLUMN IF NOT EXISTS ScoresJoined UInt8",
    SLOWEST_BY_HOUR,
    LOWEST_BY_HOUR,
)

HOURLY_MIGRATIONS: tuple[Migration, ...] = (
    Migration(117, "per-hour monitoring rollups", (RUNS_BY_HOUR, SCORES_BY_HOUR, ROLLUP_HOURS)),
    Migration(118, "hourly scores by model and version, the worst runs per hour", BY_MODEL_AND_VERSION),
)

# Per hour: the rows of runs_by_start / scores_by_start as stored (not FINAL: every version,
# deletion markers included), counted and hashed. Reads only narrow columns, no strings: every
# writer stores a changed run or score under a new Version / CreatedAt (the assembler's
# time_ns, the scorer's clock), so a change always changes the hashed columns or the count.
_RUN_FINGERPRINTS = f"""
SELECT {HOUR_OF_START} AS h, count(), sum(cityHash64(Start, Version, IsDeleted))
FROM runs_by_start WHERE Start >= {{first:DateTime64(6)}} AND Start < {{last:DateTime64(6)}} GROUP BY h
"""
_SCORE_FINGERPRINTS = f"""
SELECT {HOUR_OF_RUN_START} AS h, count(),
    sum(cityHash64(RunStart, CreatedAt, Score, IsDeleted))
FROM scores_by_start
WHERE RunStart >= {{first:DateTime64(6)}} AND RunStart < {{last:DateTime64(6)}} GROUP BY h
"""

_IN_HOURS = "{hour} IN {{hours:Array(UInt32)}}"

_FILL_RUNS = f"""
INSERT INTO runs_by_hour
SELECT toDateTime({HOUR_OF_START}, 'UTC') AS Hour, {{generation:UInt64}}, Agent, Task, Model, AgentVersion,
    count(), sum(Failure), sum(InputTokens), sum(OutputTokens), sum(ToolCount),
    (sumMap(CAST(ToolNames, 'Array(String)'), arrayMap(s -> toUInt64(1), ToolStatuses),
        arrayMap(s -> toUInt64(s = 'error'), ToolStatuses)) AS tally).1, tally.2, tally.3,
    groupArray(LatencyS)
FROM runs_by_start FINAL
WHERE IsDeleted = 0 AND {_IN_HOURS.format(hour=HOUR_OF_START)}
GROUP BY Hour, Agent, Task, Model, AgentVersion
"""

# Per run one score per metric, as every query reads them (sources.scores_sql), with the hour:
# a metric two evaluator versions scored within the hour ({multi_hours}: (hour, metric)) takes
# each run's latest score of the hour. Decided per hour, not over the hours aggregated together,
# so an hour's rows are the same whichever hours it was rolled up with.
_IN_MULTI = "has({multi_hours:Array(Tuple(UInt32, String))}, (h, toString(Metric)))"
_HOUR_SCORES = f"""
SELECT TraceId, RootSpanId, Metric, Score, Agent, Task, toUInt32({HOUR_OF_RUN_START}) AS h
FROM scores_by_start FINAL
WHERE {_IN_HOURS.format(hour=HOUR_OF_RUN_START)} AND NOT {_IN_MULTI}
UNION ALL
SELECT TraceId, RootSpanId, Metric, argMax(Score, (CreatedAt, EvaluatorVersion)),
    argMax(Agent, (CreatedAt, EvaluatorVersion)), argMax(Task, (CreatedAt, EvaluatorVersion)),
    toUInt32({HOUR_OF_RUN_START}) AS h
FROM scores_by_start FINAL
WHERE {_IN_HOURS.format(hour=HOUR_OF_RUN_START)} AND {_IN_MULTI}
GROUP BY h, TraceId, RootSpanId, Metric
"""

# Each score with its run's model and version when the run is live in the score's hour with
# the score's agent and task (Matched = 1).
_FILL_SCORES = f"""
INSERT INTO scores_by_hour (Hour, Generation, Agent, Task, Metric, Model, AgentVersion, Matched, Scores)
SELECT toDateTime(s.h, 'UTC') AS Hour, {{generation:UInt64}}, s.Agent, s.Task, s.Metric, r.Model,
    r.AgentVersion, r.matched, groupArrayIf(assumeNotNull(s.Score), s.Score IS NOT NULL)
FROM ({_HOUR_SCORES}) AS s
LEFT ANY JOIN (
    SELECT TraceId, RootSpanId, Agent, Task, toUInt32({HOUR_OF_START}) AS h, Model, AgentVersion,
        toUInt8(1) AS matched
    FROM runs_by_start FINAL WHERE IsDeleted = 0 AND {_IN_HOURS.format(hour=HOUR_OF_START)}
) AS r ON s.TraceId = r.TraceId AND s.RootSpanId = r.RootSpanId AND s.Agent = r.Agent AND s.Task = r.Task
    AND s.h = r.h
GROUP BY Hour, s.Agent, s.Task, s.Metric, r.Model, r.AgentVersion, r.matched
"""

_HOUR_RUNS = f"""
SELECT TraceId, RootSpanId, Agent, toUInt32({HOUR_OF_START}) AS h, Start, Task, LatencyS, Failure, ErrorType
FROM runs_by_start FINAL WHERE IsDeleted = 0 AND {_IN_HOURS.format(hour=HOUR_OF_START)}
"""

# The report's slowest runs, in its order (LatencyS DESC, TraceId).
_FILL_SLOWEST = f"""
INSERT INTO slowest_by_hour (Hour, Generation, Agent, Rank, LatencyS, TraceId, RootSpanId, Start, Task,
    Failure, ErrorType)
SELECT toDateTime(h, 'UTC'), {{generation:UInt64}}, Agent,
    row_number() OVER (PARTITION BY h, Agent ORDER BY LatencyS DESC, TraceId), LatencyS, TraceId, RootSpanId,
    Start, Task, Failure, ErrorType
FROM ({_HOUR_RUNS} ORDER BY LatencyS DESC, TraceId LIMIT {WORST_KEPT} BY h, Agent)
"""

# The report's lowest-scored runs: a run's mean over its non-null scores, per agent of the scores.
_FILL_LOWEST = f"""
INSERT INTO lowest_by_hour (Hour, Generation, Agent, Rank, Mean, TraceId, RootSpanId, Start, Task, LatencyS,
    Failure, ErrorType)
SELECT toDateTime(l.h, 'UTC'), {{generation:UInt64}}, l.Agent,
    row_number() OVER (PARTITION BY l.h, l.Agent ORDER BY l.mean, l.TraceId, l.RootSpanId), l.mean, l.TraceId,
    l.RootSpanId, r.Start, r.Task, r.LatencyS, r.Failure, r.ErrorType
FROM (
    SELECT h, Agent, avg(assumeNotNull(Score)) AS mean, TraceId, RootSpanId
    FROM ({_HOUR_SCORES}) WHERE Score IS NOT NULL
    GROUP BY h, Agent, TraceId, RootSpanId
    ORDER BY mean, TraceId, RootSpanId LIMIT {WORST_KEPT} BY h, Agent
) AS l
LEFT ANY JOIN ({_HOUR_RUNS}) AS r
    ON l.TraceId = r.TraceId AND l.RootSpanId = r.RootSpanId AND l.Agent = r.Agent AND l.h = r.h
"""

_JOINED = """
SELECT toUnixTimestamp(Hour), min(Matched) FROM scores_by_hour
WHERE Generation = {generation:UInt64} AND toUnixTimestamp(Hour) IN {hours:Array(UInt32)} GROUP BY Hour
"""

# The (metric, evaluator version) pairs scored per hour, as `sources.multi_version_metrics`
# reads them (every stored row): which metrics take the per-run latest-score path.
METRIC_VERSIONS = f"""
SELECT {HOUR_OF_RUN_START} AS h, groupUniqArray((toString(Metric), toString(EvaluatorVersion)))
FROM scores_by_start WHERE {{where}} GROUP BY h
"""


class RollupHourRow(NamedTuple):
    """One row of `rollup_hours`: an hour's current generation and its fingerprint then."""

    Hour: int  # Unix seconds
    Generation: int
    RunRows: int
    RunHash: int
    ScoreRows: int
    ScoreHash: int
    MetricVersions: list[tuple[str, str]]
    Layout: int
    ScoresJoined: int  # 1: every score of the hour is of a live run of the hour, same agent and task


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """An hour's rows in the run-level rollups: count and hash sum of runs, then of scores."""

    run_rows: int = 0
    run_hash: int = 0
    score_rows: int = 0
    score_hash: int = 0


class Point(NamedTuple):
    """Where an hour's rollup stands: its generation, fingerprint and metric versions."""

    generation: int
    mark: Fingerprint
    metric_versions: list[tuple[str, str]]
    layout: int = LAYOUT
    scores_joined: bool = False  # its scores' rows carry their runs (RollupHourRow.ScoresJoined)


def fingerprints(store: Store, first: int, last: int) -> dict[int, Fingerprint]:
    """The fingerprint of every hour with rows in [first, last) (Unix seconds, whole hours)."""
    params = {"first": f"{first}.000000", "last": f"{last}.000000"}
    found: dict[int, list[int]] = {}
    for hour, (rows, digest) in run_fingerprints(store, first, last).items():
        found.setdefault(hour, [0, 0, 0, 0])[0:2] = [rows, digest]
    for hour, rows, digest in store.query(_SCORE_FINGERPRINTS, params):
        found.setdefault(int(hour), [0, 0, 0, 0])[2:4] = [int(rows), int(digest)]
    return {hour: Fingerprint(*values) for hour, values in found.items()}


def run_fingerprints(store: Store, first: int, last: int) -> dict[int, tuple[int, int]]:
    """The runs' part of `fingerprints`: hour -> (rows, hash sum) of runs_by_start."""
    params = {"first": f"{first}.000000", "last": f"{last}.000000"}
    return {
        int(hour): (int(rows), int(digest)) for hour, rows, digest in store.query(_RUN_FINGERPRINTS, params)
    }


def stored_points(store: Store, first: int, last: int) -> dict[int, Point]:
    """hour -> its current generation, what it was aggregated at, the metric versions it holds."""
    rows = store.query(
        "SELECT toUnixTimestamp(Hour), Generation, RunRows, RunHash, ScoreRows, ScoreHash, MetricVersions, "
        "Layout, ScoresJoined FROM rollup_hours FINAL WHERE Hour >= toDateTime({first:UInt32}, 'UTC') "
        "AND Hour < toDateTime({last:UInt32}, 'UTC')",
        {"first": first, "last": last},
    )
    return {
        int(hour): Point(
            int(generation),
            Fingerprint(*(int(value) for value in marks)),
            list(pairs),
            int(layout),
            bool(joined),
        )
        for hour, generation, *marks, pairs, layout, joined in rows
    }


def fresh_hours(store: Store, first: int, last: int) -> dict[int, Point]:
    """The hours in [first, last) whose rollup matches their rows now, with their points."""
    if last <= first:
        return {}
    points = stored_points(store, first, last)
    if not points:
        return {}
    now = fingerprints(store, first, last)
    return {hour: point for hour, point in points.items() if now.get(hour) == point.mark}


def fresh_run_hours(store: Store, first: int, last: int) -> dict[int, Point]:
    """The hours in [first, last) whose `runs_by_hour` rows match their runs now: the runs'
    fingerprint alone (runs_by_hour is aggregated from the runs only), so an hour whose scores
    changed since still counts its runs from the rollup."""
    if last <= first:
        return {}
    points = stored_points(store, first, last)
    if not points:
        return {}
    now = run_fingerprints(store, first, last)
    return {
        hour: point
        for hour, point in points.items()
        if now.get(hour, (0, 0)) == (point.mark.run_rows, point.mark.run_hash)
    }


def whole_hours(since: float, until: float) -> tuple[int, int]:
    """[first, last): the whole hours inside [since, until), Unix seconds (empty if first >= last)."""
    return math.ceil(since / HOUR_S) * HOUR_S, math.floor(until / HOUR_S) * HOUR_S


def roll_up(store: Store, hours: Sequence[int], marks: Mapping[int, Fingerprint], generation: int) -> None:
    """Aggregate `hours` as `generation`, then point each hour at it with its fingerprint taken
    before the aggregation (`marks`)."""
    if not hours:
        return
    params: dict[str, Any] = {"generation": generation, "hours": list(hours)}
    store.command(_FILL_RUNS, params)
    in_hours = _IN_HOURS.format(hour=HOUR_OF_RUN_START)
    pairs = {int(hour): found for hour, found in store.query(METRIC_VERSIONS.format(where=in_hours), params)}
    # A metric two evaluator versions scored within an hour takes each run's latest score there.
    params["multi_hours"] = [
        (hour, metric) for hour, found in pairs.items() for metric in sorted(multi_version(found))
    ]
    store.command(_FILL_SCORES, params)
    store.command(_FILL_SLOWEST, params)
    store.command(_FILL_LOWEST, params)
    unmatched = {int(hour) for hour, matched in store.query(_JOINED, params) if not matched}
    points = []
    for hour in hours:
        mark = marks.get(hour, Fingerprint())
        points.append(
            RollupHourRow(
                Hour=hour,
                Generation=generation,
                RunRows=mark.run_rows,
                RunHash=mark.run_hash,
                ScoreRows=mark.score_rows,
                ScoreHash=mark.score_hash,
                MetricVersions=sorted(pairs.get(hour, [])),
                Layout=LAYOUT,
                ScoresJoined=int(hour not in unmatched),
            )
        )
    store.insert("rollup_hours", points)


def multi_version(pairs: Iterable[tuple[str, str]]) -> set[str]:
    """The metrics among (metric, evaluator version) pairs scored by more than one version."""
    versions: dict[str, set[str]] = {}
    for metric, version in pairs:
        versions.setdefault(metric, set()).add(version)
    return {metric for metric, found in versions.items() if len(found) > 1}


_ORPHANS = """
SELECT DISTINCT toUnixTimestamp(Hour), Generation FROM {table}
WHERE Generation < {{before:UInt64}}
    AND (Hour, Generation) NOT IN (SELECT Hour, Generation FROM rollup_hours FINAL)
"""


class HourlyRollup(BackgroundLoop):
    """Keeps `runs_by_hour` / `scores_by_hour` up to date for closed hours, one pass a cycle."""

    name = "hourly-rollup"

    def __init__(
        self,
        store_factory: Callable[[], Store],
        interval_s: float = 60.0,
        hours_per_cycle: int = 24 * 7,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(what="hourly rollup", thread_name="agenttrail-rollup", poll_interval_s=interval_s)
        self._store_factory = store_factory
        self._store: Store | None = None
        self._hours_per_cycle = hours_per_cycle
        self._clock = clock
        self._unused: set[tuple[str, int, int]] = set()  # (table, hour, generation) seen unused
        self.hours_aggregated = 0
        self.failures = 0
        self.last_error = ""

    def count_failure(self, message: str) -> None:
        self.failures += 1
        self.last_error = message

    def cycle(self) -> None:
        self.run_once()

    def run_once(self) -> int:
        """Re-aggregate the closed hours whose rows changed (oldest first, at most
        `hours_per_cycle`), then drop unused generations; returns the hours aggregated."""
        if self._store is None:
            self._store = self._store_factory()
        store = self._store
        closed = int(self._clock() // HOUR_S) * HOUR_S
        marks = fingerprints(store, 0, closed)
        points = stored_points(store, 0, closed)
        changed = {hour for hour, mark in marks.items() if hour not in points or points[hour].mark != mark}
        # Hours rolled up by an older layout answer what they did: after the changed ones.
        older = {hour for hour, point in points.items() if point.layout < LAYOUT and hour in marks} - changed
        stale = [*sorted(changed), *sorted(older)][: self._hours_per_cycle]
        roll_up(store, stale, marks, time.time_ns())
        self.hours_aggregated += len(stale)
        self._drop_unused(store)
        return len(stale)

    def _drop_unused(self, store: Store) -> None:
        """Delete generations no hour points at: superseded ones, and a failed cycle's. A
        generation goes only once it was seen unused a cycle before and is over ten minutes
        old, so no query still reading it through an older pointer, and no other writer about
        to point at it, loses its rows."""
        before = time.time_ns() - UNUSED_AFTER_NS
        unused = {
            (table, int(hour), int(generation))
            for table in HOURLY_TABLES
            for hour, generation in store.query(_ORPHANS.format(table=table), {"before": before})
        }
        for table in HOURLY_TABLES:
            pairs = sorted((hour, gen) for name, hour, gen in unused & self._unused if name == table)
            if pairs:
                store.command(
                    f"DELETE FROM {table} WHERE (toUnixTimestamp(Hour), Generation) IN "
                    "arrayZip({hours:Array(UInt32)}, {generations:Array(UInt64)})",
                    {"hours": [hour for hour, _ in pairs], "generations": [gen for _, gen in pairs]},
                )
        self._unused = unused - self._unused
