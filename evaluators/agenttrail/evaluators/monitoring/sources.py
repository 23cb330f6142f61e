"""The latest version of each stored run and score, as SQL that stats, drift and the report read.

They read the run-level rollups `runs_by_start` and `scores_by_start` (rollups.py): the latest
live rows, sorted by start time, so a period reads only its own rows. Both are
ReplacingMergeTree tables read with FINAL, as the base tables were (on 1M runs FINAL costs
1.5-2x a scan without de-duplication, `argMax(..., Version)` grouped by run 3-10x). The one
case FINAL does not cover is a run scored by two evaluator versions (the metric set changed and
the new version re-scored recent runs): only those metrics take the per-run argMax path, found
by a cheap query first. Scores are not joined to runs (that join costs another 3-5x): the
evaluator deletes the scores of runs that re-assembly deleted instead (scoring/deleted_runs.py),
within seconds.

`BASE_TABLES` is the same SQL over `trajectories` and `scores` themselves, which the rollups'
equivalence tests compare against.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agenttrail.collector.store import Store
from agenttrail.evaluators.monitoring.rollups import LATEST_VERSION_BYTES

# Reported from trajectories for every run; the evaluator also writes them as scores.
RUN_METRICS = ("latency", "failure")


@dataclass(frozen=True, slots=True)
class Tables:
    """Where runs and scores are read from; `keyed_by_start`: sorted by agent or metric and start
    (the rollups), so a condition on those and the run's ids may filter before FINAL.
    `runs_sample`, `scores_sample`: the same rows of the runs whose hash is at most
    `rollups.SAMPLE_LIMIT`, if kept (`sampled()`). `revised`: where the scores carry their
    run's `AgentVersion`, the table of runs stored more than once, for which it may be stale
    (rollups.py, migration 122). `latest`: the scores' latest row per run and start, keyed
    without the evaluator version (migration 127; not kept for the samples)."""

    runs: str
    scores: str
    keyed_by_start: bool = True
    runs_sample: str | None = None
    scores_sample: str | None = None
    revised: str | None = None
    latest: str | None = None

    def sampled(self) -> Tables:
        """These tables' hash samples; only where `runs_sample` is set."""
        assert self.runs_sample is not None
        assert self.scores_sample is not None
        return Tables(self.runs_sample, self.scores_sample, self.keyed_by_start, revised=self.revised)


_SAMPLES = ("runs_by_start_sample", "scores_by_start_sample")
_REVISED = "runs_revised"
_LATEST_ROWS = "scores_latest_by_start"
_ROLLUP_TABLES = ("runs_by_start", "scores_by_start", True, *_SAMPLES, _REVISED, _LATEST_ROWS)
ROLLUPS = Tables(*_ROLLUP_TABLES)  # and hourly.py's rollups
RUN_ROLLUPS = Tables(*_ROLLUP_TABLES)  # without the hourly ones
BASE_TABLES = Tables("trajectories", "scores", keyed_by_start=False)
SOURCE = ROLLUPS  # the equivalence tests set BASE_TABLES here

_MULTI_VERSION = """
SELECT Metric FROM {table}
WHERE RunStart >= {{since:DateTime64(6)}} AND RunStart < {{until:DateTime64(6)}}
GROUP BY Metric HAVING min(EvaluatorVersion) != max(EvaluatorVersion)
"""

_MULTI_VERSION_ANYWHERE = (
    "SELECT Metric FROM {table} GROUP BY Metric HAVING min(EvaluatorVersion) != max(EvaluatorVersion)"
)

_RUN_HASH = "cityHash64(TraceId, RootSpanId)"

