"""Metrics over time computed in ClickHouse, checked against Python on seeded synthetic runs."""

from __future__ import annotations

import random
import statistics
import time
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from trajectory_rows import insert_trajectories

from agenttrail.collector.queries import QueryError
from agenttrail.collector.schema import migrate
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.monitoring.hourly import HourlyRollup
from agenttrail.evaluators.monitoring.report_data import ReportQuery, report_rows
from agenttrail.evaluators.monitoring.stats import StatsQuery, query_stats

from .synthetic import Run, score_rows, store_runs, trajectory_row

HOUR = 3600
TOOLS = ("search", "lookup", "refund")


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def synthetic_runs(seed: int, base: float, count: int = 400) -> list[Run]:
    rng = random.Random(seed)
    runs = []
    for _ in range(count):
        scores: dict[str, float | None] = {}
        if rng.random() < 0.7:  # the rest have no precision score at all: missing, not 0
            scores["trajectory_precision"] = rng.random()
        if rng.random() < 0.9:
            scores["trajectory_exact_match"] = float(rng.random() < 0.8)
        runs.append(
            Run(
                start=base + rng.uniform(0, 3 * HOUR),
                agent=rng.choice(["alpha", "beta"]),
                model=rng.choice(["m1", "m2"]),
                latency_s=rng.lognormvariate(0, 0.7),
                failure=rng.random() < 0.12,
                tools=[
                    (rng.choice(TOOLS), "error" if rng.random() < 0.1 else "ok")
                    for _ in range(rng.randint(0, 4))
                ],
                input_tokens=rng.randint(10, 500),
                output_tokens=rng.randint(5, 100),
                scores=scores,
            )
        )
    return runs


