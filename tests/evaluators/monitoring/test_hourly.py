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
from datetime import UTC, datetime
from typing import Any

import pytest

from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.monitoring import hourly
from agenttrail.evaluators.monitoring.hourly import HourlyRollup, fresh_hours
from agenttrail.evaluators.monitoring.report_data import ReportQuery, report_rows
from agenttrail.evaluators.monitoring.stats import StatsQuery, query_stats

from .test_rollups import HOUR, History, assert_same, at, both


def queries(base: float) -> list[StatsQuery | ReportQuery]:
    """Whole-hour buckets (what the hourly rows can answer) with partial hours at the edges,
    filters, groups (model and version groups join scores to runs) and metric subsets."""
    until = base + 5 * HOUR + 1800
    return [
        StatsQuery(since=at(base), until=at(until), bucket_s=HOUR),
        StatsQuery(since=at(base - 7 * HOUR), until=at(until + HOUR), bucket_s=HOUR, by=("task",)),
        StatsQuery(since=at(base + 1234.5), until=at(base + 4 * HOUR + 17), bucket_s=HOUR, agent="alpha"),
        StatsQuery(since=at(base), until=at(until), bucket_s=86_400, by=("agent_version", "model")),
        StatsQuery(since=at(base + 600), until=at(until), bucket_s=2 * HOUR, task="t2"),
        StatsQuery(since=at(base), until=at(until), bucket_s=HOUR, metrics=("trajectory_precision",)),
        ReportQuery(since=at(base), until=at(base + 6 * HOUR)),
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


@pytest.mark.parametrize("seed", [1, 2])
def test_hourly_rollups_answer_as_the_base_tables(rollup_store: Store, seed: int) -> None:
    store = rollup_store
    base = (time.time() // HOUR - 7) * HOUR
    history = History(store, random.Random(seed), base, count=400)
    job = HourlyRollup(lambda: store)
    assert fresh(store, base) == 0
    assert job.run_once() >= 5, "the first cycle back-fills every closed hour with runs"
    assert job.run_once() == 0, "nothing changed: nothing to aggregate"
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


def test_a_change_between_fingerprint_and_aggregation_is_not_trusted(rollup_store: Store) -> None:
    """A run stored while an hour is being aggregated (after its fingerprint was taken) leaves
    the hour pointing at a fingerprint its rows no longer have: read raw, rolled up again."""
    store = rollup_store
    base = (time.time() // HOUR - 7) * HOUR
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


def test_unused_generations_are_deleted_a_cycle_after_being_seen(
    rollup_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Superseded generations (and a failed cycle's) leave the hourly tables, but only once
    seen unused by an earlier cycle, so a query still reading them keeps its rows."""
    store = rollup_store
    base = (time.time() // HOUR - 7) * HOUR
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


def test_migration_117_on_an_existing_store(store: Store) -> None:
    """A store made before the hourly rollups migrates, answers as before, and the job back-fills it."""
    migrate(store, tuple(m for m in ALL_MIGRATIONS if m.version != 117))
    base = (time.time() // HOUR - 7) * HOUR
    History(store, random.Random(7), base, count=200).step(changes=20)
    assert migrate(store, ALL_MIGRATIONS) == [117]
    assert_answers_equal(store, base)
    HourlyRollup(lambda: store).run_once()
    assert fresh(store, base) >= 5
    assert_answers_equal(store, base)


def test_hours_are_utc_hours() -> None:
    assert hourly.whole_hours(3600.5, 4 * 3600.0) == (7200, 14400)
    assert hourly.whole_hours(3600.0, 3600 * 2 - 1) == (3600, 3600)
    assert datetime.fromtimestamp(hourly.whole_hours(0.1, 86_400)[0], UTC).minute == 0


@pytest.mark.slow
def test_serve_rolls_up_closed_hours(store: Store, start_sidecar: Any) -> None:
    """A real sidecar runs the rollup job at start: the closed hours of its stored runs get
    their current generation, and stats (as its route computes them) answer as the base tables."""
    migrate(store, ALL_MIGRATIONS)
    base = (time.time() // HOUR - 7) * HOUR
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