# Which score of a run is its latest: the same one whatever order the rows are read in (a run's
# scores may carry different run starts, when it moved after some were written).
_LATEST = "(CreatedAt, EvaluatorVersion)"
# The same order as one Int128, where the `evaluator_versions` parameter names every version of
# the rows read (`overlap_bounds`; fewer than 2**16): CreatedAt's microseconds, then the
# version's rank among them (indexOf: 1..n in sorted order, the order the tuple compares them
# in). An argMax over the tuple compares it as a generic field, row by row: drift's scores
# statement on the re-scored 1M-run store took 1.0 s CPU with it, 0.8 s with this.
_RANKED_LATEST = (
    "toInt128(toUnixTimestamp64Micro(CreatedAt)) * 65536 "
    "+ indexOf(arraySort({evaluator_versions:Array(String)}), EvaluatorVersion)"
)
MAX_RANKED_VERSIONS = 65535


def runs_sql(
    where: Sequence[str], columns: str, *, prewhere: Sequence[str] = (), tables: Tables | None = None
) -> str:
    """`columns` of the live runs (latest version, not deleted) matching every condition.

    `columns` may name only what `runs_by_start` holds (no Input, Output, ToolCalls...).
    `prewhere`: conditions on Agent, Start, TraceId and RootSpanId only, which the rollup
    applies before FINAL (see `_filtered`). `tables`: other than `SOURCE` (its hash sample).
    """
    read = tables or SOURCE
    return f"SELECT {columns} FROM {read.runs} FINAL {_filtered(('IsDeleted = 0', *where), prewhere, read)}"


def _filtered(where: Sequence[str], prewhere: Sequence[str], tables: Tables) -> str:
    """PREWHERE and WHERE clauses. A PREWHERE filters rows before FINAL picks each key's latest
    version, which is exact only for conditions every version of a row meets alike: those on
    the sorting key. The rollups' keys hold the agent (runs) or metric, the start time and the
    run's ids; the base tables' only the ids, so there such conditions join the WHERE."""
    if not prewhere:
        return "WHERE " + " AND ".join(where)
    if not tables.keyed_by_start:
        return "WHERE " + " AND ".join((*where, *prewhere))
    return f"PREWHERE {' AND '.join(prewhere)} WHERE {' AND '.join(where)}"


def scores_sql(
    where: Sequence[str],
    *,
    prewhere: Sequence[str] = (),
    run_prewhere: Sequence[str] = (),
    tables: Tables | None = None,
    multi_version: Sequence[str] | None = None,
    agent_version: bool = False,
    run_start: Sequence[str] | None = None,
    one_start: bool = False,
    carried_once: Sequence[str] = (),
    latest_rows: bool = False,
) -> str:
    """One row per (run, metric): TraceId, RootSpanId, Metric, Score, RunStart, Agent, Task,
    and with `agent_version` the AgentVersion the row carries (only where `tables.revised`).

    Needs the `multi_version` parameter from `multi_version_metrics`.
    `prewhere`: conditions on Metric, RunStart, TraceId and RootSpanId only (`_filtered`). A
    metric two evaluator versions scored takes each run's latest score over all its rows, and a
    condition that keeps some of a run's rows and drops others (one on RunStart, when the run
    moved) would change which is latest: that part takes `run_prewhere` instead, conditions on
    the run's ids alone, which keep or drop all of a run's rows, and applies `where` to each
    run's latest row (`_latest_of_each_run`). `tables`: as for `runs_sql`.
    `multi_version`: the parameter's value, if known here; when empty, the second part (which
    would read rows only to drop them all) is left out.
    `run_start`: where every run's live rows of those metrics lie at one start (no run moved
    between two versions' scores: `stats.ScorePlan`), the conditions of `where` on RunStart,
    which then keep or drop all of a run's rows, so the runs stored again read only theirs.
    `one_start` (with `run_start`): every run of those metrics at one start: read apart only by
    the versions' overlap (`_latest_of_runs_at_one_start`; needs the parameters of `overlap_bounds`).
    `carried_once` (with `one_start`): conditions on the carried AgentVersion for the runs stored
    once inside the overlap, applied before they are grouped: the caller drops with them only
    runs it would drop after (their rows carry the run's one version or NULL).
    `latest_rows` (with `one_start`, where `read.latest` is kept and the rows' versions are
    `versions_apart`): those runs' latest rows are read from `read.latest` where they can be.
    """
    read = tables or SOURCE
    table = read.scores
    assert not agent_version or read.revised, "these scores carry no AgentVersion"
    # argMax skips a NULL argument (an older row's version would win): in a tuple it does not.
    version = ", AgentVersion" if agent_version else ""
    latest_version = ", tuple(AgentVersion)" if agent_version else ""
    if multi_version is not None and not multi_version:
        return f"""
SELECT TraceId, RootSpanId, Metric, Score, RunStart, Agent, Task{version} FROM {table} FINAL
{_filtered(where, prewhere, read)}
"""
    single = _filtered((*where, "Metric NOT IN {multi_version:Array(String)}"), prewhere, read)
    columns = f"TraceId, RootSpanId, Metric, Score, RunStart, Agent, Task{version}"
    if one_start:
        assert run_start is not None, "one_start needs every run's rows at one start"
        multi_part = _latest_of_runs_at_one_start(
            where, prewhere, run_prewhere, run_start, read, latest_version, columns, carried_once, latest_rows
        )
    else:
        multi_part = _latest_of_each_run(where, run_prewhere, read, latest_version, columns, run_start)
    return f"""
SELECT {columns} FROM {table} FINAL
{single}
UNION ALL
{multi_part}
"""


