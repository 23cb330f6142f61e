"""Drift against a version reads the run's version from the scores' rollup rows (migration 122)
and answers as the look-up of every score's run did.

A score row carries the version its run had when the score was written; a run re-assembled
with another version afterwards (no re-score yet) makes it stale. Those runs are in
`runs_revised`, and drift looks them up; on histories where runs change version, scored again
or not, the windows equal the reference loading (drift_reference.py, which looks every run up).
A store migrated from the previous schema gets its scores' versions filled.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.monitoring.drift import Baseline, DriftQuery, DriftSettings, load_windows
from agenttrail.evaluators.monitoring.rollups import SCORES_LATEST_BY_START, SCORES_VERSION

from . import drift_reference as reference
from .test_drift_sample_tables import HOUR, at, drop, open_database
from .test_drift_sample_tables import questions as sample_questions
from .test_drift_sampling import as_lists
from .test_rollups import KINDS, VERSION_KINDS, History

VERSION_ON_SCORES = 122
# Live scores whose run is live, with the version each carries and its run's version now.
_CARRIED = """
SELECT s.TraceId, s.RootSpanId, s.Metric, s.EvaluatorVersion, s.AgentVersion, r.AgentVersion,
    (s.TraceId, s.RootSpanId) IN (SELECT TraceId, RootSpanId FROM runs_revised)
FROM (SELECT * FROM {table} FINAL) AS s
INNER JOIN (SELECT TraceId, RootSpanId, AgentVersion FROM runs_by_start FINAL WHERE IsDeleted = 0) AS r
    ON r.TraceId = s.TraceId AND r.RootSpanId = s.RootSpanId
"""


def questions(base: float) -> list[DriftQuery]:
    """Version baselines, whole and over a period, over the sample tables and the whole ones."""
    now = at(base + 5 * HOUR)
    return [
        *(q for q in sample_questions(base) if q.baseline.version is not None),
        DriftQuery(recent_s=2 * HOUR, baseline=Baseline(version="v2"), now=now),
        DriftQuery(recent_s=HOUR, baseline=Baseline(version="v1"), agent="alpha", now=now),
        DriftQuery(
            recent_s=HOUR,
            baseline=Baseline(version="v1", since=at(base + HOUR), until=at(base + 4 * HOUR)),
            metrics=("trajectory_precision",),
            now=now,
        ),
    ]


def assert_windows_are_the_reference(store: Store, base: float) -> None:
    for settings in (DriftSettings(max_samples=30), DriftSettings()):
        for query in questions(base):
            fast = load_windows(store, query, settings)
            slow = reference.reference_windows(store, query, settings)
            assert as_lists(fast) == as_lists(slow), (query, settings.max_samples)


def carried_versions(store: Store) -> tuple[int, int]:
    """(stale, trusted) live scores of live runs, in both scores rollups: stale ones carry
    another version than their run's (their runs must be named in runs_revised), trusted ones
    are of runs not named there and carry a version, which must be their run's. NULL (the run
    not found under the score's start when it was written: this history's starts are floats,
    which the scores and the runs round apart now and then) is looked up, so either is fine."""
    stale = trusted = 0
    for table in ("scores_by_start", "scores_by_start_sample"):
        for *key, carried, now, revised in store.query(_CARRIED.format(table=table)):
            if not revised and carried is not None:
                assert carried == now, (table, key, carried, now)
                trusted += 1
            elif carried is not None and carried != now:
                stale += 1
    return stale, trusted


def test_runs_re_assembled_with_another_version_after_their_scores_are_looked_up(
    chdb_dir: Path,
) -> None:
    """Runs change version and are scored again or not: the scores of those not scored again
    carry the old version, and the windows still equal the reference's."""
    store = open_database(chdb_dir, "test_version_on_scores")
    try:
        migrate(store, ALL_MIGRATIONS)
        base = (time.time() // HOUR - 7) * HOUR
        history = History(store, random.Random(121), base, count=600, kinds=KINDS + VERSION_KINDS * 3)
        for _ in range(4):
            history.step(changes=80)
            assert_windows_are_the_reference(store, base)
        stale, trusted = carried_versions(store)
        assert stale > 10, stale  # the case is there to get wrong
        assert trusted > 300, trusted
    finally:
        drop(store)


def test_a_store_of_the_previous_schema_gets_its_scores_versions(chdb_dir: Path) -> None:
    """Scores stored before migration 122 carry their run's version after it (its fill), and
    the windows equal the reference's before and after later changes; running its statements
    again (a restart before it was recorded) changes nothing."""
    store = open_database(chdb_dir, "test_version_migration")
    try:
        # 125 reads 122's runs_revised, 127 its AgentVersion of scores_by_start: they follow 122
        migrate(store, [m for m in ALL_MIGRATIONS if m.version not in (VERSION_ON_SCORES, 125, 127)])
        store.command(SCORES_VERSION)  # the column today's score rows write (122's first step)
        store.command(SCORES_LATEST_BY_START)  # the table today's sweep deletes from (127's first)
        base = (time.time() // HOUR - 7) * HOUR
        history = History(store, random.Random(120), base, count=600, kinds=KINDS + VERSION_KINDS * 3)
        for _ in range(2):
            history.step(changes=80)
        assert migrate(store, ALL_MIGRATIONS) == [VERSION_ON_SCORES, 125, 127]
        stale, trusted = carried_versions(store)
        assert stale == 0, stale  # filled with the versions of now
        assert trusted > 300, trusted
        assert_windows_are_the_reference(store, base)
        for _ in range(2):
            history.step(changes=80)
        (migration,) = [m for m in ALL_MIGRATIONS if m.version == VERSION_ON_SCORES]
        for statement in migration.statements:
            store.command(statement)
        assert migrate(store, ALL_MIGRATIONS) == []
        stale, trusted = carried_versions(store)
        assert stale > 0, stale
        assert trusted > 300, trusted
        assert_windows_are_the_reference(store, base)
    finally:
        drop(store)
