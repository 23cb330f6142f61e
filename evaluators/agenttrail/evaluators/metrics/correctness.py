"""Tool correctness (GLLM AgentEvaluator / DeepEval ToolCorrectness), made exact.

Per pair score s(expected e, called c): 0 if the names differ, else 1.0, multiplied by the input
similarity when ``input_parameters`` is evaluated, and set to 0 when ``output`` is evaluated and
the outputs differ. Input similarity is 1.0 for equal inputs, else the sum over keys present in
both with equal values of 1/|union of keys|, nested objects adding their own similarity/|union|:

>>> input_similarity({"q": "x", "opts": {"a": 1, "b": 2}, "k": 3}, {"q": "x", "opts": {"a": 1, "b": 3}})
0.5

(``q`` equal: 1; ``opts`` half equal: 0.5; union of 3 keys: (1 + 0.5) / 3.)

Scoring, given expected and called trajectories:

- ``should_exact_match``: 1 if same length and every position has s = 1, else 0 (it wins over
  ``should_consider_ordering`` when both are set, as in DeepEval).
- ``should_consider_ordering``: weighted longest common subsequence (a step counts s where
  s > 0) / len(expected).
- default: for each expected call in order, the best-scoring called call not used yet (ties to the
  earliest index, so identical duplicates count separately), summed / len(expected); extra calls
  are not penalised.
- both empty: 1.0; expected empty but calls made: 0.0.
- ``available_tools`` with a ``tool_selection`` judge: final = min(judge score, the above).
- ``strict_mode``: the threshold becomes 1 and the score 0 or 1; success = score >= threshold.

>>> A, B = {"name": "search", "args": {"q": "x"}}, {"name": "fetch", "args": {"url": "u"}}
>>> tool_correctness([A, B], [B, A]).score
1.0
>>> tool_correctness([A, B], [B, A], should_consider_ordering=True).score
0.5
>>> tool_correctness([A, A], [A]).score, tool_correctness([A], [A, A, B]).score
(0.5, 1.0)

Rules where the spec is open:

- Values compare by canonical JSON as in trajectory matching (1 == 1.0, true != 1).
- An evaluation parameter is used for a pair only when both calls carry that data: an input that
  is absent or null (a wildcard reference input) or an absent output is not compared. A null
  output is data and is compared. A called input that was ``NOT_CAPTURED`` against an expected
  input of the same tool cannot be compared: with ``input_parameters`` evaluated the metric is not
  computable for the run (``NotComputable``), never a guessed score.
- ``strict_mode`` is applied after the min with the selection judge.
- A ``tool_selection`` judge without ``available_tools`` is not called: there is nothing to select
  from, and the judge may be configured for every task while only some have tool schemas.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from agenttrail.evaluators.metrics.calls import (
    ABSENT,
    NOT_CAPTURED,
    ToolCall,
    TrajectoryLike,
    parse_trajectory,
)
from agenttrail.evaluators.metrics.matching import json_equal, not_captured

EvaluationParam: TypeAlias = Literal["input_parameters", "output"]

ToolSelectionJudge: TypeAlias = Callable[
    [str | None, Sequence[Mapping[str, Any]], list[ToolCall]], tuple[float, str]
]
"""``judge(user_input, available_tools, called) -> (score in [0, 1], reason)``."""

_EVALUATION_PARAMS: tuple[EvaluationParam, ...] = ("input_parameters", "output")


@dataclass(frozen=True, slots=True)
class ToolCorrectnessResult:
    """The score, its pass/fail at the threshold, why, and the selection judge's score if it ran."""

    score: float
    success: bool
    reason: str
    selection_score: float | None = None


def input_similarity(expected: dict[str, Any], called: dict[str, Any]) -> float:
    """1.0 if equal; else the share of the union of keys whose values are equal, nested objects
    counting their own similarity."""
    if json_equal(expected, called):
        return 1.0
    matched = 0.0
    for key in sorted(expected.keys() & called.keys()):  # sorted: the float sum is reproducible
        e, c = expected[key], called[key]
        if json_equal(e, c):
            matched += 1.0
        elif isinstance(e, dict) and isinstance(c, dict):
            matched += input_similarity(e, c)
    return matched / len(expected.keys() | called.keys())