def _latest_of_each_run(
    where: Sequence[str],
    run_prewhere: Sequence[str],
    read: Tables,
    latest_version: str,
    columns: str,
    run_start: Sequence[str] | None = None,
) -> str:
    """`scores_sql`'s multi-version part: each run's latest score over all its rows, then
    `where`. Filtered first, a run moved out of the range between two versions' scores kept
    the older one's, under its old start, in the range.

    The runs are those with a row meeting `where` (a run kept has its latest row among them);
    their rows are read by the run's ids, before FINAL, over the whole table (any start).
    Where the tables have `revised` (every run stored more than once, migration 122): a run
    stored once has one start, agent and task on all its rows, so `where` keeps all or none
    of them and may filter first (the period's rows only); only the runs stored again (a few
    percent) are read whole: a set of the period's ids cost 2 s CPU over a week of 1M runs.
    And of the runs stored once, only those whose start lies where two versions' scores of the
    metric overlap (`_overlap_bounds`) can have two rows: the rest are read as they are, without
    grouping (a second version that re-scored the last day of a week groups a seventh of it).
    With `run_start` (every run's rows at one start), the runs stored again are read by those
    conditions instead of by their ids over the whole table."""
    table = read.scores
    multi = "Metric IN {multi_version:Array(String)}"
    conditions = " AND ".join(where)
    if read.revised is None:
        named = f"SELECT TraceId, RootSpanId FROM {table} {_filtered((*where, multi), run_prewhere, read)}"
        rows = _filtered(("1",), (multi, f"(TraceId, RootSpanId) IN ({named})", *run_prewhere), read)
        return f"SELECT * FROM ({_grouped(table, rows, latest_version)}) WHERE {conditions}"
    stored_again = f"(SELECT RunHash FROM {read.revised})"
    revised = f"{_RUN_HASH} IN {stored_again}"
    stored_once = (f"{_RUN_HASH} NOT IN {stored_again}", *run_prewhere)
    bounds = _overlap_bounds(table, _filtered((*where, multi), run_prewhere, read))
    overlapping = f"RunStart BETWEEN {bounds}.1[Metric] AND {bounds}.2[Metric]"
    alone = _filtered((*where, multi, f"NOT ({overlapping})"), stored_once, read)
    once = _filtered((*where, multi, overlapping), stored_once, read)
    if run_start is not None:
        again = _filtered(("1",), (multi, revised, *run_start, *run_prewhere), read)
    else:
        in_period = _filtered((*where, multi), (revised, *run_prewhere), read)
        named = f"(TraceId, RootSpanId) IN (SELECT TraceId, RootSpanId FROM {table} {in_period})"
        again = _filtered(("1",), (multi, revised, named, *run_prewhere), read)
    return (
        f"SELECT {columns} FROM {table} FINAL {alone}\nUNION ALL\n"
        f"{_grouped(table, once, latest_version)}\nUNION ALL\n"
        f"SELECT * FROM ({_grouped(table, again, latest_version)}) WHERE {conditions}"
    )


