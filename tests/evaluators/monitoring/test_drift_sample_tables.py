"""The rollups' hash samples (migration 119) hold exactly the rollups' rows of the runs under
`SAMPLE_LIMIT`, and drift answers the same when its large windows read them.

On random histories (re-assembled, moved, re-agented, deleted and re-scored runs, with the
evaluator's sweep of deleted runs' scores), the sample tables read with FINAL equal the
rollups read with FINAL under the limit; drift windows whose limits are at most the sample's
read the sample tables and equal the reference loading (drift_reference.py). A store of the
previous schema is filled by the migration, and running its statements again (a restart
before the migration was recorded) changes nothing.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store, parse_store
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.monitoring import drift, sources
from agenttrail.evaluators.monitoring.drift import Baseline, DriftQuery, DriftSettings, load_windows
from agenttrail.evaluators.monitoring.rollups import (
    RUNS_REVISED,
    SAMPLE_LIMIT,
    SCORE_STARTS_OF_REVISED_RUNS,
    SCORES_LATEST_BY_START,
    SCORES_VERSION,
)
from agenttrail.evaluators.scoring.deleted_runs import delete_scores_of_deleted_runs

from . import drift_reference as reference
from .test_drift_sampling import as_lists
from .test_rollups import History

HOUR = 3600
SAMPLE_VERSION = 119
VERSION_ON_SCORES = 122
SCORE_STARTS = 125  # reads 122's runs_revised: follows it
LATEST_ROWS = 127  # reads 122's AgentVersion of scores_by_start: follows it
IN_SAMPLE = f"cityHash64(TraceId, RootSpanId) <= {SAMPLE_LIMIT}"
RUNS = "Agent, Start, TraceId, RootSpanId, AgentVersion, Task, Model, LatencyS, Failure, ToolNames, Version"
SCORES = "Metric, RunStart, TraceId, RootSpanId, EvaluatorVersion, Score, Agent, Task, CreatedAt"


def open_database(chdb_dir: Path, prefix: str) -> Store:
    return Store(parse_store(str(chdb_dir), f"{prefix}_{uuid.uuid4().hex[:8]}"))


def drop(store: Store) -> None:
    store.command(f"DROP DATABASE IF EXISTS `{store.location.database}` SYNC")
    store.close()


@pytest.fixture(scope="module")
def history(chdb_dir: Path) -> Iterator[tuple[Store, float]]:
    """600 runs over 5 hours, changed in 4 inserts, on the whole schema."""
    store = open_database(chdb_dir, "test_sample_tables")
    try:
        migrate(store, ALL_MIGRATIONS)
        base = (time.time() // HOUR - 7) * HOUR
        history = History(store, random.Random(119), base, count=600)
        for _ in range(4):
            history.step(changes=80)
        yield store, base
    finally:
        drop(store)


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def assert_samples_are_the_rollups_under_the_limit(store: Store) -> None:
    for columns, table, key in (
        (RUNS, "runs_by_start", "TraceId, RootSpanId, Start, Agent"),
        (SCORES, "scores_by_start", "TraceId, RootSpanId, Metric, EvaluatorVersion, RunStart"),
    ):
        sampled = store.query(f"SELECT {columns} FROM {table}_sample FINAL ORDER BY {key}")
        whole = store.query(f"SELECT {columns} FROM {table} FINAL WHERE {IN_SAMPLE} ORDER BY {key}")
        everything = store.query(f"SELECT count() FROM {table} FINAL")[0][0]
        assert sampled == whole, table
        assert 0 < len(sampled) < everything / 2, table


def questions(base: float) -> list[DriftQuery]:
    """Windows of about 150-180 runs per agent (sampled at max_samples 30: a fifth or sixth of
    them, under the sample's quarter) beside windows of 60 (half of them: the whole tables)."""
    now = at(base + 5 * HOUR)
    return [
        DriftQuery(recent_s=HOUR, baseline=Baseline(rolling_s=3 * HOUR), now=now),
        DriftQuery(recent_s=5 * HOUR // 2, baseline=Baseline(rolling_s=5 * HOUR // 2), now=now),
        DriftQuery(recent_s=HOUR, baseline=Baseline(version="v1"), now=now),
        DriftQuery(recent_s=3 * HOUR, baseline=Baseline(version="v2", since=at(base), until=now), now=now),
        DriftQuery(recent_s=HOUR, baseline=Baseline(rolling_s=3 * HOUR), agent="alpha", task="t2", now=now),
        DriftQuery(
            recent_s=5 * HOUR // 2,
            baseline=Baseline(rolling_s=5 * HOUR // 2),
            metrics=("trajectory_precision", "latency"),
            now=now,
        ),
    ]


def windows_read(store: Store, query: DriftQuery, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Which tables each window of `query` is read from: per part, the runs table and windows."""
    chosen: list[str] = []
    parts = drift._parts

    def recording(limits: list[list[int]]) -> list[tuple[sources.Tables, tuple[int, ...]]]:
        found = parts(limits)
        chosen.extend(f"{tables.runs}:{part}" for tables, part in found)
        return found

    monkeypatch.setattr(drift, "_parts", recording)
    load_windows(store, query, DriftSettings(max_samples=30))
    monkeypatch.setattr(drift, "_parts", parts)
    return chosen


def assert_windows_are_the_reference(store: Store, base: float) -> None:
    settings = DriftSettings(max_samples=30)
    for query in questions(base):
        fast = load_windows(store, query, settings)
        slow = reference.reference_windows(store, query, settings)
        assert as_lists(fast) == as_lists(slow), query


def test_the_sample_tables_are_the_rollups_under_the_limit(history: tuple[Store, float]) -> None:
    """The views on the rollups copy every row under the limit, deletion markers included, and
    the sweep of deleted runs' scores reaches the scores' sample."""
    store, _ = history
    assert_samples_are_the_rollups_under_the_limit(store)


def test_large_windows_read_the_samples_and_answer_as_the_reference(
    history: tuple[Store, float], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, base = history
    rolling, both, *_ = questions(base)
    assert windows_read(store, rolling, monkeypatch) == ["runs_by_start_sample:(0,)", "runs_by_start:(1,)"]
    assert windows_read(store, both, monkeypatch) == ["runs_by_start_sample:(0, 1)"]
    assert_windows_are_the_reference(store, base)


def test_the_base_tables_have_no_sample(
    history: tuple[Store, float], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, base = history
    monkeypatch.setattr(sources, "SOURCE", sources.BASE_TABLES)
    assert windows_read(store, questions(base)[1], monkeypatch) == ["trajectories:(0, 1)"]
    assert_windows_are_the_reference(store, base)


def test_a_store_of_the_previous_schema_is_filled_and_a_restart_changes_nothing(chdb_dir: Path) -> None:
    """Runs stored before migration 119 are copied by its fill; before the fill the sampled
    windows miss them (so the answer comes from the sample tables); its statements run again,
    as after a crash before the migration was recorded, change no answer."""
    store = open_database(chdb_dir, "test_sample_migration")
    try:
        # 122 carries on these tables: it follows 119 (and 125 and 127 follow 122).
        later = (SAMPLE_VERSION, VERSION_ON_SCORES, SCORE_STARTS, LATEST_ROWS)
        previous = [m for m in ALL_MIGRATIONS if m.version not in later]
        (sample,) = [m for m in ALL_MIGRATIONS if m.version == SAMPLE_VERSION]
        migrate(store, previous)
        store.command(SCORES_VERSION)  # the column today's score rows write (122's first step)
        store.command(RUNS_REVISED)  # the table today's scores query reads (122's, filled there)
        store.command(SCORE_STARTS_OF_REVISED_RUNS)  # today's split-run question's (125's, filled there)
        store.command(SCORES_LATEST_BY_START)  # today's drift reads its latest rows (127's, filled there)
        base = (time.time() // HOUR - 7) * HOUR
        history = History(store, random.Random(118), base, count=600)
        for _ in range(2):
            history.step(changes=80, sweep=False)  # today's sweep deletes from the samples too
        for statement in sample.statements:
            if not statement.startswith("INSERT"):
                store.command(statement)  # the tables and views: a crash before the fill
        query = questions(base)[1]
        settings = DriftSettings(max_samples=30)
        empty = load_windows(store, query, settings)
        assert as_lists(empty) != as_lists(reference.reference_windows(store, query, settings))
        assert migrate(store, ALL_MIGRATIONS) == list(later)
        delete_scores_of_deleted_runs(store)
        assert_samples_are_the_rollups_under_the_limit(store)
        assert_windows_are_the_reference(store, base)
        for _ in range(2):
            history.step(changes=80)  # the views keep the samples up to date
        for statement in sample.statements:
            store.command(statement)
        assert migrate(store, ALL_MIGRATIONS) == []
        assert_samples_are_the_rollups_under_the_limit(store)
        assert_windows_are_the_reference(store, base)
    finally:
        drop(store)
