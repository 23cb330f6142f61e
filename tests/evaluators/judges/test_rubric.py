"""The rubric judge and its final-response preset."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from llm_server import LlmServer, Reply

from agenttrail.collector.errors import ConfigError
from agenttrail.evaluators.judges import JudgeInput, RubricJudge, build_judge
from agenttrail.evaluators.judges.client import OpenAIJudgeClient

Serve = Callable[..., LlmServer]
ClientFor = Callable[..., OpenAIJudgeClient]
RUBRIC = {
    "type": "rubric",
    "criteria": {"grounded": "Every claim in the response comes from a tool result."},
    "rating_rubric": {"5": "fully grounded", "3": "partly grounded", "1": "not grounded"},
    "evaluation_steps": ["List the claims.", "Find each claim in a tool result."],
}


def test_score_and_explanation_are_read(serve: Serve, client_for: ClientFor, run: JudgeInput) -> None:
    """The rubric's score comes back as the score, its text as the label, with the explanation."""
    llm = serve(Reply.chat_json({"explanation": "all from forecast", "score": 5}))
    (result,) = build_judge("grounded", RUBRIC, client_for(llm), "test").evaluate(run)
    assert (result.score, result.label, result.explanation, result.error) == (
        5.0,
        "5",
        "all from forecast",
        "",
    )
    request = llm.chat_requests()[0]
    system = request["messages"][0]["content"]
    assert "- grounded: Every claim in the response comes from a tool result." in system
    assert "- 5: fully grounded" in system
    assert "2. Find each claim in a tool result." in system
    assert request["response_format"]["json_schema"]["schema"]["properties"]["score"]["enum"] == [5, 3, 1]


def test_score_outside_the_rubric_is_repaired(serve: Serve, client_for: ClientFor, run: JudgeInput) -> None:
    """A score the rubric does not have is sent back once for repair."""
    llm = serve(
        Reply.chat_json({"explanation": "x", "score": 4}), Reply.chat_json({"explanation": "x", "score": 3})
    )
    (result,) = build_judge("grounded", RUBRIC, client_for(llm), "test").evaluate(run)
    assert result.score == 3.0
    assert "expected one of [5.0, 3.0, 1.0]" in llm.chat_requests()[1]["messages"][-1]["content"]


def test_final_response_preset_compares_with_the_expected_response(
    serve: Serve, client_for: ClientFor, run: JudgeInput
) -> None:
    """The GEval-style preset sees the response and the expected response, and scores 0-1."""
    llm = serve(Reply.chat_json({"explanation": "same", "score": 1}))
    (result,) = build_judge("answer", {"type": "final_response"}, client_for(llm), "test").evaluate(run)
    assert result.score == 1.0
    user = llm.chat_requests()[0]["messages"][1]["content"]
    assert "<<<DATA name=expected_response>>>\nSunny and 24 degrees.\n<<<END DATA>>>" in user
    assert "<<<DATA name=final_response>>>" in user
    assert "name=trajectory" not in user
    schema = llm.chat_requests()[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["score"]["enum"] == [1.0, 0.75, 0.5, 0.25, 0.0]


def test_without_expected_response_the_score_is_missing(
    serve: Serve, client_for: ClientFor, run: JudgeInput
) -> None:
    """No expected response: missing (score None, no error), and no model call."""
    llm = serve(Reply.chat_json({"explanation": "x", "score": 1}))
    judge = build_judge("answer", {"type": "final_response"}, client_for(llm), "test")
    (result,) = judge.evaluate(replace(run, expected_response=None))
    assert (result.score, result.error) == (None, "")
    assert result.details["missing"] == "no expected response for this run"
    assert llm.chat_requests() == []


def test_few_shot_examples_are_shown_with_their_verdicts(
    serve: Serve, client_for: ClientFor, run: JudgeInput
) -> None:
    """Few-shot examples are rendered as data with the verdict after each."""
    llm = serve(Reply.chat_json({"explanation": "x", "score": 5}))
    example = {"input": "Weather in Rome?", "output": "Rainy.", "explanation": "from the tool", "score": 5}
    options = {**RUBRIC, "few_shot_examples": [example]}
    build_judge("grounded", options, client_for(llm), "test").evaluate(run)
    user = llm.chat_requests()[0]["messages"][1]["content"]
    assert "<<<DATA name=example_1.user_input>>>\nWeather in Rome?\n<<<END DATA>>>" in user
    assert 'Verdict for example 1: {"explanation": "from the tool", "score": 5}' in user
    assert user.index("example_1.") < user.index("Now evaluate the run below")


def test_configuration_mistakes_are_config_errors(serve: Serve, client_for: ClientFor) -> None:
    """Unknown options, bad rubrics and bad examples are reported with the judge's name."""
    client = client_for(serve(Reply.chat_json({})))
    with pytest.raises(ConfigError, match=r"unknown option\(s\) \['criterion'\] for judge type rubric"):
        build_judge("g", {**RUBRIC, "criterion": {}}, client, "judges.yaml")
    with pytest.raises(ConfigError, match="rubric scores must be numbers"):
        build_judge("g", {**RUBRIC, "rating_rubric": {"high": "good"}}, client, "judges.yaml")
    with pytest.raises(ConfigError, match="inputs"):
        build_judge("g", {**RUBRIC, "inputs": ["trajectory", "screenshots"]}, client, "judges.yaml")
    with pytest.raises(ConfigError, match="few-shot example 1: verdict"):
        build_judge("g", {**RUBRIC, "few_shot_examples": [{"input": "x", "score": 4}]}, client, "judges.yaml")
    with pytest.raises(ConfigError, match="criteria"):
        RubricJudge(client, criteria={}, rating_rubric={1: "ok"})