def _latest_of_runs_at_one_start(
    where: Sequence[str],
    prewhere: Sequence[str],
    run_prewhere: Sequence[str],
    run_start: Sequence[str],
    read: Tables,
    latest_version: str,
    columns: str,
    carried_once: Sequence[str] = (),
    latest_rows: bool = False,
) -> str:
    """`scores_sql`'s multi-version part where every run's live rows of those metrics lie at one
    start (`hours_of_split_runs` named none among them). A run's rows then share their start and
    hash, so `prewhere` and `run_start` keep or drop all of them before FINAL, whether the run
    was stored once or again; a run whose start lies outside the versions' overlap
    (`overlap_bounds`: the `overlap_low`, `overlap_high` parameters) has one version's rows,
    one row, its latest; the runs inside it are grouped alike, and `where` (agent, task: a run
    stored again may carry others on its older rows) applies to each one's latest row. Drift's
    re-scored day took three reads: the runs stored once outside the overlap and inside it,
    and the runs stored again by their ids over the whole table, with the overlap's bounds read
    again in each.

    Inside the overlap, a run stored once (not in `read.revised`) scored one revision, so its
    rows share their start, agent, task and carried version (or NULL, which drift looks up in
    the run's one row: the same version), and only the score needs the latest row
    (`_grouped_once`); the runs stored again (a few percent) take `_grouped`. Its `argMax` of a
    tuple over every run of the re-scored day took twice the CPU of the whole read."""
    assert read.revised is not None, "only where the runs stored again are known"
    table = read.scores
    multi = "Metric IN {multi_version:Array(String)}"
    overlap = "RunStart BETWEEN {overlap_low:DateTime64(6)} AND {overlap_high:DateTime64(6)}"
    revised = f"{_RUN_HASH} IN (SELECT RunHash FROM {read.revised})"
    inside = (multi, overlap, *run_start, *prewhere, *run_prewhere)
    alone = _filtered((*where,), (multi, f"NOT ({overlap})", *prewhere, *run_prewhere), read)
    # After FINAL: AgentVersion is not in the sorting key.
    once_where, once_prewhere = (*where, *carried_once), (*inside, f"NOT ({revised})")
    if latest_rows:
        once = _once_from_latest_rows(read, columns, once_where, once_prewhere, latest_version)
    else:
        once = _grouped_once(table, _filtered(once_where, once_prewhere, read), latest_version)
    again = _filtered(("1",), (*inside, revised), read)
    return (
        f"SELECT {columns} FROM {table} FINAL {alone}\nUNION ALL\n"
        f"{once}\nUNION ALL\n"
        f"SELECT * FROM ({_grouped(table, again, latest_version, _RANKED_LATEST)}) "
        f"WHERE {' AND '.join(where)}"
    )


def _once_from_latest_rows(
    read: Tables, columns: str, where: Sequence[str], prewhere: Sequence[str], latest_version: str
) -> str:
    """`_grouped_once`'s rows from `read.latest` (migration 127), whose FINAL keeps each (metric,
    start, run)'s latest row by (CreatedAt, EvaluatorVersion) among every row `read.scores`
    holds there. Where that row is a live number (and carries a version, when asked for), it is
    the latest row of its version, so FINAL keeps it in `read.scores` too, and it is the
    largest there by `_RANKED_LATEST` with a number: `_grouped_once`'s answer, its agent, task
    and version those of every row of a run stored once. Any other key (its latest row a NULL
    score, where an older version's number is the answer; a deletion marker; a NULL version)
    is grouped as before, its rows found by the key (the index skips the granules of none)."""
    assert read.latest is not None
    live = "Score IS NOT NULL AND IsDeleted = 0" + (" AND AgentVersion IS NOT NULL" if latest_version else "")
    latest = f"SELECT {columns} FROM {read.latest} FINAL {_filtered((*where, live), prewhere, read)}"
    keys = "Metric, RunStart, TraceId, RootSpanId"
    others = f"SELECT {keys} FROM {read.latest} FINAL {_filtered((f'NOT ({live})',), prewhere, read)}"
    rows = _filtered(where, (*prewhere, f"({keys}) IN ({others})"), read)
    return f"{latest}\nUNION ALL\n{_grouped_once(read.scores, rows, latest_version)}"


