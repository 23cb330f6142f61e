"""The trajectory accuracy judge, after LangChain agentevals' trajectory LLM-as-judge.

Options: ``use_reference`` (compare with the reference trajectory; a run without one is missing),
``continuous`` (a score in [0, 1]; otherwise pass/fail, stored as 1/0 with label pass/fail),
``use_reasoning`` (ask for reasoning first; it becomes the explanation), ``few_shot_examples``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agenttrail.evaluators.judges.base import ChatJudgeClient, JudgeCall, JudgeInput, JudgeResult
from agenttrail.evaluators.judges.prompt_judge import (
    Options,
    PromptJudge,
    as_bool,
    as_examples,
    result_from_call,
)

_INSTRUCTIONS = """You are an expert data labeler. Your task is to grade the accuracy of an AI agent's \
internal trajectory: the tool calls it made, with their arguments and results, on its way to the \
final response.

<Rubric>
  An accurate trajectory:
  - Makes logical sense between steps
  - Shows clear progression toward the goal
  - Is reasonably efficient, though it does not need to be perfectly efficient
{reference_rule}</Rubric>

First understand the goal of the trajectory from the user input (if it is absent, infer it from \
the trajectory) and from the final response. Then grade the trajectory as it relates to achieving \
that goal.{reference_note}

{answer}"""
_REFERENCE_RULE = "  - Is semantically equivalent to the reference trajectory\n"
_REFERENCE_NOTE = (
    " Compare it with the reference trajectory: the same steps in substance, not necessarily the "
    "same wording or argument formatting."
)


class TrajectoryAccuracyJudge(PromptJudge):
    """agentevals-style trajectory accuracy: use_reference, continuous or pass/fail, use_reasoning."""

    def __init__(
        self,
        client: ChatJudgeClient,
        *,
        name: str = "trajectory_accuracy",
        use_reference: bool = False,
        continuous: bool = False,
        use_reasoning: bool = True,
        few_shot_examples: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        self.use_reference = use_reference
        self.continuous = continuous
        properties: dict[str, Any] = {}
        if use_reasoning:
            properties["reasoning"] = {"type": "string"}
        if continuous:
            properties["score"] = {"type": "number", "minimum": 0, "maximum": 1}
            answer = "a score between 0 (inaccurate) and 1 (fully accurate)"
        else:
            properties["score"] = {"type": "boolean"}
            answer = "true if the trajectory is accurate (pass), false if not (fail)"
        reasoning = "`reasoning` (your step-by-step reasoning), then " if use_reasoning else ""
        instructions = _INSTRUCTIONS.format(
            reference_rule=_REFERENCE_RULE if use_reference else "",
            reference_note=_REFERENCE_NOTE if use_reference else "",
            answer=f"Answer with a JSON object: {reasoning}`score`: {answer}.",
        )
        sections = ["user_input", "trajectory", "final_response"]
        if use_reference:
            sections.append("reference_trajectory")
        super().__init__(
            client,
            name=name,
            instructions=instructions,
            schema={
                "type": "object",
                "properties": properties,
                "required": list(properties),
                "additionalProperties": False,
            },
            sections=sections,  # type: ignore[arg-type]
            examples=few_shot_examples,
        )

    def missing_reason(self, run: JudgeInput) -> str:
        if self.use_reference and run.reference_trajectory is None:
            return "no reference trajectory for this run (use_reference is set)"
        return ""

    def interpret(self, value: Any, call: JudgeCall) -> list[JudgeResult]:
        explanation = str(value.get("reasoning", ""))
        if self.continuous:
            fields = {"score": float(value["score"]), "label": ""}
        else:
            passed = bool(value["score"])
            fields = {"score": 1.0 if passed else 0.0, "label": "pass" if passed else "fail"}
        return [self.result(**result_from_call(call, explanation=explanation, **fields))]

    @classmethod
    def from_options(
        cls, name: str, options: Mapping[str, Any], client: ChatJudgeClient, source: str
    ) -> TrajectoryAccuracyJudge:
        """agentevals trajectory accuracy: use_reference, continuous (0-1) or pass/fail, use_reasoning."""
        read = Options(options, source, "trajectory_accuracy")
        judge = cls(
            client,
            name=name,
            use_reference=read.get("use_reference", False, as_bool),
            continuous=read.get("continuous", False, as_bool),
            use_reasoning=read.get("use_reasoning", True, as_bool),
            few_shot_examples=read.get("few_shot_examples", (), as_examples),
        )
        read.done()
        return judge
