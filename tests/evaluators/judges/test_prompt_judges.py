"""Behaviour every judge type shares: data sections, errors, budget, versions."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from llm_server import LlmServer, Reply

from agenttrail.evaluators.judges import BudgetExhausted, JudgeInput, build_judge, judge_types
from agenttrail.evaluators.judges.client import OpenAIJudgeClient
from agenttrail.evaluators.judges.render import DATA_RULE

OPTIONS: dict[str, dict[str, Any]] = {
    "rubric": {
        "criteria": {"helpful": "The agent did what the user asked."},
        "rating_rubric": {1: "helpful", 0: "not helpful"},
        "inputs": ["user_input", "trajectory", "final_response"],
    },
    "final_response": {},
    "trajectory_accuracy": {"use_reference": True},
    "task_completion": {},
    "tool_selection": {},
    "criteria": {
        "definition": {
            "name": "answers",
            "criteria": [
                {
                    "name": "clear",
                    "description": "The answer is clear.",
                    "accepted_values": [{"label": "no", "value": 0}, {"label": "yes", "value": 1}],
                }
            ],
        }
    },
}
ANSWERS: dict[str, dict[str, Any]] = {
    "rubric": {"explanation": "did it", "score": 1},
    "final_response": {"explanation": "same facts", "score": 0.75},
    "trajectory_accuracy": {"reasoning": "sensible steps", "score": True},
    "task_completion": {
        "sub_scores": [{"sub_goal": "find Paris", "evaluation": "yes"}],
        "reason": "done",
        "complete": "yes",
    },
    "tool_selection": {"reason": "right tools", "score": 0.5},
    "criteria": {"clear": {"label": "yes", "explanation": "plain"}},
}
DATA_BLOCK = re.compile(r"<<<DATA name=[^>\n]*>>>\n.*?\n<<<END DATA>>>", re.DOTALL)

Serve = Callable[..., LlmServer]
ClientFor = Callable[..., OpenAIJudgeClient]


def test_every_type_is_covered() -> None:
    """These shared tests cover every registered judge type."""
    assert set(judge_types()) == set(OPTIONS)


def _text(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content)


@pytest.mark.parametrize("kind", sorted(OPTIONS))
def test_injection_stays_inside_a_data_section(
    kind: str, serve: Serve, client_for: ClientFor, run: JudgeInput, injection: str
) -> None:
    """An injected instruction in a tool result (and response) reaches the model only inside data."""
    llm = serve(Reply.chat_json(ANSWERS[kind]))
    judge = build_judge("j", {"type": kind, **OPTIONS[kind]}, client_for(llm), "test")
    # the final_response judge sees no tool results, so the response carries the attempt too
    (first, *_) = judge.evaluate(replace(run, output=f"Sunny. {injection}"))
    assert first.error == ""
    messages = llm.chat_requests()[0]["messages"]
    system, user = _text(messages[0]), _text(messages[-1])
    assert DATA_RULE in system
    assert "never an instruction" in system
    assert "IGNORE PREVIOUS INSTRUCTIONS" not in system
    blocks = DATA_BLOCK.findall(user)
    assert any("IGNORE PREVIOUS INSTRUCTIONS" in block for block in blocks)
    outside = DATA_BLOCK.sub("", user)
    assert "IGNORE PREVIOUS INSTRUCTIONS" not in outside
    # the forged delimiter inside the data was neutralised, so each block closes where it should
    assert user.count("<<<END DATA>>>") == len(blocks)
    assert injection.replace("<<<END DATA>>>", "‹‹‹END DATA›››") in user


@pytest.mark.parametrize("kind", sorted(OPTIONS))
def test_malformed_answers_are_error_results(
    kind: str, serve: Serve, client_for: ClientFor, run: JudgeInput
) -> None:
    """Two malformed answers give an error result with no score, not a 0."""
    llm = serve(Reply.chat("score: 1"))
    results = build_judge("j", {"type": kind, **OPTIONS[kind]}, client_for(llm), "test").evaluate(run)
    assert results[0].error.startswith("invalid answer after one repair")
    assert results[0].score is None
    assert results[0].prompt_tokens == 200
    assert len(llm.chat_requests()) == 2


@pytest.mark.parametrize("kind", sorted(OPTIONS))
def test_budget_exhaustion_propagates(
    kind: str, serve: Serve, client_for: ClientFor, run: JudgeInput, budget_clock: float
) -> None:
    """A spent budget raises BudgetExhausted out of evaluate, recording nothing and sending nothing."""
    llm = serve(Reply.chat_json(ANSWERS[kind]))
    client = client_for(llm, budget={"cost_per_day": 0.01})
    client.budget.record(tokens=0, cost=0.02)
    judge = build_judge("j", {"type": kind, **OPTIONS[kind]}, client, "test")
    with pytest.raises(BudgetExhausted, match="per day"):
        judge.evaluate(run)
    assert llm.chat_requests() == []


@pytest.mark.parametrize("kind", sorted(OPTIONS))
def test_results_carry_judge_version_model_and_usage(
    kind: str, serve: Serve, client_for: ClientFor, run: JudgeInput
) -> None:
    """A result names the judge, its version and model, and the tokens it cost."""
    llm = serve(Reply.chat_json(ANSWERS[kind], prompt_tokens=321, completion_tokens=12))
    judge = build_judge("mine", {"type": kind, **OPTIONS[kind]}, client_for(llm), "test")
    (result, *_) = judge.evaluate(run)
    if kind == "criteria":  # stored as one metric per criterion, versioned by the criteria set
        assert (result.judge, result.metric, result.version) == ("criteria", "answers:clear", judge.version)
        assert re.fullmatch(r"draft-[0-9a-f]{12}", judge.version)
    else:
        assert (result.judge, result.metric, result.version) == ("mine", "mine", judge.version)
        assert re.fullmatch(r"[0-9a-f]{12}", judge.version)
    assert (result.model, result.prompt_tokens, result.completion_tokens) == ("judge-model", 321, 12)
    assert result.latency_s > 0


def test_version_changes_with_meaning_not_with_name(serve: Serve, client_for: ClientFor) -> None:
    """The version changes when an option or the model changes what scores mean."""
    llm = serve(Reply.chat_json({}))
    client = client_for(llm)

    def version(options: dict[str, Any], name: str = "j", judge_client: OpenAIJudgeClient = client) -> str:
        return build_judge(name, {"type": "trajectory_accuracy", **options}, judge_client, "test").version

    assert version({}) == version({}, name="other")
    assert version({}) != version({"continuous": True})
    assert version({}) != version({"use_reference": True})
    assert version({}) != version({}, judge_client=client_for(llm, model="another-model"))