def _pair_score(expected: ToolCall, called: ToolCall, use_input: bool, use_output: bool) -> float:
    if expected.name != called.name:
        return 0.0
    score = 1.0
    if use_input and isinstance(expected.input, dict) and called.input is NOT_CAPTURED:
        raise not_captured(called.name)
    if use_input and isinstance(expected.input, dict) and isinstance(called.input, dict):
        score *= input_similarity(expected.input, called.input)
    if (
        use_output
        and expected.output is not ABSENT
        and called.output is not ABSENT
        and not json_equal(expected.output, called.output)
    ):
        score = 0.0
    return score


def _exact_match(scores: list[list[float]]) -> float:
    square = all(len(row) == len(scores) for row in scores)
    return 1.0 if square and all(scores[i][i] == 1.0 for i in range(len(scores))) else 0.0


def _weighted_lcs(scores: list[list[float]], n_called: int) -> float:
    previous = [0.0] * (n_called + 1)
    for row in scores:
        current = [0.0] * (n_called + 1)
        for j, s in enumerate(row, start=1):
            current[j] = max(previous[j], current[j - 1])
            if s > 0:
                current[j] = max(current[j], previous[j - 1] + s)
        previous = current
    return previous[n_called] / len(scores)


def _best_unused(scores: list[list[float]], n_called: int) -> float:
    used = [False] * n_called
    total = 0.0
    for row in scores:
        best, best_index = 0.0, -1
        for j, s in enumerate(row):
            if not used[j] and s > best:  # strictly greater: ties stay with the earliest index
                best, best_index = s, j
        if best_index >= 0:
            used[best_index] = True
            total += best
    return total / len(scores)


def tool_correctness(
    expected: TrajectoryLike,
    called: TrajectoryLike,
    *,
    threshold: float = 0.5,
    strict_mode: bool = False,
    should_exact_match: bool = False,
    should_consider_ordering: bool = False,
    evaluation_params: Iterable[EvaluationParam] = _EVALUATION_PARAMS,
    available_tools: Sequence[Mapping[str, Any]] | None = None,
    user_input: str | None = None,
    tool_selection: ToolSelectionJudge | None = None,
) -> ToolCorrectnessResult:
    """Score the calls made against the expected calls; see the module docstring for the rules."""
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold: expected a number in [0, 1], got {threshold!r}")
    params = set(evaluation_params)
    if not params <= set(_EVALUATION_PARAMS):
        raise ValueError(
            f"evaluation_params: expected a subset of {_EVALUATION_PARAMS}, got {sorted(params)}"
        )
    if available_tools is not None and tool_selection is None:
        raise ValueError(
            "available_tools was given but no tool-selection judge is configured: "
            "pass tool_selection to score tool selection, or drop available_tools"
        )
    expected_calls, called_calls = parse_trajectory(expected), parse_trajectory(called)

    use_input, use_output = "input_parameters" in params, "output" in params
    scores = [[_pair_score(e, c, use_input, use_output) for c in called_calls] for e in expected_calls]
    if not expected_calls:
        score, how = (1.0 if not called_calls else 0.0), "nothing expected"
    elif should_exact_match:
        score, how = _exact_match(scores), "exact match"
    elif should_consider_ordering:
        score, how = _weighted_lcs(scores, len(called_calls)), "weighted LCS"
    else:
        score, how = _best_unused(scores, len(called_calls)), "best unused call per expected call"

    missing = Counter(c.name for c in expected_calls) - Counter(c.name for c in called_calls)
    reason = (
        f"{how}: {score:.2f}; expected [{', '.join(c.name for c in expected_calls)}], "
        f"called [{', '.join(c.name for c in called_calls)}]"
    )
    if missing:
        reason += f"; not called: {', '.join(sorted(missing.elements()))}"

    selection_score = None
    if available_tools is not None and tool_selection is not None:
        selection_score, selection_reason = tool_selection(user_input, available_tools, called_calls)
        if not 0.0 <= selection_score <= 1.0:
            raise ValueError(f"tool_selection returned {selection_score!r}, expected a score in [0, 1]")
        score = min(score, selection_score)
        reason += f"; tool selection {selection_score:.2f}: {selection_reason}"

    if strict_mode:
        threshold = 1.0
        score = 1.0 if score >= threshold else 0.0
    return ToolCorrectnessResult(score, score >= threshold, reason, selection_score)


def multiply_score(tool_correctness_score: float, response_score: float) -> float:
    """Tool correctness x the response-quality judge's score: both must be good to score well."""
    return tool_correctness_score * response_score


def avg_score(tool_correctness_score: float, response_score: float) -> float:
    """The mean of tool correctness and the response-quality judge's score."""
    return (tool_correctness_score + response_score) / 2
