"""The tool selection judge and tool correctness = min(judge, deterministic)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from llm_server import LlmServer, Reply

from agenttrail.collector.errors import ConfigError
from agenttrail.evaluators.judges import JudgeInput, ToolSelectionJudge, build_judge
from agenttrail.evaluators.judges.client import OpenAIJudgeClient

Serve = Callable[..., LlmServer]
ClientFor = Callable[..., OpenAIJudgeClient]


def test_selection_score_and_reason(serve: Serve, client_for: ClientFor, run: JudgeInput) -> None:
    """The judge sees the request, the tool schemas and the calls, and returns score and reason; on a
    run with a reference it also reports tool correctness (the min), unless told not to."""
    llm = serve(Reply.chat_json({"reason": "right tools", "score": 0.9}))
    result, *combined = ToolSelectionJudge(client_for(llm)).evaluate(run)
    assert (result.metric, result.score, result.explanation) == ("tool_selection", 0.9, "right tools")
    assert [r.metric for r in combined] == ["tool_correctness", "tool_correctness_success"]
    assert len(ToolSelectionJudge(client_for(llm), tool_correctness=False).evaluate(run)) == 1
    user = llm.chat_requests()[0]["messages"][1]["content"]
    assert "<<<DATA name=available_tools>>>" in user
    assert "send_email" in user
    assert "name=final_response" not in user


def test_without_available_tools_it_is_missing(serve: Serve, client_for: ClientFor, run: JudgeInput) -> None:
    """No tool schemas: nothing to select from, so missing and no call."""
    llm = serve(Reply.chat_json({"reason": "x", "score": 1}))
    (result,) = ToolSelectionJudge(client_for(llm)).evaluate(replace(run, available_tools=()))
    assert (result.score, result.error) == (None, "")
    assert llm.chat_requests() == []


@pytest.mark.parametrize("judged", [0.3, 0.9])
def test_tool_correctness_is_the_min(
    judged: float, serve: Serve, client_for: ClientFor, run: JudgeInput
) -> None:
    """tool_correctness = min(judge, deterministic), and tool_correctness_success at the threshold."""
    # deterministic: geocode matches; forecast input {lat} vs expected {lat, lon}: similarity 1/2 -> 0.75
    reference = (
        {"name": "geocode", "input": {"city": "Paris"}},
        {"name": "forecast", "input": {"lat": 48.85, "lon": 2.35}},
    )
    llm = serve(Reply.chat_json({"reason": "fine", "score": judged}))
    judge = build_judge(
        "sel", {"type": "tool_selection", "tool_correctness": {"threshold": 0.5}}, client_for(llm), "t"
    )
    selection, correctness, passed = judge.evaluate(replace(run, reference_trajectory=reference))
    assert selection.score == judged
    expected = min(judged, 0.75)
    assert correctness.metric == "tool_correctness"
    assert correctness.score == pytest.approx(expected)
    assert correctness.details["selection_score"] == judged
    assert "tool selection" in correctness.explanation
    assert (passed.metric, passed.score) == ("tool_correctness_success", 1.0 if expected >= 0.5 else 0.0)


def test_tool_correctness_without_tools_is_deterministic_only(
    serve: Serve, client_for: ClientFor, run: JudgeInput
) -> None:
    """Without available tools the judge is not called and tool correctness is the deterministic score."""
    llm = serve(Reply.chat_json({"reason": "x", "score": 0.0}))
    judge = ToolSelectionJudge(client_for(llm), tool_correctness={})
    selection, correctness, passed = judge.evaluate(replace(run, available_tools=()))
    assert selection.score is None
    assert correctness.score == 1.0  # the reference's forecast has no input: a wildcard
    assert passed.score == 1.0
    assert llm.chat_requests() == []


def test_tool_correctness_missing_without_reference_and_error_when_judge_fails(
    serve: Serve, client_for: ClientFor, run: JudgeInput
) -> None:
    """No reference: tool correctness is missing; a failed judge call makes it an error, never a 0."""
    good = serve(Reply.chat_json({"reason": "x", "score": 0.5}))
    _, missing, _ = ToolSelectionJudge(client_for(good), tool_correctness={}).evaluate(
        replace(run, reference_trajectory=None)
    )
    assert (missing.score, missing.error) == (None, "")
    bad = serve(Reply.error(500))
    selection, failed, failed_success = ToolSelectionJudge(
        client_for(bad, max_retries=0), tool_correctness={}
    ).evaluate(run)
    assert selection.error
    assert failed.error.startswith("tool selection judge failed")
    assert failed.score is None
    assert failed_success.score is None


def test_bad_tool_correctness_parameters_are_config_errors(serve: Serve, client_for: ClientFor) -> None:
    """Unknown or invalid tool_correctness parameters are caught when the judge is built."""
    client = client_for(serve(Reply.chat_json({})))
    with pytest.raises(ConfigError, match=r"unknown parameter\(s\) \['treshold'\]"):
        build_judge("s", {"type": "tool_selection", "tool_correctness": {"treshold": 1}}, client, "t")
    with pytest.raises(ConfigError, match="threshold"):
        build_judge("s", {"type": "tool_selection", "tool_correctness": {"threshold": 2}}, client, "t")
