"""Drift's window counts from the hourly rollups (drift_counts.py) are the run-by-run counts.

The counts set the samples' hash limits, so they must be exact. On a random history (moved,
re-agented, deleted and revived runs) the counts equal a count of the runs themselves before
any hour is rolled up, with every hour fresh, with some hours changed since their rollup
(stale), with some hours not rolled up yet, and for windows whose edges cut hours; and the
fresh uncut hours are the ones counted from `runs_by_hour`. The windows' parameters and a run's
window are drift's own (`drift.window_params`, `drift.run_window`, what `load_windows` passes),
so a change there reaches these counts; the reference counts by the windows alone.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store, parse_store
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.monitoring import drift_counts, hourly, sources
from agenttrail.evaluators.monitoring.drift import Baseline, DriftQuery, run_window, window_params
from agenttrail.evaluators.monitoring.hourly import HourlyRollup

from .test_drift_sampling import at, questions
from .test_rollups import HOUR, History, reading


def counted(store: Store, query: DriftQuery) -> list[tuple[str, int, int]]:
    filters, params = window_params(query)
    return sorted(drift_counts.window_counts(store, filters, params, run_window(query)))


def reference(store: Store, query: DriftQuery) -> list[tuple[str, int, int]]:
    """Each window's live runs counted one by one from the base tables (latest version), by the
    windows alone: not through the span `window_params` gives, which the counts rely on."""
    filters, params = window_params(query)
    where = "".join(f" AND {condition}" for condition in filters)
    sql = (
        f"SELECT Agent, {run_window(query)('Start')} AS w, count() FROM trajectories FINAL "
        f"WHERE IsDeleted = 0{where} AND w >= 0 GROUP BY Agent, w"
    )
    return sorted((agent, int(w), int(n)) for agent, w, n in store.query(sql, params))


def rolled_hours(store: Store, query: DriftQuery) -> list[int]:
    """The hours counted from runs_by_hour."""
    _, params = window_params(query)
    plan = drift_counts._plan(store, params, (float(params["span_start"]), float(params["span_end"])))
    return plan.hours if plan else []


def fixed_questions(base: float) -> list[DriftQuery]:
    """Edges on hours and inside them, rolling, fixed and version baselines, filters."""
    end = base + 5 * HOUR
    return [
        DriftQuery(recent_s=HOUR, baseline=Baseline(rolling_s=4 * HOUR), now=at(end)),
        DriftQuery(recent_s=HOUR + 600, baseline=Baseline(rolling_s=3 * HOUR - 17), now=at(end - 1234.5)),
        DriftQuery(recent_s=2 * HOUR, baseline=Baseline(version="v1"), now=at(end + 1800)),
        DriftQuery(
            recent_s=HOUR,
            baseline=Baseline(version="v2", since=at(base + 900), until=at(base + 3 * HOUR)),
            now=at(end),
            agent="alpha",
        ),
        DriftQuery(
            recent_s=HOUR,
            baseline=Baseline(since=at(base - HOUR), until=at(base + 2 * HOUR + 5)),
            now=at(end - 60),
            task="t2",
        ),
    ]


def assert_counts_equal(store: Store, base: float) -> None:
    for query in fixed_questions(base):
        expected = reference(store, query)
        assert expected, query
        assert counted(store, query) == expected, query


def test_counts_over_fresh_stale_unrolled_and_cut_hours(rollup_store: Store) -> None:
    store = rollup_store
    base = (time.time() // HOUR - 7) * HOUR
    history = History(store, random.Random(3), base, count=400)
    assert_counts_equal(store, base)  # no hour rolled up: every run counted one by one
    job = HourlyRollup(lambda: store, hours_per_cycle=2)
    job.run_once()  # some hours not rolled up yet
    assert 0 < len(rolled_hours(store, fixed_questions(base)[0])) < 5
    assert_counts_equal(store, base)
    while job.run_once():
        pass
    rolling = fixed_questions(base)[0]  # edges on hours: all 5 hours with runs from the rollups
    assert rolled_hours(store, rolling) == [int(base + h * HOUR) for h in range(5)]
    cut = fixed_questions(base)[1]  # edges inside hours: those hours counted run by run
    _, params = window_params(cut)
    edges = [float(params[name]) // HOUR * HOUR for name in ("baseline_start", "recent_start", "recent_end")]
    assert rolled_hours(store, cut) == [int(base + HOUR), int(base + 2 * HOUR)]
    assert not set(rolled_hours(store, cut)) & set(edges)
    assert_counts_equal(store, base)
    for _ in range(2):
        history.step(changes=40)  # hours changed since their rollup: counted run by run
        assert len(rolled_hours(store, rolling)) < 5
        assert_counts_equal(store, base)
    assert history.deleted
    job.run_once()
    assert_counts_equal(store, base)


def test_an_hour_whose_scores_changed_still_counts_from_the_rollup(rollup_store: Store) -> None:
    """Only the runs' fingerprint decides: runs_by_hour is aggregated from the runs alone."""
    store = rollup_store
    base = (time.time() // HOUR - 7) * HOUR
    History(store, random.Random(4), base, count=100)
    HourlyRollup(lambda: store).run_once()
    query = fixed_questions(base)[0]
    before = rolled_hours(store, query)
    store.command("ALTER TABLE scores_by_start UPDATE Score = 0.5 WHERE 1 SETTINGS mutations_sync = 1")
    assert len(hourly.fresh_hours(store, int(base), int(base + 5 * HOUR))) < len(before)
    assert rolled_hours(store, query) == before
    assert_counts_equal(store, base)


@pytest.fixture(scope="module")
def rolled_history(chdb_dir: Path) -> Iterator[tuple[Store, float]]:
    """A history rolled up part way, then changed: fresh, stale and unrolled hours."""
    name = f"test_drift_counts_{random.randrange(16**8):08x}"
    store = Store(parse_store(str(chdb_dir), name))
    try:
        migrate(store, ALL_MIGRATIONS)
        base = (time.time() // HOUR - 7) * HOUR
        history = History(store, random.Random(15), base, count=400)
        HourlyRollup(lambda: store, hours_per_cycle=4).run_once()
        history.step(changes=30)
        yield store, base
    finally:
        store.command(f"DROP DATABASE IF EXISTS `{name}` SYNC")
        store.close()


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_questions_count_as_the_runs(rolled_history: tuple[Store, float], data: st.DataObject) -> None:
    store, base = rolled_history
    query = data.draw(questions(base))
    with reading(sources.ROLLUPS):
        assert counted(store, query) == reference(store, query)


def test_the_base_tables_count_run_by_run(rollup_store: Store) -> None:
    """Over the base tables (the equivalence tests) no hour comes from the rollups."""
    store = rollup_store
    base = (time.time() // HOUR - 7) * HOUR
    History(store, random.Random(6), base, count=50)
    HourlyRollup(lambda: store).run_once()
    query = DriftQuery(recent_s=HOUR, baseline=Baseline(rolling_s=4 * HOUR), now=at(base + 5 * HOUR))
    with reading(sources.BASE_TABLES):
        assert rolled_hours(store, query) == []
        assert counted(store, query) == reference(store, query)
    assert rolled_hours(store, query), "over the rollups the hours come from runs_by_hour"
