"""The per-hour rollups (hourly.py) change no answer: stats and the report read with them equal
the answers over the base tables, whatever the rollup job has done since the runs changed.

The same seeded random histories as test_rollups.py (re-assembled, moved, re-agented, deleted,
revived and re-scored runs, scores by a second evaluator version, the sweep's DELETE): the job
rolls the closed hours up, then the history changes some runs, and the answers are compared
with the hours rolled up and fresh, with some of them changed since (read raw), after a merge
of every table, and after the job caught up again. "Equal" as in test_rollups.py: exact but for
means and standard deviations of floats (1e-12 relative: the order ClickHouse adds them in).
"""

from __future__ import annotations

import random
import time
from dataclasses import astuple, replace
from datetime import UTC, datetime
from typing import Any

import pytest
from trajectory_rows import insert_trajectories

from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.monitoring import hourly, sources
from agenttrail.evaluators.monitoring.drift import Baseline, DriftQuery, DriftSettings, load_windows
from agenttrail.evaluators.monitoring.hourly import HourlyRollup, RollupHourRow, fresh_hours
from agenttrail.evaluators.monitoring.report_data import ReportQuery, report_rows
from agenttrail.evaluators.monitoring.stats import StatsQuery, query_stats
from agenttrail.evaluators.scoring.deleted_runs import delete_scores_of_deleted_runs

from . import drift_reference
from .synthetic import Run, score_rows, store_runs, trajectory_row
from .test_drift_sampling import as_lists
from .test_rollups import HOUR, History, assert_same, at, both, random_run