def versions_apart(versions: Sequence[str]) -> bool:
    """Whether `read.latest`'s order (rollups.py, `Latest`: a version's first
    LATEST_VERSION_BYTES bytes, zero-padded) tells every two of these versions apart, and so
    orders them as ClickHouse compares the strings."""
    n = LATEST_VERSION_BYTES
    padded = {version.encode()[:n].ljust(n, b"\0") for version in versions}
    return len(padded) == len(set(versions))


def _grouped_once(table: str, rows: str, latest_version: str) -> str:
    """`_grouped` for runs stored once, whose rows share every column but the score: grouped by
    the start too, the rest any row's (`any` skips a NULL version: the run's other rows carry
    the same one or NULL). Needs the `evaluator_versions` parameter (`_RANKED_LATEST`)."""
    version = ", any(AgentVersion) AS any_version" if latest_version else ""
    named = ", any_version AS AgentVersion" if latest_version else ""
    return f"""
SELECT TraceId, RootSpanId, Metric, latest_score AS Score, RunStart, any_agent AS Agent,
    any_task AS Task{named}
FROM (
SELECT TraceId, RootSpanId, Metric, RunStart, argMax(Score, {_RANKED_LATEST}) AS latest_score,
    any(Agent) AS any_agent, any(Task) AS any_task{version}
FROM {table} FINAL {rows}
GROUP BY TraceId, RootSpanId, Metric, RunStart)
"""


# Per (metric, evaluator version): the first and last start (Unix micros) of its rows as stored
# (no FINAL: a superset) in [since, until), read from `scores_by_start` at the edges
# ([since, first_day), [last_day, until)) and from migration 126's days in between.
_VERSION_SPANS = """
SELECT Metric, EvaluatorVersion, min(toUnixTimestamp64Micro(RunStart)) AS first,
    max(toUnixTimestamp64Micro(RunStart)) AS last FROM {scores}
WHERE (RunStart >= {{since:DateTime64(6)}} AND RunStart < {{first_day:DateTime64(6)}})
    OR (RunStart >= {{last_day:DateTime64(6)}} AND RunStart < {{until:DateTime64(6)}})
GROUP BY Metric, EvaluatorVersion
UNION ALL
SELECT Metric, EvaluatorVersion, min(toUnixTimestamp64Micro(First)), max(toUnixTimestamp64Micro(Last))
FROM {days} WHERE Day >= {{first_date:Date}} AND Day < {{last_date:Date}}
GROUP BY Metric, EvaluatorVersion
"""
_OVERLAP_BOUNDS = """
SELECT Metric, arraySort(groupArray(first))[2], arrayReverseSort(groupArray(last))[2],
    groupArray(EvaluatorVersion)
FROM (SELECT Metric, EvaluatorVersion, min(first) AS first, max(last) AS last FROM ({spans})
      GROUP BY Metric, EvaluatorVersion)
GROUP BY Metric HAVING count() > 1
"""
VERSION_DAYS = "score_version_days"
_DAY_S = 86400


@dataclass(frozen=True, slots=True)
class Overlap:
    """`overlap_bounds`' answer: the metrics two versions scored, the bounds (`overlap_low`,
    `overlap_high`) and every version of those metrics' rows (`evaluator_versions`)."""

    metrics: list[str]
    low: str
    high: str
    versions: list[str]


