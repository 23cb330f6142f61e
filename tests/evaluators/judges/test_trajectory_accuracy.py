"""The trajectory accuracy judge (agentevals style)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from llm_server import LlmServer, Reply

from agenttrail.evaluators.judges import JudgeInput, TrajectoryAccuracyJudge
from agenttrail.evaluators.judges.client import OpenAIJudgeClient

Serve = Callable[..., LlmServer]
ClientFor = Callable[..., OpenAIJudgeClient]


def test_pass_and_fail_become_one_and_zero(serve: Serve, client_for: ClientFor, run: JudgeInput) -> None:
    """Pass/fail mode: true is 1 with label pass, false is 0 with label fail; reasoning is the explanation."""
    llm = serve(
        Reply.chat_json({"reasoning": "good", "score": True}),
        Reply.chat_json({"reasoning": "bad", "score": False}),
    )
    judge = TrajectoryAccuracyJudge(client_for(llm))
    (passed,) = judge.evaluate(run)
    (failed,) = judge.evaluate(run)
    assert (passed.score, passed.label, passed.explanation) == (1.0, "pass", "good")
    assert (failed.score, failed.label, failed.explanation) == (0.0, "fail", "bad")
    schema = llm.chat_requests()[0]["response_format"]["json_schema"]["schema"]
    assert list(schema["properties"]) == ["reasoning", "score"]
    assert schema["properties"]["score"] == {"type": "boolean"}


def test_continuous_scores_are_kept(serve: Serve, client_for: ClientFor, run: JudgeInput) -> None:
    """Continuous mode asks for a number in [0, 1] and stores it; without reasoning none is asked."""
    llm = serve(Reply.chat_json({"score": 0.8}))
    (result,) = TrajectoryAccuracyJudge(client_for(llm), continuous=True, use_reasoning=False).evaluate(run)
    assert (result.score, result.label) == (0.8, "")
    schema = llm.chat_requests()[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"] == {"score": {"type": "number", "minimum": 0, "maximum": 1}}


def test_reference_is_shown_when_used(serve: Serve, client_for: ClientFor, run: JudgeInput) -> None:
    """use_reference adds the reference trajectory section and the equivalence rule."""
    llm = serve(Reply.chat_json({"reasoning": "same", "score": True}))
    TrajectoryAccuracyJudge(client_for(llm), use_reference=True).evaluate(run)
    system, user = (message["content"] for message in llm.chat_requests()[0]["messages"])
    assert "semantically equivalent to the reference trajectory" in system
    assert "<<<DATA name=reference_trajectory>>>" in user
    plain = serve(Reply.chat_json({"reasoning": "ok", "score": True}))
    TrajectoryAccuracyJudge(client_for(plain)).evaluate(run)
    assert "reference" not in plain.chat_requests()[0]["messages"][1]["content"]


def test_use_reference_without_reference_is_missing(
    serve: Serve, client_for: ClientFor, run: JudgeInput
) -> None:
    """A run without a reference is missing under use_reference, and nothing is sent."""
    llm = serve(Reply.chat_json({"reasoning": "x", "score": True}))
    (result,) = TrajectoryAccuracyJudge(client_for(llm), use_reference=True).evaluate(
        replace(run, reference_trajectory=None)
    )
    assert (result.score, result.error) == (None, "")
    assert "no reference trajectory" in result.explanation
    assert llm.chat_requests() == []


def test_trajectory_steps_show_arguments_results_and_errors(
    serve: Serve, client_for: ClientFor, run: JudgeInput
) -> None:
    """The trajectory section numbers the steps, with arguments, results, and errors of failed calls."""
    failed = {
        "name": "forecast",
        "input": {"lat": 1},
        "output": None,
        "status": "error",
        "error_type": "Timeout",
    }
    llm = serve(Reply.chat_json({"reasoning": "x", "score": False}))
    TrajectoryAccuracyJudge(client_for(llm)).evaluate(replace(run, tool_calls=(*run.tool_calls, failed)))
    user = llm.chat_requests()[0]["messages"][1]["content"]
    assert '"step": 3' in user
    assert '"error": "Timeout"' in user
    assert '"arguments": {\n      "city": "Paris"\n    }' in user
