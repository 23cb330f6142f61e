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


def test_an_ended_conversation_is_judged_without_waiting(live_judge_sidecar: Any, llm: Any) -> None:
    """With an idle time of an hour, the conversation whose last run ended it is judged once over
    both rounds; the open one is not judged."""
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
    provider.shutdown()
    assert sidecar.wait_until_assembled(30)
    deadline = time.monotonic() + 30
    rows: list[Any] = []
    while time.monotonic() < deadline and not rows:
        rows = sidecar.store.query("SELECT Details FROM scores FINAL WHERE Metric = 'sessions'")
        time.sleep(0.1)
    time.sleep(0.5)  # a few more cycles: the open conversation must still wait
    rows = sidecar.store.query("SELECT Details FROM scores FINAL WHERE Metric = 'sessions'")
    assert [(json.loads(d)["conversation_id"], json.loads(d)["runs"]) for (d,) in rows] == [("done", 2)]
    [prompt] = [request["messages"][1]["content"] for request in llm.chat_requests()]
    assert "first question" in prompt
    assert "second question" in prompt
