"""The quantifier (AgentEval QuantifierAgent): one accepted value per criterion for one run.

One model call per run answers every criterion of the set; each criterion becomes its own
result (metric "<set>:<criterion>", label and number). A failed call gives one error result
per criterion, score None, never 0.
"""

from __future__ import annotations

from typing import Any

from agenttrail.evaluators.judges.base import ChatJudgeClient, JudgeInput, JudgeResult
from agenttrail.evaluators.judges.criteria.model import CriteriaSet
from agenttrail.evaluators.judges.criteria.prompts import render_run, system_message, user_message

EVALUATOR = "criteria"


def metric_name(criteria_set: CriteriaSet, criterion: str) -> str:
    return f"{criteria_set.name}:{criterion}"


def answer_schema(criteria_set: CriteriaSet) -> dict[str, Any]:
    """One property per criterion: a label from its accepted values and a short explanation."""
    properties = {
        criterion.name: {
            "type": "object",
            "properties": {
                "label": {"type": "string", "enum": criterion.labels},
                "explanation": {"type": "string"},
            },
            "required": ["label", "explanation"],
            "additionalProperties": False,
        }
        for criterion in criteria_set.criteria
    }
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def make_validator(criteria_set: CriteriaSet) -> Any:
    def validate(answer: Any) -> dict[str, tuple[str, str]]:
        """criterion -> (label, explanation); ValueError names what is missing or not accepted."""
        if not isinstance(answer, dict):
            raise ValueError("the answer must be a JSON object with one entry per criterion")
        picked: dict[str, tuple[str, str]] = {}
        for criterion in criteria_set.criteria:
            entry = answer.get(criterion.name)
            label = entry.get("label") if isinstance(entry, dict) else entry
            if not isinstance(label, str) or label not in criterion.labels:
                raise ValueError(
                    f"criterion {criterion.name!r}: label must be one of {criterion.labels}, got {label!r}"
                )
            explanation = entry.get("explanation", "") if isinstance(entry, dict) else ""
            picked[criterion.name] = (label, str(explanation or ""))
        return picked

    return validate


def quantifier_messages(criteria_set: CriteriaSet, run: JudgeInput) -> list[dict[str, Any]]:
    lines = []
    for criterion in criteria_set.criteria:
        values = ", ".join(f'"{a.label}" ({a.value:g})' for a in criterion.accepted_values)
        lines.append(f"- {criterion.name}: {criterion.description} Accepted values, worst first: {values}.")
    system = (
        "You assess one run of an AI agent against evaluation criteria. For every criterion pick "
        "exactly one of its accepted labels and explain the choice in one sentence.\n"
        'Answer with JSON only: {"<criterion name>": {"label": "...", "explanation": "..."}, ...}.'
    )
    task = f"Task: {criteria_set.task}\n\n" if criteria_set.task else ""
    user = f"{task}Criteria:\n" + "\n".join(lines) + "\n\nThe run:\n" + render_run(run)
    return [system_message(system), user_message(user)]


def quantify_run(
    client: ChatJudgeClient, criteria_set: CriteriaSet, version: str, run: JudgeInput
) -> list[JudgeResult]:
    """One result per criterion, in set order; the call's usage is on the first result only."""
    validate = make_validator(criteria_set)
    call = client.complete_json(
        quantifier_messages(criteria_set, run),
        answer_schema(criteria_set),
        schema_name="criteria_scores",
        validate=validate,
        judge=f"{EVALUATOR}:{criteria_set.name}",
    )
    picked = None if call.error else validate(call.value)
    results = []
    for index, criterion in enumerate(criteria_set.criteria):
        usage: dict[str, Any] = {}
        if index == 0:
            usage = {
                "prompt_tokens": call.prompt_tokens,
                "completion_tokens": call.completion_tokens,
                "latency_s": call.latency_s,
                "cost": call.cost,
            }
        common: dict[str, Any] = {
            "judge": EVALUATOR,
            "version": version,
            "metric": metric_name(criteria_set, criterion.name),
            "model": call.model,
            **usage,
        }
        if picked is None:
            results.append(JudgeResult(error=call.error or "no answer", **common))
        else:
            label, explanation = picked[criterion.name]
            results.append(
                JudgeResult(score=criterion.value_of(label), label=label, explanation=explanation, **common)
            )
    return results
