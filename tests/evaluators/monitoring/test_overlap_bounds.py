"""Drift's versions' overlap (`sources.overlap_bounds`) reads whole days from migration 126's
`score_version_days` and the edge days from `scores_by_start`: its answer is the one read from
every stored row of the range."""

from __future__ import annotations

import random
import time
from dataclasses import replace
from decimal import Decimal

from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.monitoring import sources
from agenttrail.evaluators.scoring.schema import ScoreRow

from .synthetic import Run, score_rows

DAY = 86400


def micros(value: str) -> int:
    return int(Decimal(value) * 1_000_000)


def bounds_of_the_rows(store: Store, since: str, until: str) -> sources.Overlap:
    """The definition: per metric and version, the first and last start of its rows as stored
    in [since, until); the metrics two versions scored; from the second smallest first start to
    the second largest last one, the widest of the metrics'; those metrics' versions."""
    spans: dict[str, dict[str, tuple[int, int]]] = {}
    for metric, version, start in store.query(
        "SELECT Metric, EvaluatorVersion, toUnixTimestamp64Micro(RunStart) FROM scores_by_start"
    ):
        if micros(since) <= start < micros(until):
            first, last = spans.setdefault(metric, {}).get(version, (start, start))
            spans[metric][version] = (min(first, start), max(last, start))
    multi = {metric: found for metric, found in spans.items() if len(found) > 1}
    if not multi:
        return sources.Overlap([], sources.ts6(1), sources.ts6(0), [])
    low = min(sorted(first for first, _ in found.values())[1] for found in multi.values())
    high = max(sorted((last for _, last in found.values()), reverse=True)[1] for found in multi.values())
    versions = sorted({version for found in multi.values() for version in found})
    return sources.Overlap(sorted(multi), sources.us6(low), sources.us6(high), versions)


def score_days(store: Store, base: float, rng: random.Random) -> None:
    """Four days of scores: `quality` by ev1 throughout and by ev2 from the third day (some of
    them re-scores of ev1's runs), `tone` by ev1 only, in two inserts per version."""
    runs = [
        Run(start=base + rng.uniform(0, 4 * DAY), scores={"quality": 0.5, "tone": 0.3}) for _ in range(120)
    ]
    runs.append(Run(start=base + 2 * DAY + 0.1, scores={"quality": 0.5}))  # both versions': see `ranges`
    late = [run for run in runs if run.start >= base + 2 * DAY]
    rescored = [Run(start=base + rng.uniform(2 * DAY, 4 * DAY), scores={"quality": 0.9}) for _ in range(20)]
    for part in (runs[:60], runs[60:]):
        store.insert("scores", [row for run in part for row in score_rows(run)])
    for part in (late, rescored):
        rows = score_rows_of(part, "ev2")
        store.insert("scores", [row for row in rows if row.Metric == "quality"])


def score_rows_of(runs: list[Run], evaluator_version: str) -> list[ScoreRow]:
    return [row for run in runs for row in score_rows(run, evaluator_version=evaluator_version)]


def answer(store: Store, since: str, until: str) -> sources.Overlap:
    found = sources.overlap_bounds(store, since, until)
    return replace(found, metrics=sorted(found.metrics))


def ranges(base: float, rng: random.Random) -> list[tuple[str, str]]:
    """Ranges on day boundaries, inside one day, across days, and over everything."""
    edges = [base + day * DAY for day in range(-1, 6)]
    chosen = [(a, b) for a in edges for b in edges if a < b]
    # inside a day, inside a second (after the run at 0.1 s), everything
    chosen += [(base + 2 * DAY + 60, base + 2 * DAY + 7200), (base + 2 * DAY + 0.25, base + 2 * DAY + 0.75)]
    chosen.append((0, base + 10 * DAY))
    for _ in range(40):
        a, b = sorted(rng.uniform(base - DAY, base + 5 * DAY) for _ in range(2))
        chosen.append((a, b))
    return [(sources.ts6(a), sources.ts6(b)) for a, b in chosen]


def test_overlap_bounds_are_those_of_the_stored_rows(rollup_store: Store) -> None:
    """Whole days from the days' table, edge days from the rows: the same bounds, metrics and
    versions as every stored row gives, for ranges on and off day boundaries."""
    rng = random.Random(126)
    base = (time.time() // DAY - 6) * DAY
    score_days(rollup_store, base, rng)
    for since, until in ranges(base, rng):
        assert answer(rollup_store, since, until) == bounds_of_the_rows(rollup_store, since, until), (
            since,
            until,
        )


def test_migration_126_fills_the_days_of_the_stored_scores(store: Store) -> None:
    """A store scored before migration 126 gets the days of its stored rows."""
    migrate(store, tuple(m for m in ALL_MIGRATIONS if m.version != 126))
    rng = random.Random(7)
    base = (time.time() // DAY - 6) * DAY
    score_days(store, base, rng)
    assert migrate(store, ALL_MIGRATIONS) == [126]
    for since, until in ranges(base, rng):
        assert answer(store, since, until) == bounds_of_the_rows(store, since, until), (
            since,
            until,
        )
