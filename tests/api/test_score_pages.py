"""Keyset pages of stored scores (score_pages.query_page) against an order computed in Python."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agenttrail.collector.queries import TrajectoryFilter
from agenttrail.collector.schema import migrate
from agenttrail.evaluators.api.score_pages import ScoreQuery, query_page
from agenttrail.evaluators.scoring.schema import EVALUATOR_MIGRATIONS, ScoreRow

BASE_US = 1_790_000_000_000_000
TRACES = ("a" * 32, "b" * 32)
ROOTS = ("1" * 16, "2" * 16)
# A score's identity in `scores FINAL`: (trace, run, metric, evaluator version). Few distinct
# values per column, so ties at every level of the sort key are common.
KEYS = st.tuples(
    st.sampled_from(TRACES),
    st.sampled_from(ROOTS),
    st.sampled_from(["failure", "latency"]),
    st.sampled_from(["v1", "v2"]),
)
# Each run's start, in seconds after BASE_US (one start per run, shared by its scores).
STARTS = st.lists(st.integers(min_value=0, max_value=1), min_size=4, max_size=4)


@pytest.fixture
def scores_store(store: Any) -> Any:
    migrate(store, EVALUATOR_MIGRATIONS)
    return store


@pytest.mark.timeout(600)  # ClickHouse statements per example; slow on a loaded machine
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    keys=st.lists(KEYS, unique=True, max_size=16),
    starts=STARTS,
    page_size=st.integers(min_value=1, max_value=8),
)
def test_paging_yields_each_score_exactly_once_in_order(
    scores_store: Any, keys: list[tuple[str, str, str, str]], starts: list[int], page_size: int
) -> None:
    """Following the next-page tokens returns every stored score once, newest run first, ties in
    (trace, run, metric, evaluator version) order, pages full but the last, and ends with ""."""
    store = scores_store
    agent = uuid.uuid4().hex  # this example's scores only
    start_of = {(t, r): starts[i] for i, (t, r) in enumerate((t, r) for t in TRACES for r in ROOTS)}
    rows = [
        ScoreRow(trace, root, metric, "trajectory", version, 0.5, "", "", agent, "t",
         f"{(BASE_US + start_of[trace, root] * 1_000_000) / 1e6:.6f}", 1, 1, "", "1790000000.000000")
        for trace, root, metric, version in keys
    ]  # fmt: skip
    if rows:
        store.insert("scores", rows)
    full = [(start_of[k[0], k[1]], *k) for k in keys]
    expected = sorted(full, key=lambda k: (-k[0], k[1], k[2], k[3], k[4]))
    query = ScoreQuery(TrajectoryFilter(agent=agent, limit=page_size))
    pages = []
    token = ""
    while True:
        page, token = query_page(store, query, token)
        pages.append(page)
        if not token:
            break
        assert len(pages) <= len(keys), "the pages never end"
    assert all(len(page) == page_size for page in pages[:-1])
    assert len(pages[-1]) <= page_size
    seen = [
        (
            (score.run_start.ToMicroseconds() - BASE_US) // 1_000_000,
            score.trace_id,
            score.root_span_id,
            score.result.metric,
            score.result.evaluator_version,
        )
        for page in pages
        for score in page
    ]
    assert seen == expected
