"""Drift's runs stored once inside the versions' overlap read their latest score from migration
127's `scores_latest_by_start` where its row is a live number (`sources._once_from_latest_rows`):
the rows `scores_sql` returns are those of grouping every version's rows, over histories of
several versions' rows (newer NULL scores, deletion markers, rows without a carried version,
rows written in the same microsecond by two versions), written before the migration's fill and
after it (the view)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agenttrail.collector.store import Store
from agenttrail.evaluators.monitoring import rollups, sources

# Ordered as strings ("ev10" < "ev2"), not as numbers; a long one whose first 24 bytes differ.
VERSIONS = ("ev10", "ev2", "ev3-with-a-name-longer-than-24-bytes")
BASE_US = 1_790_000_000_000_000
COLUMNS = (
    "Metric",
    "RunStart",
    "TraceId",
    "RootSpanId",
    "EvaluatorVersion",
    "Score",
    "Label",
    "Agent",
    "Task",
    "CreatedAt",
    "IsDeleted",
    "AgentVersion",
)


@st.composite
def histories(draw: Any) -> tuple[list[tuple[Any, ...]], int]:
    """Score rows of a few runs (some sharing a start) and two metrics, each version's rows of a
    (metric, run) written at distinct moments (two versions may share one); and how many of them
    are stored before the migration's fill."""
    rows = []
    for run in range(draw(st.integers(1, 5))):
        start = BASE_US + draw(st.integers(0, 2)) * 1_000_000
        run_version = draw(st.sampled_from(("a1", "a2")))
        for metric in ("quality", "tone"):
            for version in VERSIONS:
                moments = draw(st.lists(st.integers(1, 4), max_size=3, unique=True))
                for moment in moments:
                    kind = draw(st.sampled_from(("number", "number", "null", "marker")))
                    score = draw(st.sampled_from((0.0, 0.25, 1.0))) if kind == "number" else None
                    carried = draw(st.sampled_from((run_version, run_version, None)))
                    rows.append(
                        (
                            metric,
                            start,
                            f"trace{run}",
                            "root",
                            version,
                            score,
                            "",
                            "agent",
                            "task",
                            BASE_US + moment,
                            int(kind == "marker"),
                            carried,
                        )
                    )
    ordered = draw(st.permutations(rows))
    return list(ordered), draw(st.integers(0, len(ordered)))


def _micros(us: int) -> str:
    return f"{us // 1_000_000}.{us % 1_000_000:06d}"


def _store_rows(store: Store, rows: list[tuple[Any, ...]]) -> None:
    # Two inserts: FINAL picks across parts.
    for part in (rows[: len(rows) // 2], rows[len(rows) // 2 :]):
        if part:
            store.insert_rows(
                "scores_by_start",
                COLUMNS,
                [(*row[:1], _micros(row[1]), *row[2:9], _micros(row[9]), *row[10:]) for row in part],
            )


def _scores(store: Store, latest_rows: bool, agent_version: bool) -> list[Any]:
    where = ["RunStart >= {since:DateTime64(6)}", "RunStart < {until:DateTime64(6)}"]
    sql = sources.scores_sql(
        where,
        tables=sources.ROLLUPS,
        multi_version=["quality", "tone"],
        agent_version=agent_version,
        run_start=where,
        one_start=True,
        latest_rows=latest_rows,
    )
    params = {
        "since": _micros(BASE_US),
        "until": _micros(BASE_US + 10_000_000),
        "multi_version": ["quality", "tone"],
        "overlap_low": _micros(BASE_US),
        "overlap_high": _micros(BASE_US + 10_000_000),
        "evaluator_versions": sorted(VERSIONS),
    }
    return sorted(store.query(sql, params), key=repr)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=histories())
def test_the_latest_rows_are_the_grouped_rows(rollup_store: Store, history: tuple[list[Any], int]) -> None:
    rows, before_fill = history
    for table in ("scores_by_start", "scores_latest_by_start"):
        rollup_store.command(f"TRUNCATE TABLE {table}")
    _store_rows(rollup_store, rows[:before_fill])
    # A store scored before migration 127: its fill, then the view.
    rollup_store.command("TRUNCATE TABLE scores_latest_by_start")
    rollup_store.command(rollups.FILL_SCORES_LATEST_BY_START)
    _store_rows(rollup_store, rows[before_fill:])
    for agent_version in (True, False):
        grouped = _scores(rollup_store, latest_rows=False, agent_version=agent_version)
        assert _scores(rollup_store, latest_rows=True, agent_version=agent_version) == grouped


def test_versions_apart_tells_versions_by_their_first_bytes() -> None:
    assert sources.versions_apart(VERSIONS)
    assert not sources.versions_apart(["x" * 24 + "a", "x" * 24 + "b"])
    assert not sources.versions_apart(["ev", "ev\0"])  # zero-padded alike
