"""The critic (AgentEval CriticAgent): proposes evaluation criteria for a task.

Task-based mode sees only the task description; solution-based mode also sees a few
successful and failed runs, rendered as delimited data so nothing inside them instructs the
model. Each critic run is one model call; several runs are merged by `consolidate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agenttrail.evaluators.judges.base import ChatJudgeClient, JudgeCall, JudgeInput
from agenttrail.evaluators.judges.criteria.model import CriteriaError, Criterion, parse_criteria_list
from agenttrail.evaluators.judges.criteria.prompts import render_runs, system_message, user_message
from agenttrail.evaluators.judges.render import data_section

JUDGE_NAME = "criteria-critic"

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "criteria": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "accepted_values": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"label": {"type": "string"}, "value": {"type": "number"}},
                            "required": ["label", "value"],
                            "additionalProperties": False,
                        },
                    },
                },
                "required": ["name", "description", "accepted_values"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["criteria"],
    "additionalProperties": False,
}

_ANSWER_SHAPE = (
    '{"criteria": [{"name": "...", "description": "...", '
    '"accepted_values": [{"label": "...", "value": 0}, {"label": "...", "value": 1}]}]}'
)


def _system(count: int) -> str:
    return (
        "You are a critic who designs evaluation criteria for an AI agent's work on a task.\n"
        f"Propose {count} criteria that tell good runs from bad ones. Each criterion has:\n"
        '- name: a short name without ":" (e.g. "clarity", "tool efficiency"),\n'
        "- description: what it measures, in one or two sentences,\n"
        "- accepted_values: at least two ordered labels, worst first, each with its own number\n"
        '  (e.g. "Not clear" 0, "Moderately clear" 1, "Very clear" 2).\n'
        "Criteria must be distinct from each other and judgeable from a run alone.\n"
        f"Answer with JSON only, shaped as {_ANSWER_SHAPE}."
    )


@dataclass(frozen=True, slots=True)
class CriticRun:
    """What one critic call proposed (or why it failed)."""

    index: int
    criteria: tuple[Criterion, ...] = ()
    error: str = ""
    call: JudgeCall | None = None


def validate_answer(answer: Any) -> tuple[Criterion, ...]:
    """The critic's JSON -> criteria; ValueError (sent back to the model once) if it is not valid."""
    if not isinstance(answer, dict) or "criteria" not in answer:
        raise ValueError('the answer must be an object {"criteria": [...]}')
    try:
        return parse_criteria_list(answer["criteria"], "answer")
    except CriteriaError as exc:
        raise ValueError(str(exc)) from exc


def critic_messages(
    task: str,
    successful: Sequence[JudgeInput] = (),
    failed: Sequence[JudgeInput] = (),
    *,
    count: int = 5,
) -> list[dict[str, Any]]:
    parts = ["The task the agent is given:\n\n" + data_section("task_description", task.strip())]
    if successful:
        parts.append("Successful runs of the agent:\n" + render_runs(successful, "successful_run"))
    if failed:
        parts.append("Failed runs of the agent:\n" + render_runs(failed, "failed_run"))
    if successful or failed:
        parts.append("Propose criteria that a successful run meets better than a failed one.")
    return [system_message(_system(count)), user_message("\n\n".join(parts))]


def propose_criteria(
    client: ChatJudgeClient,
    task: str,
    successful: Sequence[JudgeInput] = (),
    failed: Sequence[JudgeInput] = (),
    *,
    runs: int = 1,
    count: int = 5,
) -> list[CriticRun]:
    """`runs` independent critic calls; a failed call is reported, not dropped."""
    if not task.strip():
        raise CriteriaError("the critic needs a task description (--task or --task-file)")
    messages = critic_messages(task, successful, failed, count=count)
    results = []
    for index in range(runs):
        call = client.complete_json(
            messages, SCHEMA, schema_name="criteria", validate=validate_answer, judge=JUDGE_NAME
        )
        if call.error:
            results.append(CriticRun(index, error=call.error, call=call))
        else:
            results.append(CriticRun(index, validate_answer(call.value), call=call))
    return results
