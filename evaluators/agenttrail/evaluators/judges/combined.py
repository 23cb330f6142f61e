"""Scores that combine the deterministic metrics with judges' verdicts (spec/metrics.md).

- ``tool_correctness`` = min(tool-selection judge, deterministic) whenever a tool-selection judge
  scored a run that has available tools (a failed judge call leaves it unknown: missing).
- ``multiply_score`` = tool correctness x a response-quality judge's score, ``avg_score`` = their
  mean (GLLM AgentEvaluator), wherever both are known for the run. A response-quality judge is one
  of type ``final_response`` (the GEval-style response vs expected response judge).

Shared by offline evaluation, the evaluation API and the online judge worker, so the three agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from agenttrail.collector.runs import predicted_calls
from agenttrail.collector.store import Store
from agenttrail.evaluators.judges.base import Judge, JudgeInput, JudgeResult
from agenttrail.evaluators.judges.tool_selection import ToolSelectionJudge, reference_calls
from agenttrail.evaluators.metrics.correctness import avg_score, multiply_score, tool_correctness
from agenttrail.evaluators.scoring.run_queue import now_stamp
from agenttrail.evaluators.scoring.schema import ScoreRow

TOOL_CORRECTNESS: Final = ("tool_correctness", "tool_correctness_success")
COMBINED: Final = ("multiply_score", "avg_score")


def is_response_judge(judge: Judge) -> bool:
    return bool(getattr(judge, "response_quality", False))


def selection_judges(judges: Sequence[Judge]) -> list[str]:
    """Names of the tool-selection judges (their result's metric is their name)."""
    return [judge.name for judge in judges if isinstance(judge, ToolSelectionJudge)]


def response_judges(judges: Sequence[Judge]) -> list[str]:
    return [judge.name for judge in judges if is_response_judge(judge)]


def first_result(results: Sequence[JudgeResult], names: Sequence[str]) -> JudgeResult | None:
    """The first result whose metric is one of `names` (a judge's own verdict)."""
    return next((result for result in results if result.metric in names), None)


def min_tool_correctness(
    run: JudgeInput, selection: JudgeResult, params: Mapping[str, Any]
) -> dict[str, float | None] | None:
    """tool_correctness and its success with the selection verdict folded in (min), or None when
    the rule does not apply (no available tools, no reference, or the judge gave no verdict)."""
    if not run.available_tools or run.reference_trajectory is None:
        return None
    if selection.error:
        return dict.fromkeys(TOOL_CORRECTNESS)  # a min with an unknown value is unknown
    if selection.score is None:
        return None
    score = float(selection.score)
    outcome = tool_correctness(
        reference_calls(run.reference_trajectory),
        predicted_calls(run.tool_calls),
        available_tools=run.available_tools,
        user_input=None if run.input is None else str(run.input),
        tool_selection=lambda *_: (score, selection.explanation),
        **params,
    )
    return {TOOL_CORRECTNESS[0]: outcome.score, TOOL_CORRECTNESS[1]: 1.0 if outcome.success else 0.0}


def combined_scores(tool_correctness_score: float | None, response: float | None) -> dict[str, float | None]:
    """multiply_score and avg_score; None (missing) unless both inputs are known."""
    if tool_correctness_score is None or response is None:
        return dict.fromkeys(COMBINED)
    return {
        "multiply_score": multiply_score(tool_correctness_score, response),
        "avg_score": avg_score(tool_correctness_score, response),
    }


COMBINED_EVALUATOR: Final = "combined"
_INPUTS = """
SELECT TraceId, RootSpanId, Metric, Evaluator, Score, Agent, Task,
       toUnixTimestamp64Micro(RunStart), Revision, ReferenceVersion
FROM scores FINAL
WHERE TraceId IN {ids:Array(String)} AND Error = '' AND Score IS NOT NULL
  AND (Metric = 'tool_correctness' OR Metric IN {responses:Array(String)})
ORDER BY TraceId, RootSpanId, Revision, CreatedAt
"""


def store_combined(store: Store, trace_ids: Sequence[str], responses: Sequence[str]) -> int:
    """Online: multiply_score and avg_score rows for these runs where both inputs are stored.

    Tool correctness is the lowest stored for the run's latest revision (a tool-selection judge's
    min is never above the deterministic score); the response score is the response-quality
    judge's. One row per (run, combination, response judge): stored again, it replaces the old
    one (EvaluatorVersion names the response metric). Returns how many rows were written.
    """
    if not trace_ids or not responses:
        return 0
    latest: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    for row in store.query(_INPUTS, {"ids": list(trace_ids), "responses": list(responses)}):
        key = (row[0], row[1])
        kept = latest.setdefault(key, [])
        if kept and kept[0][8] < row[8]:
            kept.clear()  # a newer revision: its scores only
        if not kept or kept[0][8] == row[8]:
            kept.append(row)
    _, stamp = now_stamp()
    rows = []
    for (trace, root), scored in latest.items():
        correctness = [row[4] for row in scored if row[2] == TOOL_CORRECTNESS[0]]
        if not correctness:
            continue
        by_metric = {row[2]: row for row in scored}  # the latest per metric (rows in CreatedAt order)
        for response in responses:
            source = by_metric.get(response)
            if source is None:
                continue
            values = combined_scores(min(correctness), source[4])
            for metric, value in values.items():
                rows.append(
                    ScoreRow(
                        TraceId=trace,
                        RootSpanId=root,
                        Metric=metric,
                        Evaluator=COMBINED_EVALUATOR,
                        EvaluatorVersion=response,
                        Score=value,
                        Label="",
                        Explanation=f"tool_correctness {min(correctness):g} with {response} {source[4]:g}",
                        Agent=source[5],
                        Task=source[6],
                        RunStart=f"{source[7] / 1e6:.6f}",
                        Revision=source[8],
                        ReferenceVersion=source[9],
                        Error="",
                        CreatedAt=stamp,
                    )
                )
    if rows:
        store.insert("scores", rows)
    return len(rows)