def overlap_bounds(store: Store, since: str, until: str) -> Overlap:
    """`multi_version_metrics` over the rollups, and where two of their versions' starts overlap
    in [since, until): from the second smallest of the versions' first starts to the second
    largest of their last, the widest of the metrics' (read without FINAL: a superset, so wider
    still). A start outside it has one version's rows of each metric; none: low > high. And
    every version of those metrics' rows in the range (`_RANKED_LATEST`). The whole days of the
    range come from migration 126's `score_version_days`, a superset too; the whole table
    (drift against a version) took 0.13 s CPU on 1M runs read row by row."""
    assert SOURCE.keyed_by_start, "over the rollups only"
    spans = _VERSION_SPANS.format(scores=SOURCE.scores, days=VERSION_DAYS)
    rows = store.query(_OVERLAP_BOUNDS.format(spans=spans), _day_params(since, until))
    if not rows:
        return Overlap([], ts6(1), ts6(0), [])
    low, high = min(int(row[1]) for row in rows), max(int(row[2]) for row in rows)
    versions = sorted({version for row in rows for version in row[3]})
    assert len(versions) <= MAX_RANKED_VERSIONS, "a version's rank must stay below a microsecond"
    return Overlap([row[0] for row in rows], us6(low), us6(high), versions)


def _day_params(since: str, until: str) -> dict[str, Any]:
    """`_VERSION_SPANS`' parameters: the whole UTC days inside [since, until) read from the
    days' table, the rest from the rows (all of it when no whole day lies inside)."""
    first = math.ceil(float(since) / _DAY_S) * _DAY_S
    last = math.floor(float(until) / _DAY_S) * _DAY_S
    if last < first:  # inside one day: the edges [since, since) and [since, until), no day
        first_day = last_day = since
        first_date = last_date = _utc_date(0)
    else:
        first_day, last_day = ts6(first), ts6(last)
        first_date, last_date = _utc_date(first), _utc_date(last)
    return {
        "since": since,
        "until": until,
        "first_day": first_day,
        "last_day": last_day,
        "first_date": first_date,
        "last_date": last_date,
    }


def _utc_date(seconds: int) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).date().isoformat()


def us6(us: int) -> str:
    """A DateTime64(6) parameter value of Unix microseconds, exact (a float is not, at 1e15)."""
    return f"{us // 1_000_000}.{us % 1_000_000:06d}"


def _overlap_bounds(table: str, rows: str) -> str:
    """A scalar subquery: two maps, metric -> the first and the last start at which two of its
    evaluator versions' start ranges overlap among `rows` (read without FINAL, so a superset):
    the second smallest of the versions' first starts, the second largest of their last. A run
    stored once has all its rows at one start, so one outside these has one version's rows."""
    return f"""(
SELECT (CAST((groupArray(Metric), groupArray(low)) AS Map(String, DateTime64(6))),
        CAST((groupArray(Metric), groupArray(high)) AS Map(String, DateTime64(6))))
FROM (
    SELECT Metric, arraySort(groupArray(first))[2] AS low, arrayReverseSort(groupArray(last))[2] AS high
    FROM (SELECT Metric, EvaluatorVersion, min(RunStart) AS first, max(RunStart) AS last FROM {table} {rows}
          GROUP BY Metric, EvaluatorVersion)
    GROUP BY Metric HAVING count() > 1))"""


def _grouped(table: str, rows: str, latest_version: str, latest: str = _LATEST) -> str:
    """Per (run, metric) of `table` FINAL's `rows` (its PREWHERE and WHERE), its latest row's
    columns under `scores_sql`'s names (named apart inside: an alias may not name a column
    that an aggregate of the same SELECT reads). `latest_version`: ", tuple(AgentVersion)" to
    take the run's AgentVersion too (argMax skips a NULL argument, so an older row's version
    would win: in a tuple it does not). The score is its own argMax, which skips a NULL score
    as it always did; the other columns come from one argMax of a tuple (the row with the
    latest key either way): four argMax over the re-scored day's 320,000 rows took 0.25-0.4 s
    CPU more (drift21). `latest`: the order of a run's rows (`_RANKED_LATEST` where its
    parameter is known)."""
    return f"""
SELECT TraceId, RootSpanId, Metric, latest_score AS Score, latest_row.1 AS RunStart, latest_row.2 AS Agent,
    latest_row.3 AS Task{", latest_row.4.1 AS AgentVersion" if latest_version else ""}
FROM (
SELECT TraceId, RootSpanId, Metric, argMax(Score, {latest}) AS latest_score,
    argMax((RunStart, Agent, Task{latest_version}), {latest}) AS latest_row
FROM {table} FINAL {rows}
GROUP BY TraceId, RootSpanId, Metric)
"""


