"""The runs list's pass/fail badges on a real chDB store: per run, the latest label of each score
(metric, evaluator version), so a re-scored run counts its new verdict, not both."""

from __future__ import annotations

import time
from typing import Any

from otlp_builders import new_span_id, new_trace_id

from agenttrail.evaluators.console.runs import score_badges


def test_badges_count_each_score_once_by_its_latest_label(store: Any) -> None:
    from agenttrail.collector.schema import migrate
    from agenttrail.evaluators.composition import ALL_MIGRATIONS

    migrate(store, ALL_MIGRATIONS)
    first, second = (new_trace_id(), new_span_id()), (new_trace_id(), new_span_id())
    now = time.time()

    def score(run: tuple[str, str], metric: str, version: str, label: str, age_s: float) -> tuple[Any, ...]:
        return (*run, metric, version, label, f"{now - age_s:.6f}")

    columns = ("TraceId", "RootSpanId", "Metric", "EvaluatorVersion", "Label", "CreatedAt")
    store.insert_rows(
        "scores",
        columns,
        [
            score(first, "exact", "v1", "fail", 60),  # re-scored below: now a pass
            score(first, "recall", "v1", "fail", 60),
            score(first, "latency", "v1", "", 60),  # unlabelled: no badge
            score(second, "exact", "v1", "pass", 60),
            score(second, "exact", "v2", "pass", 60),  # another evaluator version: its own score
        ],
    )
    store.insert_rows("scores", columns, [score(first, "exact", "v1", "pass", 1)])
    runs = [{"trace_id": trace, "root_span_id": root} for trace, root in (first, second)]
    assert score_badges(store, runs) == {first: {"pass": 1, "fail": 1}, second: {"pass": 2, "fail": 0}}
