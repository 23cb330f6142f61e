"""Criteria results as `scores` rows: Metric "<set>:<criterion>", Evaluator "criteria", set version.

Stored with every judge column (model, tokens, latency, cost, details), as the online judges store
them: a result is the same whichever path produced it (spec/judges.md).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from agenttrail.collector.store import Store
from agenttrail.evaluators.judges.base import JudgeResult
from agenttrail.evaluators.judges.criteria.runs import Run
from agenttrail.evaluators.judges.runs import JUDGE_SCORE_COLUMNS


def score_rows(run: Run, results: Sequence[JudgeResult], created_at: float) -> list[tuple[Any, ...]]:
    """`scores` rows (JUDGE_SCORE_COLUMNS order) for one run's results."""
    judged = run.judge_input
    return [
        (
            judged.trace_id,
            run.root_span_id,
            result.metric,
            result.judge,
            result.version,
            result.score,
            result.label,
            result.explanation,
            judged.agent,
            judged.task,
            f"{run.start_s:.6f}",
            run.revision,
            0,
            result.error,
            f"{created_at:.6f}",
            result.model,
            result.prompt_tokens,
            result.completion_tokens,
            round(result.latency_s * 1000),
            result.cost,
            json.dumps(dict(result.details), ensure_ascii=False, default=str) if result.details else "",
        )
        for result in results
    ]


def store_results(store: Store, scored: Sequence[tuple[Run, Sequence[JudgeResult]]]) -> int:
    """Write every result in one insert; returns the number of rows."""
    now = time.time()
    rows = [row for run, results in scored for row in score_rows(run, results, now)]
    store.insert_rows("scores", JUDGE_SCORE_COLUMNS, rows)
    return len(rows)