def expected_stats(runs: list[Run], bucket_s: int, key: Any) -> dict[tuple[Any, ...], dict[str, Any]]:
    groups: dict[tuple[Any, ...], list[Run]] = defaultdict(list)
    for run in runs:
        groups[(*key(run), int(run.start // bucket_s))].append(run)
    expected = {}
    for group_key, members in groups.items():
        latencies = [run.latency_s for run in members]
        tools: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for run in members:
            for name, status in run.tools:
                tools[name][0] += 1
                tools[name][1] += status == "error"
        metrics = {}
        for metric in ("trajectory_precision", "trajectory_exact_match"):
            values = [v for run in members if (v := run.scores.get(metric)) is not None]
            if values:
                std = statistics.stdev(values) if len(values) > 1 else 0.0
                metrics[metric] = (len(values), statistics.fmean(values), std)
        expected[group_key] = {
            "runs": len(members),
            "failures": sum(run.failure for run in members),
            "latency": [float(np.percentile(latencies, q)) for q in (50, 95, 99)],
            "tokens": (sum(r.input_tokens for r in members), sum(r.output_tokens for r in members)),
            "tools": {name: tuple(counts) for name, counts in tools.items()},
            "metrics": metrics,
        }
    return expected


def assert_matches(
    rows: list[dict[str, Any]],
    expected: dict[tuple[Any, ...], dict[str, Any]],
    bucket_s: int,
    groups: tuple[str, ...],
) -> None:
    assert len(rows) == len(expected)
    for row in rows:
        bucket = (
            int(datetime.fromisoformat(row["bucket_start"].replace("Z", "+00:00")).timestamp()) // bucket_s
        )
        want = expected[(row["agent"], *(row[g] for g in groups), bucket)]
        assert row["runs"] == want["runs"]
        assert row["failures"] == want["failures"]
        assert row["failure_rate"] == pytest.approx(want["failures"] / want["runs"])
        got = [row["latency_p50_s"], row["latency_p95_s"], row["latency_p99_s"]]
        assert got == pytest.approx(want["latency"], rel=1e-9)
        assert (row["input_tokens"], row["output_tokens"]) == want["tokens"]
        assert {n: (t["calls"], t["errors"]) for n, t in row["tools"].items()} == want["tools"]
        got_metrics = {
            name: (m["count"], m["mean"], m["std"]) for name, m in row["metrics"].items() if m["count"]
        }
        assert set(got_metrics) == set(want["metrics"])
        for name, (count, mean, std) in want["metrics"].items():
            assert got_metrics[name][0] == count
            assert got_metrics[name][1:] == pytest.approx((mean, std), rel=1e-9, abs=1e-12)


@pytest.fixture
def stats_store(store: Any) -> Any:
    migrate(store, ALL_MIGRATIONS)
    return store


def test_stats_per_agent_and_hour_match_python(stats_store: Any) -> None:
    """Counts, failure rate, exact latency percentiles, tool errors, tokens and score
    count/mean/sample std per agent and hour equal a Python computation; missing scores are missing."""
    base = (time.time() // HOUR - 4) * HOUR
    runs = synthetic_runs(seed=11, base=base)
    store_runs(stats_store, runs)
    rows = query_stats(stats_store, StatsQuery(since=at(base), until=at(base + 4 * HOUR), bucket_s=HOUR))
    assert_matches(rows, expected_stats(runs, HOUR, lambda r: (r.agent,)), HOUR, ())
    assert "latency" not in rows[0]["metrics"]
    assert "failure" not in rows[0]["metrics"]


def test_stats_grouped_by_model_and_task_with_5m_buckets(stats_store: Any) -> None:
    """--by model,task groups runs and their scores (joined to the run's model) per 5-minute bucket."""
    base = (time.time() // HOUR - 4) * HOUR
    runs = synthetic_runs(seed=12, base=base, count=300)
    store_runs(stats_store, runs)
    query = StatsQuery(since=at(base), until=at(base + 4 * HOUR), bucket_s=300, by=("model", "task"))
    rows = query_stats(stats_store, query)
    assert_matches(
        rows, expected_stats(runs, 300, lambda r: (r.agent, r.model, r.task)), 300, ("model", "task")
    )


def test_latest_version_counts_once_and_deleted_runs_not_at_all(stats_store: Any) -> None:
    """A re-assembled run counts once with its newest values, a deleted run not at all, and a
    run scored by two evaluator versions counts its metric once (the newest score)."""
    base = (time.time() // HOUR - 2) * HOUR
    runs = [
        Run(start=base + 60 * i, latency_s=1.0, scores={"trajectory_precision": 0.5} if i != 1 else {})
        for i in range(4)
    ]
    store_runs(stats_store, runs)
    changed = Run(**{**runs[0].__dict__, "latency_s": 9.0, "failure": True})
    insert_trajectories(
        stats_store, [trajectory_row(changed, version=2), trajectory_row(runs[1], version=2, deleted=True)]
    )
    rescored = Run(**{**runs[2].__dict__, "scores": {"trajectory_precision": 1.0}})
    stats_store.insert("scores", score_rows(rescored, evaluator_version="ev2", created=base + 7200))
    [row] = query_stats(stats_store, StatsQuery(since=at(base), until=at(base + HOUR), bucket_s=HOUR))
    assert row["runs"] == 3
    assert row["failures"] == 1
    assert row["latency_p99_s"] == pytest.approx(np.percentile([9.0, 1.0, 1.0], 99))
    precision = row["metrics"]["trajectory_precision"]
    assert precision["count"] == 3
    assert precision["mean"] == pytest.approx((0.5 + 1.0 + 0.5) / 3)


def moved_out_between_evaluator_versions(store: Any, base: float, rolled: bool) -> Run:
    """Three runs in [base, base + 1 h) scored by evaluator version ev1 (precision 0.6, 0.5,
    0.1); ev2 re-scores the second (0.9) and the third, which moved to base + 1 h 10 min first
    (its root span arrived; 0.95 there). The third's latest score is outside the hour, its
    ev1 score left under its old start. `rolled`: the hourly rollups hold the hours. Returns
    the first run."""
    kept, rescored, moved = (
        Run(start=base + 60 * (i + 1), scores={"trajectory_precision": score})
        for i, score in enumerate((0.6, 0.5, 0.1))
    )
    store_runs(store, [kept, rescored, moved])
    moved_later = Run(
        **{**moved.__dict__, "start": base + HOUR + 600, "scores": {"trajectory_precision": 0.95}}
    )
    insert_trajectories(store, [trajectory_row(moved_later, version=2)])
    rescored = Run(**{**rescored.__dict__, "scores": {"trajectory_precision": 0.9}})
    store.insert(
        "scores",
        [
            *score_rows(rescored, evaluator_version="ev2", created=base + 2 * HOUR),
            *score_rows(moved_later, evaluator_version="ev2", created=base + 2 * HOUR, revision=2),
        ],
    )
    if rolled:
        assert HourlyRollup(lambda: store).run_once() > 0
    return kept


@pytest.mark.parametrize("rolled", [False, True], ids=["raw", "hourly"])
def test_a_run_moved_out_of_the_range_between_evaluator_versions_leaves_with_its_score(
    stats_store: Any, rolled: bool
) -> None:
    """Stats of a range hold the latest score of each run in it, whichever version wrote it: a
    run moved out between two versions' scores takes its score along (picking the latest among
    the range's rows kept the first version's under its old start)."""
    base = (time.time() // HOUR - 3) * HOUR
    moved_out_between_evaluator_versions(stats_store, base, rolled)
    [row] = query_stats(stats_store, StatsQuery(since=at(base), until=at(base + HOUR), bucket_s=HOUR))
    assert row["runs"] == 2
    assert row["metrics"]["trajectory_precision"] == {
        "count": 2,
        "mean": pytest.approx((0.6 + 0.9) / 2),
        "std": pytest.approx(statistics.stdev([0.6, 0.9])),
    }
    [later] = query_stats(
        stats_store, StatsQuery(since=at(base + HOUR), until=at(base + 2 * HOUR), bucket_s=HOUR)
    )
    assert later["metrics"]["trajectory_precision"] == {"count": 1, "mean": pytest.approx(0.95), "std": 0.0}


@pytest.mark.parametrize("rolled", [False, True], ids=["raw", "hourly"])
def test_the_reports_lowest_scored_runs_skip_a_run_moved_out_between_evaluator_versions(
    stats_store: Any, rolled: bool
) -> None:
    """The moved run's old score (0.1, the lowest) is not its latest: the report's lowest-scored
    run of the hour is the next one, not none (the old score was picked, then its run not found
    in the hour)."""
    base = (time.time() // HOUR - 3) * HOUR
    kept = moved_out_between_evaluator_versions(stats_store, base, rolled)
    report = report_rows(stats_store, ReportQuery(since=at(base), until=at(base + HOUR), worst=1))
    lowest = [row for row in report if row["kind"] == "worst" and row["why"] == "lowest_scored"]
    assert [(row["trace_id"], row["mean_score"]) for row in lowest] == [(kept.trace_id, pytest.approx(0.6))]


def moved_and_scored_by_another_version(store: Any, base: float) -> Run:
    """Two runs of [base, base + 1 h) scored by ev1 (0.6, 0.1); the second moves to base + 1 h
    10 min, where ev2 scores it (0.95). Returns the first."""
    kept, moved = (
        Run(start=base + 60 * (i + 1), scores={"trajectory_precision": score})
        for i, score in enumerate((0.6, 0.1))
    )
    store_runs(store, [kept, moved])
    later = Run(**{**moved.__dict__, "start": base + HOUR + 600, "scores": {"trajectory_precision": 0.95}})
    insert_trajectories(store, [trajectory_row(later, version=2)])
    store.insert("scores", score_rows(later, evaluator_version="ev2", created=base + 2 * HOUR, revision=2))
    return kept


def precision_of_the_hour(store: Any, base: float) -> dict[str, Any]:
    [row] = query_stats(store, StatsQuery(since=at(base), until=at(base + HOUR), bucket_s=HOUR))
    assert row["runs"] == 1
    return dict(row["metrics"]["trajectory_precision"])


@pytest.mark.parametrize("rolled", [False, True], ids=["raw", "hourly"])
def test_a_run_moved_out_and_scored_by_another_version_leaves_a_range_one_version_scored(
    stats_store: Any, rolled: bool
) -> None:
    """The hour holds ev1's rows only, read as one version's: the moved run's ev1 row under its
    old start is no longer its latest and must not count there (migration 124's view deletes
    it), nor be the hour's lowest-scored run."""
    base = (time.time() // HOUR - 3) * HOUR
    kept = moved_and_scored_by_another_version(stats_store, base)
    if rolled:
        assert HourlyRollup(lambda: stats_store).run_once() > 0
    assert precision_of_the_hour(stats_store, base) == {"count": 1, "mean": pytest.approx(0.6), "std": 0.0}
    report = report_rows(stats_store, ReportQuery(since=at(base), until=at(base + HOUR), worst=1))
    lowest = [row for row in report if row["kind"] == "worst" and row["why"] == "lowest_scored"]
    assert [(row["trace_id"], row["mean_score"]) for row in lowest] == [(kept.trace_id, pytest.approx(0.6))]


def test_migration_124_deletes_the_rows_left_by_a_moved_run_of_an_existing_store(store: Any) -> None:
    """A store whose view deleted a moved run's rows of the re-scoring version only: migration
    124 writes the markers of the other versions' rows, and its view those of later moves."""
    migrate(store, tuple(m for m in ALL_MIGRATIONS if m.version != 124))
    base = (time.time() // HOUR - 5) * HOUR
    moved_and_scored_by_another_version(store, base)
    assert precision_of_the_hour(store, base)["count"] == 2, "the old view left ev1's row"
    assert migrate(store, ALL_MIGRATIONS) == [124]
    assert precision_of_the_hour(store, base) == {"count": 1, "mean": pytest.approx(0.6), "std": 0.0}
    later = base + 2 * HOUR
    moved_and_scored_by_another_version(store, later)
    assert precision_of_the_hour(store, later) == {"count": 1, "mean": pytest.approx(0.6), "std": 0.0}


def test_a_run_moved_to_another_agent_between_versions_leaves_its_agent_in_the_rest_of_an_hourly_plan(
    stats_store: Any,
) -> None:
    """A run re-assembled under another agent at the same start and scored there by ev2 only
    keeps ev1's row under the old agent: its latest score is ev2's, of the new agent. The
    partial hour before the plan's whole hours reads the runs stored again by their start
    (sources.scores_sql run_start), grouped before the agent filter, not filtered first."""
    base = (time.time() // HOUR - 4) * HOUR
    moved, kept, later = (
        Run(start=base + offset, agent="alpha", scores={"trajectory_precision": score})
        for offset, score in ((1200, 0.2), (1300, 0.8), (HOUR + 100, 0.5))
    )
    store_runs(stats_store, [moved, kept, later])
    other_agent = Run(**{**moved.__dict__, "agent": "beta", "scores": {"trajectory_precision": 0.9}})
    insert_trajectories(stats_store, [trajectory_row(other_agent, version=2)])
    stats_store.insert(
        "scores", score_rows(other_agent, evaluator_version="ev2", created=base + 3 * HOUR, revision=2)
    )
    assert HourlyRollup(lambda: stats_store).run_once() > 0
    query = StatsQuery(since=at(base + 600), until=at(base + 2 * HOUR), bucket_s=HOUR, agent="alpha")
    found = {
        row["bucket_start"]: row["metrics"]["trajectory_precision"] for row in query_stats(stats_store, query)
    }
    assert found == {
        at(base).strftime("%Y-%m-%dT%H:%M:%SZ"): {"count": 1, "mean": pytest.approx(0.8), "std": 0.0},
        at(base + HOUR).strftime("%Y-%m-%dT%H:%M:%SZ"): {"count": 1, "mean": pytest.approx(0.5), "std": 0.0},
    }


def test_single_and_null_scores(stats_store: Any) -> None:
    """One score has std 0; a metric whose only row is NULL (a failed judge) has count 0, no mean."""
    base = (time.time() // HOUR - 2) * HOUR
    store_runs(stats_store, [Run(start=base + 10, scores={"tool_correctness": 0.7, "judge": None})])
    [row] = query_stats(stats_store, StatsQuery(since=at(base), until=at(base + HOUR), bucket_s=HOUR))
    assert row["metrics"]["tool_correctness"] == {"count": 1, "mean": pytest.approx(0.7), "std": 0.0}
    assert row["metrics"]["judge"] == {"count": 0, "mean": None, "std": None}


def test_metric_filter_and_agent_filter(stats_store: Any) -> None:
    """--metric keeps only the named evaluation metrics; --agent only that agent's rows."""
    base = (time.time() // HOUR - 4) * HOUR
    store_runs(stats_store, synthetic_runs(seed=13, base=base, count=100))
    query = StatsQuery(
        since=at(base), until=at(base + 4 * HOUR), agent="beta", metrics=("trajectory_exact_match",)
    )
    rows = query_stats(stats_store, query)
    assert rows
    assert {row["agent"] for row in rows} == {"beta"}
    assert all(set(row["metrics"]) <= {"trajectory_exact_match"} for row in rows)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"bucket": "2d"}, "out of range"),
        ({"bucket": "fast"}, "not a duration"),
        ({"by": "colour"}, "cannot group by"),
        ({"since": "1h", "until": "2h"}, "must be after"),
        ({"since": "365d", "bucket": "1m"}, "buckets"),
        ({"color": "x"}, "unknown parameter"),
    ],
)
def test_bad_stats_parameters_are_explained(params: dict[str, str], message: str) -> None:
    """Bad bucket, grouping, period or parameter names are refused with a message saying why."""
    with pytest.raises(QueryError, match=message):
        StatsQuery.from_params(params)


def test_params_round_trip() -> None:
    """The HTTP form of a stats query reads back as the same query."""
    query = StatsQuery(
        since=at(1_790_000_000),
        until=at(1_790_086_400),
        bucket_s=300,
        agent="a",
        task="t",
        by=("model",),
        metrics=("m",),
    )
    assert StatsQuery.from_params(query.to_params()) == query
