"""The task completion judge (UFO EvaluationAgent)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from llm_server import LlmServer, Reply

from agenttrail.evaluators.judges import JudgeInput, TaskCompletionJudge
from agenttrail.evaluators.judges.client import OpenAIJudgeClient

Serve = Callable[..., LlmServer]
ClientFor = Callable[..., OpenAIJudgeClient]


def answer(complete: str) -> dict[str, Any]:
    return {
        "sub_scores": [
            {"sub_goal": "locate Paris", "evaluation": "yes"},
            {"sub_goal": "get tomorrow's forecast", "evaluation": complete},
        ],
        "reason": "because",
        "complete": complete,
    }


@pytest.mark.parametrize(("complete", "score"), [("yes", 1.0), ("no", 0.0), ("unsure", None)])
def test_verdicts_map_to_scores(
    complete: str, score: float | None, serve: Serve, client_for: ClientFor, run: JudgeInput
) -> None:
    """yes = 1, no = 0, unsure = missing (no score, label unsure, not an error); sub-scores kept."""
    llm = serve(Reply.chat_json(answer(complete)))
    (result,) = TaskCompletionJudge(client_for(llm)).evaluate(run)
    assert (result.score, result.label, result.error, result.explanation) == (score, complete, "", "because")
    assert result.details == {
        "sub_scores": {"locate Paris": "yes", "get tomorrow's forecast": complete},
        "complete": complete,
    }


def test_sees_request_tools_and_trajectory(serve: Serve, client_for: ClientFor, run: JudgeInput) -> None:
    """The prompt asks for sub-goals first and shows the request, the tool descriptions and the steps."""
    llm = serve(Reply.chat_json(answer("yes")))
    TaskCompletionJudge(client_for(llm)).evaluate(run)
    system, user = (message["content"] for message in llm.chat_requests()[0]["messages"])
    assert "Decompose the user request into its sub-goals" in system
    for name in ("user_input", "available_tools", "trajectory", "final_response"):
        assert f"<<<DATA name={name}>>>" in user
    assert "Send an email" in user


def test_bad_verdict_is_repaired(serve: Serve, client_for: ClientFor, run: JudgeInput) -> None:
    """A verdict outside yes/no/unsure is sent back for one repair."""
    llm = serve(Reply.chat_json({**answer("yes"), "complete": "mostly"}), Reply.chat_json(answer("no")))
    (result,) = TaskCompletionJudge(client_for(llm)).evaluate(run)
    assert result.score == 0.0
    assert (
        '$.complete: expected one of ["yes", "no", "unsure"]'
        in llm.chat_requests()[1]["messages"][-1]["content"]
    )


@pytest.mark.parametrize(
    ("mode", "sent"), [("all", ["s1", "s2", "s3"]), ("first_and_last", ["s1", "s3"]), ("none", [])]
)
def test_screenshots_are_sent_as_images(
    mode: str, sent: list[str], serve: Serve, client_for: ClientFor, run: JudgeInput
) -> None:
    """Screenshots go as image_url parts: all, only the first and last, or none."""
    llm = serve(Reply.chat_json(answer("yes")))
    shots = ("data:image/png;base64,s1", "data:image/png;base64,s2", "data:image/png;base64,s3")
    TaskCompletionJudge(client_for(llm), screenshots=mode).evaluate(replace(run, screenshots=shots))  # type: ignore[arg-type]
    content = llm.chat_requests()[0]["messages"][1]["content"]
    parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
    urls = [part["image_url"]["url"].rsplit(",", 1)[1] for part in parts if part["type"] == "image_url"]
    assert urls == sent


def test_session_scope_judges_every_run_of_the_conversation(
    serve: Serve, client_for: ClientFor, run: JudgeInput
) -> None:
    """Scope session renders each run of the conversation, in order, as its own sections."""
    second = replace(run, input="And the day after?", output="Cloudy.", tool_calls=run.tool_calls[:1])
    session = replace(run, runs=(run, second))
    llm = serve(Reply.chat_json(answer("yes")))
    TaskCompletionJudge(client_for(llm), scope="session").evaluate(session)
    user = llm.chat_requests()[0]["messages"][1]["content"]
    assert user.index("<<<DATA name=run_1.user_input>>>") < user.index("<<<DATA name=run_2.user_input>>>")
    assert "<<<DATA name=run_2.user_input>>>\nAnd the day after?\n<<<END DATA>>>" in user
    assert user.count("<<<DATA name=available_tools>>>") == 1
    assert "every run of one conversation" in llm.chat_requests()[0]["messages"][0]["content"]


def test_session_scope_describes_the_tools_of_every_run(
    serve: Serve, client_for: ClientFor, run: JudgeInput
) -> None:
    """A session's APIs description is every tool its runs offered, each named once, in first-seen
    order (a later run may offer a tool the first did not)."""
    first = replace(run, available_tools=({"name": "geocode", "description": "City to coordinates"},))
    later = replace(
        run,
        input="Book a table",
        available_tools=(
            {"name": "geocode", "description": "City to coordinates"},
            {"name": "book_table", "description": "Reserve a restaurant table"},
        ),
    )
    llm = serve(Reply.chat_json(answer("yes")))
    TaskCompletionJudge(client_for(llm), scope="session").evaluate(replace(first, runs=(first, later)))
    user = llm.chat_requests()[0]["messages"][1]["content"]
    tools = user.split("<<<DATA name=available_tools>>>", 1)[1].split("<<<END DATA>>>", 1)[0]
    assert "Reserve a restaurant table" in tools
    assert tools.count('"geocode"') == 1
