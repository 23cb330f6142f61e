"""A run that calls end_conversation() has its conversation judged at once, live over OTLP, while a
conversation left open waits for its idle time."""

from __future__ import annotations

import json
import time
from typing import Any

from agenttrail.instrumentation import agent, end_conversation, set_conversation_id


@agent(name="chat")
def chat_round(conversation: str, text: str, last: bool = False) -> str:
    set_conversation_id(conversation)
    if last:
        end_conversation()
    return f"reply to {text}"


def judged_conversations(sidecar: Any) -> list[tuple[str, int]]:
    rows = sidecar.store.query("SELECT Details FROM scores FINAL WHERE Metric = 'sessions'")
    return sorted((json.loads(d)["conversation_id"], json.loads(d)["runs"]) for (d,) in rows)


def wait_for_judged(sidecar: Any, conversation: str) -> list[tuple[str, int]]:
    deadline = time.monotonic() + 60
    judged = judged_conversations(sidecar)
    while time.monotonic() < deadline and conversation not in {c for c, _ in judged}:
        time.sleep(0.1)
        judged = judged_conversations(sidecar)
    return judged


def test_an_ended_conversation_is_judged_without_waiting(live_judge_sidecar: Any, llm: Any) -> None:
    """With an idle time of an hour, the conversation whose last run ended it is judged once over
    both rounds; the open one is not judged. "Not judged" is checked after a marker: a conversation
    ended once the open one was stored and the first judged, so the worker had the open one in
    hand (in the marker's batch at the latest) when it judged the marker."""
    judge = {
        "name": "sessions",
        "type": "task_completion",
        "session_idle_s": 3600,
        "options": {"scope": "session"},
    }
    sidecar, provider = live_judge_sidecar(llm, judge, "chat")
    chat_round("open", "hello")
    chat_round("done", "first question")
    chat_round("done", "second question", last=True)
    assert provider.force_flush()
    assert sidecar.wait_until_assembled(30)
    assert ("done", 2) in wait_for_judged(sidecar, "done")
    chat_round("marker", "marker question", last=True)
    provider.shutdown()
    assert sidecar.wait_until_assembled(30)
    assert wait_for_judged(sidecar, "marker") == [("done", 2), ("marker", 1)]
    prompts = [request["messages"][1]["content"] for request in llm.chat_requests()]
    assert len(prompts) == 2
    assert "first question" in prompts[0]
    assert "second question" in prompts[0]
    assert "marker question" in prompts[1]
