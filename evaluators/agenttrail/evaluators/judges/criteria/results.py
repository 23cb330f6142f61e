"""Criteria results as `scores` rows: Metric "<set>:<criterion>", Evaluator "criteria", set version.

Stored with every judge column (model, tokens, latency, cost, details), as the online judges store
them: a result is the same whichever path produced it (spec/judges.md).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from agenttrail.collector.store import Store
from agenttrail.evaluators.judges.base import JudgeResult
from agenttrail.evaluators.judges.criteria.runs import Run
from agenttrail.evaluators.scoring.schema import ScoreRow


def score_rows(run: Run, results: Sequence[JudgeResult], created_at: float) -> list[ScoreRow]:
    """`scores` rows for one run's results."""
    judged = run.judge_input
    return [
        ScoreRow(
            TraceId=judged.trace_id,
            RootSpanId=run.root_span_id,
            Metric=result.metric,
            Evaluator=result.judge,
            EvaluatorVersion=result.version,
            Score=result.score,
            Label=result.label,
            Explanation=result.explanation,
            Agent=judged.agent,
            Task=judged.task,
            RunStart=f"{run.start_s:.6f}",
            Revision=run.revision,
            ReferenceVersion=0,
            Error=result.error,
            CreatedAt=f"{created_at:.6f}",
            Model=result.model,
            PromptTokens=result.prompt_tokens,
            CompletionTokens=result.completion_tokens,
            LatencyMs=round(result.latency_s * 1000),
            Cost=result.cost,
            Details=json.dumps(dict(result.details), ensure_ascii=False, default=str)
            if result.details
            else "",
        )
        for result in results
    ]


def store_results(store: Store, scored: Sequence[tuple[Run, Sequence[JudgeResult]]]) -> int:
    """Write every result in one insert; returns the number of rows."""
    now = time.time()
    rows = [row for run, results in scored for row in score_rows(run, results, now)]
    store.insert("scores", rows)
    return len(rows)