@pytest.fixture
def base() -> float:
    """The start of the hour seven hours ago: the histories' hours are all closed."""
    return (time.time() // HOUR - 7) * HOUR


def runs_in_hours_1_to_3(store: Store, base: float, *, seed: int, count: int) -> list[Run]:
    """`count` random runs spread over the hours 1-3 after `base`, stored with their scores."""
    rng = random.Random(seed)
    runs = [
        replace(random_run(rng, base), start=base + HOUR * (1 + index % 3) + rng.uniform(0, HOUR - 1))
        for index in range(count)
    ]
    store_runs(store, runs)
    return runs


def move_two_hours_on_then_score_late(store: Store, run: Run, base: float) -> None:
    """`run` re-assembled two hours later (revision 2) and scored there 0 by ev2; then ev1's
    score 1 of revision 1, written last: the run's live rows lie at two starts, and its latest
    score is the one at its old start."""
    moved = replace(run, start=run.start + 2 * HOUR, scores={"trajectory_exact_match": 0.0})
    insert_trajectories(store, [trajectory_row(moved, version=2)])
    store.insert(
        "scores", score_rows(moved, evaluator_version="ev2", created=base + 6 * HOUR + 10, revision=2)
    )
    late = replace(run, scores={"trajectory_exact_match": 1.0})
    store.insert("scores", score_rows(late, evaluator_version="ev1", created=base + 6 * HOUR + 20))


def queries(base: float) -> list[StatsQuery | ReportQuery]:
    """Whole-hour buckets (what the hourly rows can answer) with partial hours at the edges,
    filters, groups (model and version groups join scores to runs), metric subsets, and
    reports (their lowest-scored runs join scores to runs too)."""
    until = base + 5 * HOUR + 1800
    return [
        StatsQuery(since=at(base), until=at(until), bucket_s=HOUR),
        StatsQuery(since=at(base - 7 * HOUR), until=at(until + HOUR), bucket_s=HOUR, by=("task",)),
        StatsQuery(since=at(base + 1234.5), until=at(base + 4 * HOUR + 17), bucket_s=HOUR, agent="alpha"),
        StatsQuery(since=at(base), until=at(until), bucket_s=86_400, by=("agent_version", "model")),
        StatsQuery(since=at(base), until=at(until), bucket_s=HOUR, agent="beta", by=("model",)),
        StatsQuery(
            since=at(base + 1234.5),
            until=at(until + HOUR),
            bucket_s=3 * HOUR,
            task="t1",
            by=("task", "agent_version"),
            metrics=("trajectory_exact_match",),
        ),
        StatsQuery(since=at(base + 600), until=at(until), bucket_s=2 * HOUR, task="t2"),
        StatsQuery(since=at(base), until=at(until), bucket_s=HOUR, metrics=("trajectory_precision",)),
        ReportQuery(since=at(base), until=at(base + 6 * HOUR)),
        ReportQuery(since=at(base - HOUR), until=at(base + 6 * HOUR), worst=2),
        ReportQuery(since=at(base + 600), until=at(base + 4 * HOUR), agent="beta"),
    ]


def assert_answers_equal(store: Store, base: float) -> None:
    for query in queries(base):
        if isinstance(query, StatsQuery):
            rolled, from_base = both(lambda q=query: query_stats(store, q))
        else:
            rolled, from_base = both(lambda q=query: report_rows(store, q))
        assert from_base, query
        assert_same(rolled, from_base, f"{query}")


def fresh(store: Store, base: float) -> int:
    return len(fresh_hours(store, int(base - 7 * HOUR), int(base + 7 * HOUR)))


def joined(store: Store, base: float) -> list[int]:
    """The fresh hours whose scores all lie in their runs' hours (read with their runs' model and version)."""
    points = fresh_hours(store, int(base - 7 * HOUR), int(base + 7 * HOUR))
    return sorted(hour for hour, point in points.items() if point.scores_joined)


@pytest.mark.parametrize("seed", [1, 2])
def test_hourly_rollups_answer_as_the_base_tables(rollup_store: Store, seed: int, base: float) -> None:
    store = rollup_store
    history = History(store, random.Random(seed), base, count=400)
    job = HourlyRollup(lambda: store)
    assert fresh(store, base) == 0
    assert job.run_once() >= 5, "the first cycle back-fills every closed hour with runs"
    assert job.run_once() == 0, "nothing changed: nothing to aggregate"
    assert len(joined(store, base)) == fresh(store, base), "every score is of a run of its hour"
    for _ in range(3):
        assert fresh(store, base) >= 5
        assert_answers_equal(store, base)
        history.step(changes=40)  # some hours change after their rollup: read raw until the next cycle
        assert fresh(store, base) < 6
        assert_answers_equal(store, base)
        assert job.run_once() > 0
    assert history.deleted, "the history deletes some runs"
    assert_answers_equal(store, base)
    for table in ("trajectories", "scores", "runs_by_start", "scores_by_start", "rollup_hours"):
        store.command(f"OPTIMIZE TABLE {table} FINAL")
    assert_answers_equal(store, base)
    job.run_once()
    assert fresh(store, base) >= 5
    assert_answers_equal(store, base)


def test_a_change_between_fingerprint_and_aggregation_is_not_trusted(
    rollup_store: Store, base: float
) -> None:
    """A run stored while an hour is being aggregated (after its fingerprint was taken) leaves
    the hour pointing at a fingerprint its rows no longer have: read raw, rolled up again."""
    store = rollup_store
    history = History(store, random.Random(5), base, count=200)
    closed = int(time.time() // HOUR) * HOUR
    marks = hourly.fingerprints(store, 0, closed)
    history.step(changes=30)
    hourly.roll_up(store, sorted(marks), marks, time.time_ns())
    assert fresh(store, base) < len(marks)
    assert_answers_equal(store, base)
    assert HourlyRollup(lambda: store).run_once() > 0
    assert fresh(store, base) >= 5
    assert_answers_equal(store, base)


def test_scores_whose_run_lies_in_another_hour(rollup_store: Store, base: float) -> None:
    """A score stored under another hour than its run's (a judge that read the run before it
    moved) still pairs with its run: stats by model and version and the report's lowest-scored
    runs read the run's hour run by run while the score is read so, and an hour holding such a
    score (or a score of a deleted run) is not read with its runs from the hourly rows."""
    store = rollup_store
    runs = runs_in_hours_1_to_3(store, base, seed=11, count=90)
    job = HourlyRollup(lambda: store)
    job.run_once()
    hours = [int(base + HOUR * step) for step in (1, 2, 3)]
    assert joined(store, base) == hours
    assert_answers_equal(store, base)
    # The lowest-scored run of its agent by far, once its judge score under hour 2 counts.
    run = runs[0]
    judged = replace(run, start=base + 2 * HOUR + 10, scores={"judge_helpfulness": -100.0})
    store.insert("scores", score_rows(judged, created=base + 7 * HOUR))
    assert joined(store, base) == [hours[0], hours[2]], "hour 2 changed: read run by run"
    assert_answers_equal(store, base)
    report = report_rows(store, ReportQuery(since=at(base), until=at(base + 5 * HOUR), worst=1))
    lowest = [row for row in report if row["kind"] == "worst" and row["why"] == "lowest_scored"]
    assert run.trace_id in {row["trace_id"] for row in lowest}
    job.run_once()
    assert joined(store, base) == [hours[0], hours[2]], "hour 2 holds a score of hour 1's run"
    assert_answers_equal(store, base)
    # A deleted run whose scores the sweep has not deleted yet.
    gone = runs[2]
    insert_trajectories(store, [trajectory_row(gone, version=2, deleted=True)])
    job.run_once()
    assert joined(store, base) == [hours[0]]
    assert_answers_equal(store, base)
    delete_scores_of_deleted_runs(store)
    job.run_once()
    assert joined(store, base) == [hours[0], hours[2]]
    assert_answers_equal(store, base)


def test_a_run_scored_at_two_starts_by_two_versions_is_read_raw(rollup_store: Store, base: float) -> None:
    """A metric two evaluator versions scored takes each run's latest score over all its rows;
    an hour's rows pick the latest within the hour. A run whose live rows lie at two starts (a
    first revision's score written after a moved revision's, by the other version) keeps its
    latest score only: the hours holding its rows are read raw (stats.score_plan), the other
    hours still from their rows."""
    store = rollup_store
    runs = runs_in_hours_1_to_3(store, base, seed=13, count=90)
    rescored = [
        row for run in runs for row in score_rows(run, evaluator_version="ev2", created=base + 6 * HOUR)
    ]
    store.insert("scores", rescored)  # every hour holds two versions of each metric
    run = runs[0]  # in hour 1; moved to hour 3 and scored there by ev2
    move_two_hours_on_then_score_late(store, run, base)
    HourlyRollup(lambda: store).run_once()
    assert fresh(store, base) == 3
    assert_answers_equal(store, base)
    query = StatsQuery(
        since=at(base), until=at(base + 4 * HOUR), bucket_s=HOUR, metrics=("trajectory_exact_match",)
    )
    counts: dict[str, int] = {}
    for row in query_stats(store, query):
        bucket = row["bucket_start"]
        counts[bucket] = counts.get(bucket, 0) + row["metrics"]["trajectory_exact_match"]["count"]
    per_hour = {at(base + HOUR * step).strftime("%Y-%m-%dT%H:%M:%SZ"): 0 for step in (1, 2, 3)}
    for found in runs:
        per_hour[at(found.start // HOUR * HOUR).strftime("%Y-%m-%dT%H:%M:%SZ")] += 1
    assert counts == per_hour, "the moved run counts once, in hour 1 (its latest score's)"


def test_migration_125_fills_the_score_starts_of_the_runs_stored_again(store: Store, base: float) -> None:
    """The split-run question reads migration 125's table first: on a store made before it, a
    run whose live rows lie at two starts is found once the migration fills the table from the
    stored rows (its view sees the rows written after it only)."""
    migrate(store, tuple(m for m in ALL_MIGRATIONS if m.version != 125))
    runs = runs_in_hours_1_to_3(store, base, seed=13, count=30)
    store.insert(
        "scores",
        [row for run in runs for row in score_rows(run, evaluator_version="ev2", created=base + 6 * HOUR)],
    )
    run = min((run for run in runs if run.start < base + 2 * HOUR), key=lambda found: found.start)
    move_two_hours_on_then_score_late(store, run, base)
    assert migrate(store, ALL_MIGRATIONS) == [125]
    hour = int(run.start // HOUR * HOUR)
    split = sources.hours_of_split_runs(store, ["trajectory_exact_match", "trajectory_precision"])
    assert split == {hour, hour + 2 * HOUR}


def test_drift_keeps_the_latest_score_of_a_run_scored_at_two_starts_by_two_versions(
    rollup_store: Store,
    base: float,
) -> None:
    """Drift groups the runs in the versions' overlap in one read per window part only where no
    run's live rows of a metric lie at two starts (drift._every_run_at_one_start). Here one does, the
    baseline (hours 1-2, sampled from the hash sample tables) and the recent window (hour 3,
    the whole tables) are read apart, and the moved run's hour-3 row (ev2, older than its
    hour-1 row by ev1) is not its latest: it stays out of the recent window."""
    store = rollup_store
    runs = runs_in_hours_1_to_3(store, base, seed=17, count=420)
    store.insert(
        "scores",
        [row for run in runs for row in score_rows(run, evaluator_version="ev2", created=base + 6 * HOUR)],
    )
    # The run of hour 1 with the smallest hash: in the recent window's sample wherever it lies.
    first_hour = [run for run in runs if run.start < base + 2 * HOUR]
    hashes = dict(
        store.query(
            "SELECT TraceId, cityHash64(TraceId, RootSpanId) FROM trajectories "
            "WHERE TraceId IN {ids:Array(String)}",
            {"ids": [run.trace_id for run in first_hour]},
        )
    )
    run = min(first_hour, key=lambda candidate: hashes[candidate.trace_id])
    move_two_hours_on_then_score_late(store, run, base)
    HourlyRollup(lambda: store).run_once()
    query = DriftQuery(
        recent_s=HOUR,
        baseline=Baseline(since=at(base + HOUR), until=at(base + 3 * HOUR)),
        metrics=("trajectory_exact_match",),
        now=at(base + 4 * HOUR),
    )
    # Per agent, the baseline's hash limit under SAMPLE_LIMIT, the recent window's above.
    drift_settings = DriftSettings(min_samples=10, max_samples=20)
    assert as_lists(load_windows(store, query, drift_settings)) == as_lists(
        drift_reference.reference_windows(store, query, drift_settings)
    )


def test_hours_of_an_older_layout_are_rolled_up_again(rollup_store: Store, base: float) -> None:
    """Hours rolled up before migration 118 (Layout 0: scores without their runs' model and
    version, no lowest-scored runs) answer as before, read scores with runs run by run, and the
    job rolls them up again, after any hour that changed."""
    store = rollup_store
    history = History(store, random.Random(12), base, count=200)
    job = HourlyRollup(lambda: store)
    rolled = job.run_once()
    points = hourly.stored_points(store, 0, int(time.time()))
    older = [
        RollupHourRow(hour, point.generation, *astuple(point.mark), point.metric_versions, 0, 0)
        for hour, point in points.items()
    ]
    store.insert("rollup_hours", older)
    assert fresh(store, base) == rolled
    assert joined(store, base) == []
    assert_answers_equal(store, base)
    history.step(changes=5)
    closed = int(time.time() // HOUR) * HOUR
    marks, points = hourly.fingerprints(store, 0, closed), hourly.stored_points(store, 0, closed)
    changed = {hour for hour, mark in marks.items() if hour not in points or points[hour].mark != mark}
    assert HourlyRollup(lambda: store, hours_per_cycle=len(changed)).run_once() == len(changed)
    layouts = {hour: point.layout for hour, point in hourly.stored_points(store, 0, closed).items()}
    assert {hour for hour, layout in layouts.items() if layout == hourly.LAYOUT} == changed, "changed first"
    assert_answers_equal(store, base)
    assert job.run_once() == len(set(layouts) - changed)
    assert joined(store, base)
    assert job.run_once() == 0
    assert_answers_equal(store, base)


def test_unused_generations_are_deleted_a_cycle_after_being_seen(
    rollup_store: Store, monkeypatch: pytest.MonkeyPatch, base: float
) -> None:
    """Superseded generations (and a failed cycle's) leave the hourly tables, but only once
    seen unused by an earlier cycle, so a query still reading them keeps its rows."""
    store = rollup_store
    history = History(store, random.Random(6), base, count=200)
    job = HourlyRollup(lambda: store)
    job.run_once()
    history.step(changes=30)
    job.run_once()  # supersedes the changed hours' first generation

    def generations() -> int:
        return int(store.query("SELECT uniqExact(Hour, Generation) FROM runs_by_hour")[0][0])

    used = store.query("SELECT uniqExact(Hour, Generation) FROM rollup_hours FINAL")[0][0]
    assert generations() > used
    monkeypatch.setattr(hourly, "UNUSED_AFTER_NS", 0)
    job.run_once()
    assert generations() > used, "seen unused once: kept"
    job.run_once()
    assert generations() == used
    assert_answers_equal(store, base)


def test_migration_117_on_an_existing_store(store: Store, base: float) -> None:
    """A store made before the hourly rollups migrates, answers as before, and the job back-fills it."""
    migrate(store, tuple(m for m in ALL_MIGRATIONS if m.version not in (117, 118)))
    History(store, random.Random(7), base, count=200).step(changes=20)
    assert migrate(store, ALL_MIGRATIONS) == [117, 118]
    assert_answers_equal(store, base)
    HourlyRollup(lambda: store).run_once()
    assert fresh(store, base) >= 5
    assert_answers_equal(store, base)


def test_hours_are_utc_hours() -> None:
    assert hourly.whole_hours(3600.5, 4 * 3600.0) == (7200, 14400)
    assert hourly.whole_hours(3600.0, 3600 * 2 - 1) == (3600, 3600)
    assert datetime.fromtimestamp(hourly.whole_hours(0.1, 86_400)[0], UTC).minute == 0


@pytest.mark.slow
def test_serve_rolls_up_closed_hours(store: Store, start_sidecar: Any, base: float) -> None:
    """A real sidecar runs the rollup job at start: the closed hours of its stored runs get
    their current generation, and stats (as its route computes them) answer as the base tables."""
    migrate(store, ALL_MIGRATIONS)
    History(store, random.Random(8), base, count=200)
    sidecar = start_sidecar()
    job = next(worker for worker in sidecar.workers if isinstance(worker, HourlyRollup))
    deadline = time.monotonic() + 60
    while job.hours_aggregated == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert job.hours_aggregated >= 5
    for worker in sidecar.workers:  # nothing writes between the two answers compared
        worker.stop()
    assert fresh(store, base) >= 5
    assert_answers_equal(store, base)
