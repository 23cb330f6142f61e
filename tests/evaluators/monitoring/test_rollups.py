"""The run-level rollups answer exactly as the base tables do.

Stats, drift, the report and the agent overview run twice on the same store: over the rollups
(`runs_by_start`, `scores_by_start`) and over `trajectories` and `scores` themselves, the query
path they replaced (`sources.BASE_TABLES`). Seeded random histories re-assemble runs in place,
move their start time or agent, delete them (with the evaluator's sweep of their scores),
bring deleted runs back, and re-score them with the same or another evaluator version, over
several inserts; the answers must be equal before and after the tables merge.

"Equal": counts, sums, tool tallies and latency percentiles exactly (quantilesExactInclusive
reads the same values in both paths, so the percentiles are the same numbers); means and
standard deviations of floats to 1e-12 relative, since ClickHouse adds partial sums in the
order its threads finish (the base query alone varies that much from run to run).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from trajectory_rows import insert_trajectories

from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.console.overview import agent_overview
from agenttrail.evaluators.monitoring import sources
from agenttrail.evaluators.monitoring.drift import Baseline, DriftQuery, analyse_drift
from agenttrail.evaluators.monitoring.report_data import ReportQuery, report_rows
from agenttrail.evaluators.monitoring.rollups import SCORES_VERSION
from agenttrail.evaluators.monitoring.stats import StatsQuery, query_stats
from agenttrail.evaluators.scoring.deleted_runs import delete_scores_of_deleted_runs

from .synthetic import Run, score_rows, store_runs, trajectory_row

HOUR = 3600
KINDS = ("in_place", "moved", "moved_unscored", "agent", "delete", "rescore", "other_evaluator")
# Re-assembled with another agent version, scored again or not (its scores then carry the old one).
VERSION_KINDS = ("version", "version_unscored")
TOOLS = ("search", "lookup", "refund")
EXACT_KEYS = ("latency_p50_s", "latency_p95_s", "latency_p99_s", "p50", "p95", "p99")


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


@contextmanager
def reading(tables: sources.Tables) -> Iterator[None]:
    saved = sources.SOURCE
    sources.SOURCE = tables
    try:
        yield
    finally:
        sources.SOURCE = saved


def both(function: Callable[[], Any]) -> tuple[Any, Any]:
    """(answer over the rollups, answer over the base tables)."""
    with reading(sources.ROLLUPS):
        rolled = function()
    with reading(sources.BASE_TABLES):
        base = function()
    return rolled, base


def assert_same(rolled: Any, base: Any, path: str = "") -> None:
    assert type(rolled) is type(base), f"{path}: {rolled!r} != {base!r}"
    if isinstance(base, dict):
        assert set(rolled) == set(base), f"{path}: keys {sorted(rolled)} != {sorted(base)}"
        for key in base:
            assert_same(rolled[key], base[key], f"{path}.{key}")
    elif isinstance(base, list | tuple):
        assert len(rolled) == len(base), f"{path}: {len(rolled)} items != {len(base)}"
        for index, (one, other) in enumerate(zip(rolled, base, strict=True)):
            assert_same(one, other, f"{path}[{index}]")
    elif isinstance(base, float) and not path.endswith(EXACT_KEYS):
        assert math.isclose(rolled, base, rel_tol=1e-12, abs_tol=1e-12), f"{path}: {rolled} != {base}"
    else:
        assert rolled == base, f"{path}: {rolled!r} != {base!r}"


def random_run(rng: random.Random, base: float) -> Run:
    scores: dict[str, float | None] = {"trajectory_exact_match": float(rng.random() < 0.7)}
    if rng.random() < 0.8:
        scores["trajectory_precision"] = rng.random() if rng.random() < 0.95 else None
    return Run(
        start=base + rng.uniform(0, 5 * HOUR),
        agent=rng.choice(["alpha", "beta"]),
        task=rng.choice(["t1", "t2", "t3"]),
        model=rng.choice(["m1", "m2"]),
        version=rng.choice(["v1", "v2"]),
        latency_s=rng.lognormvariate(0, 0.7),
        failure=rng.random() < 0.15,
        tools=[
            (rng.choice(TOOLS), "error" if rng.random() < 0.1 else "ok") for _ in range(rng.randint(0, 4))
        ],
        input_tokens=rng.randint(10, 500),
        output_tokens=rng.randint(5, 100),
        scores=scores,
    )


class History:
    """Runs as they were last stored, with each run's version and evaluator versions scored.

    A run moved without being scored again keeps scores under its earlier start (and `runs`
    holds it as moved): its scores and its run lie in different hours, as when the scorer
    read a run before its root span arrived."""

    def __init__(
        self, store: Store, rng: random.Random, base: float, count: int, kinds: tuple[str, ...] = KINDS
    ) -> None:
        self.store, self.rng, self.base, self.kinds = store, rng, base, kinds
        self.runs = [random_run(rng, base) for _ in range(count)]
        store_runs(store, self.runs)
        self.version = {run.trace_id: 1 for run in self.runs}
        self.deleted: set[str] = set()
        self.evaluators = {run.trace_id: {"ev1"} for run in self.runs}
        self.clock = base + 6 * HOUR  # CreatedAt of re-scores, later than every first score

    def scores(self, run: Run, evaluators: set[str]) -> list[tuple[Any, ...]]:
        self.clock += 1
        return [
            row
            for evaluator in sorted(evaluators)
            for row in score_rows(
                run, evaluator_version=evaluator, created=self.clock, revision=self.version[run.trace_id]
            )
        ]

    def step(self, changes: int, *, sweep: bool = True) -> None:
        """One insert of trajectories and one of scores, changing `changes` runs at random, then
        the evaluator's sweep of deleted runs' scores (`sweep`)."""
        trajectories: list[tuple[Any, ...]] = []
        scores: list[tuple[Any, ...]] = []
        for index in self.rng.sample(range(len(self.runs)), changes):
            run = self.runs[index]
            trace = run.trace_id
            if trace in self.deleted:
                self.deleted.discard(trace)  # a deleted run comes back
                kind = "revive"
            else:
                kind = self.rng.choice(self.kinds)
            if kind == "rescore":
                changed = replace(run, scores={m: self.rng.random() for m in run.scores})
                scores += self.scores(changed, self.evaluators[trace])
            elif kind == "other_evaluator":  # a new evaluator version re-scores the run
                changed = replace(run, scores={m: self.rng.random() for m in run.scores})
                self.evaluators[trace].add("ev2")
                scores += self.scores(changed, {"ev2"})
            else:
                self.version[trace] += 1
                if kind == "delete":
                    self.deleted.add(trace)
                    trajectories.append(trajectory_row(run, version=self.version[trace], deleted=True))
                    continue
                changed = replace(
                    run,
                    latency_s=self.rng.lognormvariate(0, 0.7),
                    failure=self.rng.random() < 0.3,
                    tools=[(self.rng.choice(TOOLS), "ok") for _ in range(self.rng.randint(0, 3))],
                )
                if kind.startswith("moved"):  # often into another bucket: an incomplete run's root arrived
                    changed = replace(changed, start=run.start + self.rng.uniform(-1800, 1800))
                elif kind == "agent":  # spans first assembled without their agent span
                    changed = replace(changed, agent="beta" if run.agent == "alpha" else "alpha")
                elif kind.startswith("version"):
                    changed = replace(changed, version="v2" if run.version == "v1" else "v1")
                trajectories.append(trajectory_row(changed, version=self.version[trace]))
                if not kind.endswith("_unscored"):  # else its scores keep what they were scored at
                    scores += self.scores(changed, self.evaluators[trace])
            self.runs[index] = changed
        insert_trajectories(self.store, trajectories)
        if scores:
            self.store.insert("scores", scores)
        if sweep:
            delete_scores_of_deleted_runs(self.store)


def stats_queries(base: float) -> list[StatsQuery]:
    until = base + 5 * HOUR + 1800
    return [
        StatsQuery(since=at(base), until=at(until), bucket_s=HOUR),
        StatsQuery(since=at(base - HOUR), until=at(until + HOUR), bucket_s=300, by=("model", "task")),
        StatsQuery(since=at(base + 1234.5), until=at(base + 3 * HOUR + 17), bucket_s=60, agent="alpha"),
        StatsQuery(since=at(base), until=at(until), bucket_s=86_400, by=("agent_version",)),
        StatsQuery(
            since=at(base), until=at(until), bucket_s=1800, task="t2", metrics=("trajectory_precision",)
        ),
    ]


def assert_all_equal(store: Store, base: float) -> None:
    for query in stats_queries(base):
        rolled, from_base = both(lambda q=query: query_stats(store, q))
        assert from_base, query
        assert_same(rolled, from_base, f"stats {query}")
    now = at(base + 5 * HOUR)
    for drift in (
        DriftQuery(recent_s=HOUR, baseline=Baseline(rolling_s=3 * HOUR), now=now),
        DriftQuery(recent_s=2 * HOUR, baseline=Baseline(version="v1"), now=now),
        DriftQuery(
            recent_s=2 * HOUR, baseline=Baseline(rolling_s=2 * HOUR), now=now, agent="beta", task="t1"
        ),
    ):
        rolled, from_base = both(lambda d=drift: [r.to_json() for r in analyse_drift(store, d)])
        assert from_base, drift
        assert_same(rolled, from_base, f"drift {drift}")
    for report in (
        ReportQuery(since=at(base), until=at(base + 6 * HOUR)),
        ReportQuery(since=at(base + 600), until=at(base + 4 * HOUR), agent="alpha", bucket_s=900),
    ):
        rolled, from_base = both(lambda r=report: report_rows(store, r))
        assert_same(rolled, from_base, f"report {report}")
    since, until = at(base).isoformat(), at(base + 6 * HOUR).isoformat()
    for agent in ("alpha", "beta"):

        def overview(name: str = agent) -> dict[str, Any]:
            found = agent_overview(store, name, since=since, until=until)
            charts = [
                [(series.label, list(series.points)) for series in chart.series] for chart in found.charts
            ]
            releases = [(marker.at, marker.label) for marker in found.releases]
            return {"charts": charts, "releases": releases, "tools": found.tools, "worst": found.worst}

        rolled, from_base = both(overview)
        assert_same(rolled, from_base, f"overview {agent}")


@pytest.mark.parametrize("seed", [1, 2])
def test_rollups_answer_as_the_base_tables(rollup_store: Store, seed: int) -> None:
    """Over re-assembled, moved, re-agented, deleted, revived and re-scored runs, in several
    inserts, every monitoring answer from the rollups equals the base tables' answer, before and
    after the tables merge; and the rollups hold one live row per live run."""
    base = (time.time() // HOUR - 7) * HOUR
    history = History(rollup_store, random.Random(seed), base, count=400)
    for _ in range(4):
        history.step(changes=60)
    assert history.deleted, "the history deletes some runs"
    assert_all_equal(rollup_store, base)
    live = rollup_store.query("SELECT count() FROM trajectories FINAL WHERE IsDeleted = 0")[0][0]
    assert rollup_store.query("SELECT count() FROM runs_by_start FINAL WHERE IsDeleted = 0")[0][0] == live
    # Migration 127's latest rows hold the keys `scores_by_start` holds: the sweep deletes there too.
    keys = "SELECT DISTINCT Metric, RunStart, TraceId, RootSpanId FROM {} ORDER BY ALL"
    stored = rollup_store.query(keys.format("scores_by_start"))
    assert rollup_store.query(keys.format("scores_latest_by_start")) == stored
    for table in ("trajectories", "scores", "runs_by_start", "scores_by_start"):
        rollup_store.command(f"OPTIMIZE TABLE {table} FINAL")
    assert_all_equal(rollup_store, base)


def test_migration_fills_the_rollups_of_an_existing_store(store: Store) -> None:
    """A store made before the rollups gets them filled with its latest live runs and scores when
    it is upgraded, and answers as before; later inserts keep them up to date."""
    # without 116, nor 119, 121, 122, 124, 125, 126 and 127 (the rollups' hash samples, their views'
    # new queries, the scores' run version, the revised runs' score starts, the versions' days, the
    # scores' latest rows: all on the rollups)
    on_the_rollups = (116, 119, 121, 122, 124, 125, 126, 127)
    migrate(store, tuple(m for m in ALL_MIGRATIONS if m.version not in on_the_rollups))
    store.command(SCORES_VERSION)  # the column today's score rows write (122's first step)
    base = (time.time() // HOUR - 7) * HOUR
    history = History(store, random.Random(3), base, count=200)
    history.step(changes=50, sweep=False)  # the sweep of this version deletes from the rollup too
    assert migrate(store, ALL_MIGRATIONS) == list(on_the_rollups)
    assert_all_equal(store, base)
    history.step(changes=50)
    assert_all_equal(store, base)


def test_first_assemblies_and_scores_look_nothing_up(rollup_store: Store) -> None:
    """Runs stored for the first time are copied as they are: the views that look up earlier
    rows write nothing for them (their lookup is what re-assembly alone pays)."""
    base = (time.time() // HOUR - 3) * HOUR
    store_runs(rollup_store, [random_run(random.Random(4), base) for _ in range(50)])
    assert rollup_store.query("SELECT count() FROM runs_by_start WHERE IsDeleted = 1")[0][0] == 0
    assert rollup_store.query("SELECT count() FROM scores_by_start WHERE IsDeleted = 1")[0][0] == 0
    assert rollup_store.query("SELECT count() FROM runs_by_start")[0][0] == 50


def test_two_versions_of_a_run_in_one_insert(rollup_store: Store) -> None:
    """One insert holding two versions of a run (a server that coalesces inserts, async_insert):
    the views that mark a run's earlier keys see its earlier version in the same block too, so
    the rollups keep one live row per live run and answer as the base tables."""
    base = (time.time() // HOUR - 7) * HOUR
    rng = random.Random(5)
    others = [random_run(rng, base) for _ in range(100)]  # so that every query has runs
    first, moved, twice, deleted, back, scored = (random_run(rng, base) for _ in range(6))
    store_runs(rollup_store, [*others, moved, twice, deleted, back, scored])
    later = {"start": base + 5 * HOUR + 60}
    rows = [
        # first assembly and a re-assembly that moved it, together
        trajectory_row(first),
        trajectory_row(replace(first, start=first.start + 900), version=2),
        # moved, then moved again
        trajectory_row(replace(moved, start=moved.start + 600), version=2),
        trajectory_row(replace(moved, **later), version=3),
        # moved, then moved back to where it was
        trajectory_row(replace(twice, start=twice.start + 600), version=2),
        trajectory_row(replace(twice, latency_s=9.0), version=3),
        # moved, then deleted
        trajectory_row(replace(deleted, agent="beta" if deleted.agent == "alpha" else "alpha"), version=2),
        trajectory_row(deleted, version=3, deleted=True),
        # deleted, then back under another start
        trajectory_row(back, version=2, deleted=True),
        trajectory_row(replace(back, start=back.start + 300), version=3),
    ]
    insert_trajectories(rollup_store, rows)
    # the scores of two revisions of a run whose start moved, in one insert
    scored_moved, scored_later = replace(scored, start=scored.start + 1200), replace(scored, **later)
    rollup_store.insert(
        "scores",
        [
            *score_rows(scored_moved, created=base + 7 * HOUR, revision=2),
            *score_rows(scored_later, created=base + 7 * HOUR + 1, revision=3),
        ],
    )
    insert_trajectories(rollup_store, [trajectory_row(scored_later, version=3)])
    delete_scores_of_deleted_runs(rollup_store)
    live = rollup_store.query("SELECT count() FROM trajectories FINAL WHERE IsDeleted = 0")[0][0]
    assert live == 105
    assert rollup_store.query("SELECT count() FROM runs_by_start FINAL WHERE IsDeleted = 0")[0][0] == live
    assert_all_equal(rollup_store, base)
