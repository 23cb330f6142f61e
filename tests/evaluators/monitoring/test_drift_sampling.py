"""Drift's fast paths answer exactly what its definitions did (drift_reference.py).

The windows are loaded with the sample's hash limits applied before FINAL; on random stored
histories (re-assembled, moved, re-agented, deleted and re-scored runs, two evaluator
versions) and random questions (rolling, fixed and version baselines, filters, metrics, sample
sizes small enough to sample), every window holds the same runs, values in the same order and
tool counts as the reference, over the rollups and over the base tables. The tests' sums and
conversions on arrays give the same numbers as on lists.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from trajectory_rows import insert_trajectories

from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store, parse_store
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.monitoring import significance, sources
from agenttrail.evaluators.monitoring.changepoint import detect_rate_change
from agenttrail.evaluators.monitoring.drift import (
    Baseline,
    DriftContext,
    DriftQuery,
    DriftSettings,
    Samples,
    _mean,
    compare,
    load_windows,
)
from agenttrail.evaluators.monitoring.hourly import HourlyRollup

from . import drift_reference as reference
from .synthetic import Run, score_rows, store_runs, trajectory_row
from .test_rollups import History, reading

HOUR = 3600
METRICS = ("failure_rate", "latency", "trajectory_length", "tool_distribution", "trajectory_precision")


@pytest.fixture(scope="module")
def histories(chdb_dir: Path) -> Iterator[tuple[Store, float]]:
    """A database of the module's own with a random history of 600 runs over 5 hours, changed
    in 4 inserts, then rolled up per hour (built once: the questions vary,
    not the data)."""
    name = f"test_drift_sampling_{uuid.uuid4().hex[:8]}"
    store = Store(parse_store(str(chdb_dir), name))
    try:
        migrate(store, ALL_MIGRATIONS)
        base = (time.time() // HOUR - 7) * HOUR
        history = History(store, random.Random(14), base, count=600)
        for _ in range(4):
            history.step(changes=80)
        # The counts of whole hours come from runs_by_hour (test_drift_counts.py changes some after).
        HourlyRollup(lambda: store).run_once()
        yield store, base
    finally:
        store.command(f"DROP DATABASE IF EXISTS `{name}` SYNC")
        store.close()


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


@st.composite
def questions(draw: st.DrawFn, base: float) -> DriftQuery:
    now = at(base + draw(st.floats(2 * HOUR, 6 * HOUR)))
    kind = draw(st.sampled_from(["rolling", "fixed", "version", "version_period"]))
    if kind == "rolling":
        baseline = Baseline(rolling_s=draw(st.integers(HOUR // 2, 4 * HOUR)))
    else:
        since = at(base + draw(st.floats(-HOUR, 4 * HOUR)))
        until = since + timedelta(seconds=draw(st.floats(600, 4 * HOUR)))
        if kind == "fixed":
            baseline = Baseline(since=since, until=until)
        elif kind == "version":
            baseline = Baseline(version=draw(st.sampled_from(["v1", "v2", "v9"])))
        else:
            baseline = Baseline(version="v1", since=since, until=until)
    return DriftQuery(
        recent_s=draw(st.integers(600, 3 * HOUR)),
        baseline=baseline,
        agent=draw(st.sampled_from([None, None, "alpha", "nobody"])),
        task=draw(st.sampled_from([None, None, "t2"])),
        metrics=tuple(draw(st.lists(st.sampled_from(METRICS), max_size=2, unique=True))),
        now=now,
    )


def as_lists(windows: dict[str, tuple[Samples, Samples]]) -> dict[str, list[object]]:
    return {
        agent: [
            (
                samples.runs,
                dict(samples.tools),
                {name: np.asarray(values, dtype=float).tolist() for name, values in samples.values.items()},
            )
            for samples in pair
        ]
        for agent, pair in windows.items()
    }


@pytest.mark.slow
@pytest.mark.parametrize("tables", [sources.ROLLUPS, sources.BASE_TABLES], ids=["rollups", "base"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), max_samples=st.integers(30, 400))
def test_windows_are_the_reference_windows(
    histories: tuple[Store, float], tables: sources.Tables, data: st.DataObject, max_samples: int
) -> None:
    """The same runs (sampled when a window has more than max_samples), their values in time
    order and tool counts, and the same scores, as the reference loading reads."""
    store, base = histories
    query = data.draw(questions(base))
    drift_settings = DriftSettings(max_samples=max_samples)
    with reading(tables):
        fast = load_windows(store, query, drift_settings)
        slow = reference.reference_windows(store, query, drift_settings)
    assert as_lists(fast) == as_lists(slow)


@pytest.mark.slow
@pytest.mark.parametrize("tables", [sources.ROLLUPS, sources.BASE_TABLES], ids=["rollups", "base"])
def test_a_fixed_baseline_ending_after_the_recent_window(
    histories: tuple[Store, float], tables: sources.Tables
) -> None:
    """A case the property test found: a fixed baseline that ends after the recent window, over
    a metric two evaluator versions scored only there. Each run counts once in each window (the
    reference once looked for such metrics only up to the recent window's end, and counted a
    run's two versions' scores)."""
    store, base = histories
    query = DriftQuery(
        recent_s=600,
        baseline=Baseline(since=at(base + 9970), until=at(base + 11521)),
        now=at(base + 10570),
    )
    with reading(tables):
        fast = load_windows(store, query, DriftSettings(max_samples=30))
        slow = reference.reference_windows(store, query, DriftSettings(max_samples=30))
    assert as_lists(fast) == as_lists(slow)


def early_baseline_question(base: float, now_s: float) -> DriftQuery:
    """The fixed baseline [base, base + 1487 s) both failing cases hypothesis found use: on this
    history it ends just after a run that later moved (test_rollups.History)."""
    return DriftQuery(
        recent_s=600,
        baseline=Baseline(since=at(base), until=at(base + 1487)),
        agent=None,
        task=None,
        metrics=(),
        now=at(base + now_s),
    )


def test_a_run_moved_out_of_a_fixed_baseline_leaves_its_score_with_it(histories: tuple[Store, float]) -> None:
    """The property test's failing case (baseline [base, base + 1487 s); it failed with or
    without sampling, so none here): a run scored by one evaluator version, moved out of the
    baseline, then scored by a second version at its new start. Its latest score is the
    second's, outside the baseline, so the baseline holds neither; drift reads each window
    apart, and picking the latest among the rows in the window's span kept the first's there."""
    store, base = histories
    query = early_baseline_question(base, now_s=19263)
    drift_settings = DriftSettings(max_samples=100_000)
    with reading(sources.ROLLUPS):
        fast = load_windows(store, query, drift_settings)
        slow = reference.reference_windows(store, query, drift_settings)
    assert as_lists(fast) == as_lists(slow)


@pytest.mark.parametrize("tables", [sources.ROLLUPS, sources.BASE_TABLES], ids=["rollups", "base"])
def test_a_metric_two_versions_scored_takes_each_runs_latest_score(
    histories: tuple[Store, float], tables: sources.Tables
) -> None:
    """The question hypothesis found (in CI): on this history a metric two evaluator versions
    scored has a run whose scores carry different run starts. The sample's window-dependent
    limit, applied to each row before the latest score is picked, kept the older row (its start
    under the baseline's limit) and so the run, where the latest row's start puts it in the
    recent window above that window's limit."""
    store, base = histories
    query = early_baseline_question(base, now_s=2 * HOUR)
    drift_settings = DriftSettings(max_samples=116)
    with reading(tables):
        fast = load_windows(store, query, drift_settings)
        slow = reference.reference_windows(store, query, drift_settings)
    assert as_lists(fast) == as_lists(slow)


def rescore_with_ev2(store: Store, rescored: list[Run], base: float) -> None:
    """A second evaluator version's scores of `rescored`, written six hours after `base`."""
    store.insert(
        "scores",
        [
            row
            for run in rescored
            for row in score_rows(run, evaluator_version="ev2", created=base + 6 * HOUR)
        ],
    )


def two_hours_against_the_hour_before(base: float) -> DriftQuery:
    """trajectory_precision's last two hours against the hour before them, three hours after `base`."""
    return DriftQuery(
        recent_s=2 * HOUR,
        baseline=Baseline(rolling_s=HOUR),
        metrics=("trajectory_precision",),
        now=at(base + 3 * HOUR),
    )


@pytest.mark.parametrize("tables", [sources.ROLLUPS, sources.BASE_TABLES], ids=["rollups", "base"])
def test_a_newer_versions_null_score_leaves_the_older_versions_score(
    rollup_store: Store, tables: sources.Tables
) -> None:
    """Where two evaluator versions scored a metric, a run's score is its latest non-NULL one
    (`sources._grouped`'s and `_grouped_once`'s `argMax` skip a NULL score): a newer version
    that failed to score a run (a judge's malformed answer is a NULL score) leaves the run the
    older version's score, not no score. The run stored once and the run stored again (read
    apart over the rollups) alike; the runs whose newer score is a number take that."""
    store = rollup_store
    base = (time.time() // HOUR - 7) * HOUR
    runs = [
        Run(start=base + HOUR + index * 60.0, scores={"trajectory_precision": 0.25}) for index in range(40)
    ]
    store_runs(store, runs)
    once, again = runs[3], runs[7]
    insert_trajectories(store, [trajectory_row(again, version=2)])  # stored again, same start
    rescored = [replace(run, scores={"trajectory_precision": 0.75}) for run in runs]
    for run in (once, again):
        rescored[runs.index(run)] = replace(run, scores={"trajectory_precision": None})
    rescore_with_ev2(store, rescored, base)
    query = two_hours_against_the_hour_before(base)
    with reading(tables):
        windows = load_windows(store, query, DriftSettings())
    expected = [0.25 if run in (once, again) else 0.75 for run in runs]
    assert list(windows["bot"][1].values["trajectory_precision"]) == expected


@pytest.mark.parametrize("tables", [sources.ROLLUPS, sources.BASE_TABLES], ids=["rollups", "base"])
def test_two_versions_scores_written_at_one_moment_take_the_larger_versions(
    rollup_store: Store, tables: sources.Tables
) -> None:
    """A run's latest score is the one with the latest (CreatedAt, EvaluatorVersion): two
    versions' rows written in the same microsecond go to the larger version, whichever was
    written first. Drift's runs inside the versions' overlap compare one Int128 of the
    microseconds and the version's rank among the versions read (`sources._RANKED_LATEST`);
    over the base tables the tuple itself. A run stored again (`_grouped`) and runs stored
    once (`_grouped_once`) alike."""
    store = rollup_store
    base = (time.time() // HOUR - 7) * HOUR
    runs = [
        Run(start=base + HOUR + index * 60.0, scores={"trajectory_precision": 0.25}) for index in range(40)
    ]
    again = runs[7]
    rescored = [replace(run, scores={"trajectory_precision": 0.75}) for run in runs]
    # ev2's rows first, ev10's (smaller: '1' < '2') after them, at the same moment
    store_runs(store, rescored)
    insert_trajectories(store, [trajectory_row(again, version=2)])  # stored again, same start
    moment = base + 6 * HOUR
    store.insert(
        "scores",
        [row for run in rescored for row in score_rows(run, evaluator_version="ev2", created=moment)],
    )
    store.insert(
        "scores", [row for run in runs for row in score_rows(run, evaluator_version="ev10", created=moment)]
    )
    query = two_hours_against_the_hour_before(base)
    with reading(tables):
        windows = load_windows(store, query, DriftSettings())
    assert list(windows["bot"][1].values["trajectory_precision"]) == [0.75] * len(runs)


def test_a_run_stored_again_under_another_agent_counts_under_its_latest(rollup_store: Store) -> None:
    """Inside the versions' overlap a run stored once is grouped for its score alone (its rows
    share their agent: `sources._grouped_once`), a run stored again for its latest row's agent
    too: re-assembled under another agent at the same start and re-scored by ev2, its ev1 row
    still names the old agent, and its score counts under the new one only."""
    store = rollup_store
    base = (time.time() // HOUR - 7) * HOUR
    runs = [
        Run(start=base + HOUR + index * 60.0, scores={"trajectory_precision": 0.25}) for index in range(40)
    ]
    store_runs(store, runs)
    moved = replace(runs[5], agent="other")
    insert_trajectories(store, [trajectory_row(moved, version=2)])
    rescored = [replace(run, scores={"trajectory_precision": 0.75}) for run in runs]
    rescored[5] = replace(moved, scores={"trajectory_precision": 0.5})
    rescore_with_ev2(store, rescored, base)
    query = two_hours_against_the_hour_before(base)
    windows = load_windows(store, query, DriftSettings())
    assert list(windows["other"][1].values["trajectory_precision"]) == [0.5]
    assert list(windows["bot"][1].values["trajectory_precision"]) == [0.75] * 39


def test_runs_and_scores_sharing_a_start_are_ordered_by_their_runs_ids(
    rollup_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs and scores are sorted by start alone unless two of a window share one; then by the
    run's ids too, as the reference does (here the run with the smaller trace id has the larger
    score and latency, so an order by start and value would differ in every pair). Sorted by
    start alone, ties keep the order they were read in, which here is already the ids' (the
    rollups are sorted by them after the start); nothing promises it, so the loading must take
    the ids-ordered queries."""
    base = (time.time() // HOUR - 3) * HOUR
    runs = []
    for index in range(40):
        start = base + (index // 2) * 60 + (HOUR if index >= 20 else 0)
        trace_id = f"{index // 2:04x}{'a' if index % 2 else 'b'}{uuid.uuid4().hex[:27]}"
        score = 0.9 if index % 2 else 0.1  # 'a...' (smaller) scores higher
        runs.append(
            Run(start=start, trace_id=trace_id, latency_s=score, scores={"trajectory_precision": score})
        )
    store_runs(rollup_store, runs)
    query = DriftQuery(recent_s=HOUR, baseline=Baseline(rolling_s=HOUR), now=at(base + 2 * HOUR))
    issued: list[str] = []
    reading = rollup_store.query
    monkeypatch.setattr(
        rollup_store, "query", lambda sql, *a, **k: (issued.append(sql), reading(sql, *a, **k))[1]
    )
    fast = load_windows(rollup_store, query, DriftSettings())
    monkeypatch.undo()
    assert any("groupArray((Start, TraceId, RootSpanId" in sql for sql in issued)
    assert any("groupArray((RunStart, TraceId, RootSpanId" in sql for sql in issued)
    slow = reference.reference_windows(rollup_store, query, DriftSettings())
    assert as_lists(fast) == as_lists(slow)
    assert fast["bot"][1].values["trajectory_precision"].tolist() == [0.9, 0.1] * 10
    assert fast["bot"][1].values["latency"].tolist() == [0.9, 0.1] * 10


def test_the_history_samples_and_splits_windows(histories: tuple[Store, float]) -> None:
    """The random data exercises sampling: a 3-hour baseline holds more runs than max_samples,
    scores are read, and both agents have both windows."""
    store, base = histories
    query = DriftQuery(recent_s=HOUR, baseline=Baseline(rolling_s=3 * HOUR), now=at(base + 5 * HOUR))
    windows = load_windows(store, query, DriftSettings(max_samples=60))
    everything = load_windows(store, query, DriftSettings())
    assert set(windows) == {"alpha", "beta"}
    for agent in windows:
        sampled, full = windows[agent][0], everything[agent][0]
        assert full.runs > 100
        assert 30 < len(sampled.values["latency"]) < full.runs
        assert len(sampled.values["trajectory_precision"]) > 20


floats = st.floats(-1e3, 1e3, allow_nan=False)
binary = st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=300)


@settings(max_examples=150, deadline=None)
@given(x=binary, y=binary, rate=st.floats(0.0, 1.0), seed=st.integers(0, 2**32 - 1))
@example(x=[0.0] * 90 + [1.0] * 10, y=[0.0] * 20 + [1.0] * 60, rate=0.5, seed=1)
def test_proportion_tests_on_arrays_are_the_list_definitions(
    x: list[float], y: list[float], rate: float, seed: int
) -> None:
    """The z-test and the Bernoulli CUSUM sum 0/1 values with numpy: the same numbers as
    Python's sum over lists (also after a change of rate, where the CUSUM alarms)."""
    rng = random.Random(seed)
    shifted = y + [float(rng.random() < rate) for _ in range(200)]
    assert significance.two_proportion_z(np.array(x), np.array(y)) == reference.two_proportion_z(x, y)
    for recent in (y, shifted):
        fast = detect_rate_change(np.array(x), np.array(recent), threshold=3.0)
        assert fast == reference.detect_rate_change(x, recent, threshold=3.0)


def test_the_cusum_comparison_sees_alarms() -> None:
    """The example above alarms, so the comparison covers the shift it reports."""
    assert detect_rate_change([0.0] * 90 + [1.0] * 10, [0.0] * 20 + [1.0] * 60, threshold=3.0)


@settings(max_examples=150, deadline=None)
@given(
    x=st.lists(st.sampled_from([0.5, 1.5]) | floats, min_size=1, max_size=40),
    y=st.lists(st.sampled_from([0.5, 1.5]) | floats, min_size=1, max_size=40),
)
def test_constant_check_and_mean_on_arrays_are_the_list_definitions(x: list[float], y: list[float]) -> None:
    assert significance._constant_and_equal(np.array(x), np.array(y)) == reference.constant_and_equal(x, y)
    assert _mean(np.array(x)) == reference.mean(x)


_whole = st.sampled_from([0.0, -0.0, 1.0, 2.0, -3.0, 2.0**52, -(2.0**52), 2.0**53, 2.0**60, 1e300])


@settings(max_examples=300, deadline=None)
@given(x=st.lists(_whole | st.integers(-(2**53), 2**53).map(float) | floats, min_size=1, max_size=40))
def test_mean_of_whole_values_is_fsums_to_the_bit(x: list[float]) -> None:
    """Whole values (rates, lengths) take numpy's sum, exact below 2**53: the same float as
    fsum's mean, sums that would pass 2**53 and fractions included."""
    assert repr(_mean(np.array(x))) == repr(reference.mean(x))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(5, 120), binary_scores=st.booleans())
def test_compare_on_arrays_is_compare_on_lists(seed: int, n: int, binary_scores: bool) -> None:
    """Windows as the store loads them (float arrays) and as lists give identical results."""
    rng = random.Random(seed)

    def window(size: int) -> Samples:
        samples = Samples(runs=size)
        for _ in range(size):
            samples.add("failure_rate", float(rng.random() < 0.2))
            samples.add("latency", round(rng.lognormvariate(0, 0.5), rng.choice([1, 6])))
            samples.add("trajectory_length", float(rng.randint(0, 5)))
            score = float(rng.random() < 0.6) if binary_scores else rng.random()
            samples.add("score", score)
            samples.tools.update(rng.choices(["a", "b", "c"], k=rng.randint(0, 3)))
        return samples

    baseline, recent = window(n), window(rng.randint(5, 120))
    as_arrays = [
        Samples({m: np.array(v) for m, v in s.values.items()}, s.tools, s.runs) for s in (baseline, recent)
    ]
    context = DriftContext("a", "", at(0), at(1), "b")
    drift_settings = DriftSettings(min_samples=5)
    assert compare(context, *as_arrays, drift_settings) == compare(context, baseline, recent, drift_settings)


@settings(max_examples=300, deadline=None)
@given(
    x=st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]) | floats, min_size=1, max_size=80),
    y=st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]) | floats, min_size=1, max_size=80),
)
@example(x=[1.0, 2.0], y=[3.0, 4.0])
@example(x=[1.0] * 30 + [2.0], y=[1.0] * 40)
def test_mann_whitney_is_scipys_to_the_bit(x: list[float], y: list[float]) -> None:
    """The U test from sorted windows gives scipy's p-value and U exactly, ties included."""
    assert significance.mann_whitney(x, y) == reference.mann_whitney(x, y)
    assert significance.mann_whitney(np.array(x), np.array(y)) == reference.mann_whitney(x, y)