# The hours (Unix seconds) holding a live row of a run whose live rows of a metric (of
# {metrics}) lie at more than one start: only runs stored more than once can have such rows.
_HOURS_OF_SPLIT_RUNS = """
SELECT DISTINCT toUInt32(arrayJoin(hours)) FROM (
    SELECT groupUniqArray(intDiv(toUnixTimestamp64Micro(RunStart), 3600000000) * 3600) AS hours
    FROM {scores} FINAL
    PREWHERE Metric IN {{metrics:Array(String)}} AND {run_hash} IN ({runs}){limit}
    GROUP BY TraceId, RootSpanId, Metric HAVING min(RunStart) != max(RunStart))
"""
# The runs stored more than once with rows of those metrics at two starts, live or not
# (migration 125's table holds every live row's start of such a run, and some no longer live).
_RUNS_AT_TWO_STARTS = """
SELECT RunHash FROM {starts} PREWHERE Metric IN {{metrics:Array(String)}}
GROUP BY RunHash, Metric HAVING min(RunStart) != max(RunStart)
"""
SCORE_STARTS = "score_starts_of_revised_runs"


def hours_of_split_runs(
    store: Store, metrics: Sequence[str], limit: str = "", params: dict[str, Any] | None = None
) -> set[int]:
    """The hours holding a row of a run whose live rows of one of `metrics` lie at two starts
    (moved between two evaluator versions' scores: a first revision's score written after a
    later one's, or rows stored before migration 124). Without such a run, every run's rows of
    those metrics lie at one start, so a condition on RunStart keeps or drops all of them
    (`scores_sql`'s `run_start`). `limit`: a condition on the run's hash (drift's sample) with
    its `params`. Rollups only (`ROLLUPS.revised`).

    The runs that may be such are read first from migration 125's table (rows of the runs
    stored again, at two starts): most questions find none and read nothing else; the live
    rows of those found are then read as before. The question over every run stored again read
    every row of the metrics (0.2 s CPU on 1M runs)."""
    assert ROLLUPS.revised is not None
    query_params = {**(params or {}), "metrics": list(metrics)}
    runs = _RUNS_AT_TWO_STARTS.format(starts=SCORE_STARTS)
    if not store.query(f"SELECT 1 FROM ({runs}) LIMIT 1", query_params):
        return set()
    sql = _HOURS_OF_SPLIT_RUNS.format(
        scores=ROLLUPS.scores, run_hash=_RUN_HASH, runs=runs, limit=f" AND {limit}" if limit else ""
    )
    return {int(hour) for (hour,) in store.query(sql, query_params)}


def multi_version_metrics(store: Store, since: str, until: str) -> list[str]:
    """Metrics that more than one evaluator version scored for runs started in [since, until).

    Over the base tables, those scored so anywhere: they keep a moved run's row of one version
    under its old start beside its newer row of another (the rollups delete it, migration 124),
    so a period one version scored may hold a row that is not its run's latest."""
    sql = _MULTI_VERSION.format(table=SOURCE.scores)
    if not SOURCE.keyed_by_start:
        sql = _MULTI_VERSION_ANYWHERE.format(table=SOURCE.scores)
    return [row[0] for row in store.query(sql, {"since": since, "until": until})]


def ts6(seconds: float) -> str:
    """A DateTime64(6) parameter value."""
    return f"{seconds:.6f}"


def filter_clauses(
    column_values: Sequence[tuple[str, str, Any]],
) -> tuple[list[str], dict[str, Any]]:
    """Equality conditions for the given (column, parameter name, value), skipping empty values."""
    clauses: list[str] = []
    params: dict[str, Any] = {}
    for column, name, value in column_values:
        if value:
            clauses.append(f"{column} = {{{name}:String}}")
            params[name] = value
    return clauses, params
