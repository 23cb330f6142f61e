"""The rubric judge (Vertex pointwise metric, GEval) and its final-response preset.

Configured with criteria (name -> meaning), a rating rubric (score -> meaning), the inputs it sees,
optional evaluation steps and few-shot examples. The answer is an explanation, then one of the
rubric's scores; the score is stored as it is (its label is the score as text).

The ``final_response`` preset compares the final response with the expected response on a 0-1
scale in quarter steps (GEval's correctness judge, its 0-10 scale normalised). A run without
an expected response is missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from agenttrail.collector.errors import ConfigError
from agenttrail.evaluators.judges.base import ChatJudgeClient, JudgeCall, JudgeInput, JudgeResult
from agenttrail.evaluators.judges.prompt_judge import (
    Options,
    PromptJudge,
    as_examples,
    as_sections,
    as_str_list,
    as_str_mapping,
    result_from_call,
)
from agenttrail.evaluators.judges.render import Section

DEFAULT_INPUTS: Final[tuple[Section, ...]] = ("user_input", "trajectory", "final_response")
_NEEDED: Final[dict[Section, str]] = {
    "reference_trajectory": "no reference trajectory for this run",
    "expected_response": "no expected response for this run",
}
_DEFAULT_STEPS: Final = (
    "Read the data sections and understand what the user asked for.",
    "Assess the run against each criterion, citing concrete evidence from the data.",
    "Choose the rubric score whose description fits the run best.",
)


def _label(score: float) -> str:
    return f"{score:g}"


def _rubric(value: Any) -> dict[float, str]:
    if not isinstance(value, Mapping) or not value:
        raise ValueError(f"expected a mapping of score -> meaning, got {value!r}")
    rubric = {}
    for key, meaning in value.items():
        try:
            rubric[float(key)] = str(meaning)
        except (TypeError, ValueError):
            raise ValueError(f"rubric scores must be numbers, got {key!r}") from None
    return dict(sorted(rubric.items(), reverse=True))


class RubricJudge(PromptJudge):
    """Pointwise judge: criteria and a rating rubric over the chosen inputs; score + explanation."""

    response_quality = False  # True for the final_response preset (spec/metrics.md aggregates)

    def __init__(
        self,
        client: ChatJudgeClient,
        *,
        criteria: Mapping[str, str],
        rating_rubric: Mapping[float, str] | Mapping[str, str],
        name: str = "rubric",
        inputs: Sequence[Section] = DEFAULT_INPUTS,
        evaluation_steps: Sequence[str] = (),
        few_shot_examples: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        if not criteria:
            raise ConfigError(f"judge {name}: criteria must name at least one criterion")
        try:
            self.rating_rubric = _rubric(rating_rubric)
        except ValueError as exc:
            raise ConfigError(f"judge {name}: rating_rubric: {exc}") from exc
        self.criteria = dict(criteria)
        steps = tuple(evaluation_steps) or _DEFAULT_STEPS
        instructions = "\n".join(
            [
                "You are an expert evaluator of AI agents. Evaluate the agent run given to you "
                "against the criteria, using the rating rubric.",
                "",
                "## Criteria",
                *(f"- {key}: {meaning}" for key, meaning in self.criteria.items()),
                "",
                "## Rating rubric",
                *(f"- {_label(score)}: {meaning}" for score, meaning in self.rating_rubric.items()),
                "",
                "## Evaluation steps",
                *(f"{number}. {step}" for number, step in enumerate(steps, start=1)),
                "",
                "Answer with a JSON object: `explanation` (your reasoning, step by step, with evidence), "
                f"then `score` (one of {', '.join(map(_label, self.rating_rubric))}).",
            ]
        )
        schema = {
            "type": "object",
            "properties": {
                "explanation": {"type": "string"},
                "score": {"type": "number", "enum": list(self.rating_rubric)},
            },
            "required": ["explanation", "score"],
            "additionalProperties": False,
        }
        super().__init__(
            client,
            name=name,
            instructions=instructions,
            schema=schema,
            sections=inputs,
            examples=few_shot_examples,
        )

    def missing_reason(self, run: JudgeInput) -> str:
        for section, reason in _NEEDED.items():
            value = run.reference_trajectory if section == "reference_trajectory" else run.expected_response
            if section in self.sections and value is None:
                return reason
        return ""

    def interpret(self, value: Any, call: JudgeCall) -> list[JudgeResult]:
        score = float(value["score"])
        return [
            self.result(
                **result_from_call(call, score=score, label=_label(score), explanation=value["explanation"])
            )
        ]

    @classmethod
    def from_options(
        cls, name: str, options: Mapping[str, Any], client: ChatJudgeClient, source: str
    ) -> RubricJudge:
        """Criteria and a rating rubric over chosen inputs (Vertex pointwise / GEval); score + explanation."""
        return cls._build(name, Options(options, source, "rubric"), client)

    @classmethod
    def _build(cls, name: str, read: Options, client: ChatJudgeClient, **preset: Any) -> RubricJudge:
        judge = cls(
            client,
            name=name,
            criteria=read.get("criteria", preset.get("criteria", {}), as_str_mapping),
            rating_rubric=read.get("rating_rubric", preset.get("rating_rubric", {}), _rubric),
            inputs=read.get("inputs", preset.get("inputs", DEFAULT_INPUTS), as_sections),
            evaluation_steps=read.get("evaluation_steps", preset.get("evaluation_steps", ()), as_str_list),
            few_shot_examples=read.get("few_shot_examples", (), as_examples),
        )
        read.done()
        return judge


FINAL_RESPONSE_PRESET: Final[dict[str, Any]] = {
    "criteria": {
        "correctness": "The final response answers the user's request with the same facts, values and "
        "conclusions as the expected response. Wording, order and style may differ. Missing, wrong or "
        "contradicting facts lower the score; extra details that are correct and relevant do not.",
    },
    "rating_rubric": {
        1.0: "Conveys everything in the expected response, with nothing wrong.",
        0.75: "Conveys the main answer correctly but misses or blurs a minor detail.",
        0.5: "Partly correct: some key facts are right, others are missing or wrong.",
        0.25: "Mostly incorrect or incomplete; only a small part matches the expected response.",
        0.0: "Wrong, contradicts the expected response, or does not answer.",
    },
    "inputs": ("user_input", "final_response", "expected_response"),
    "evaluation_steps": (
        "List the key facts, values and conclusions in the expected response.",
        "For each, check whether the final response states it, and states it correctly.",
        "Check whether the final response claims anything that contradicts the expected response.",
        "Choose the rubric score that fits best; do not reward length or style.",
    ),
}


def final_response_judge(
    name: str, options: Mapping[str, Any], client: ChatJudgeClient, source: str
) -> RubricJudge:
    """GEval-style: the final response vs the expected response, 0-1 (a rubric judge preset)."""
    judge = RubricJudge._build(
        name, Options(options, source, "final_response"), client, **FINAL_RESPONSE_PRESET
    )
    judge.response_quality = True  # its score is the response score of multiply_score / avg_score
    return judge
