"""A session-scope judge judges each conversation once, when it has been quiet for the configured
idle time, over all its rounds; a conversation that resumes is judged again, replacing its result."""

from __future__ import annotations

import json
import time
from typing import Any

from agenttrail.evaluators.judges.worker import JudgeWorker


def session_rows(store: Any) -> dict[str, tuple[int, dict[str, Any]]]:
    """conversation -> (Revision, Details) of the judge's stored results, one row per key."""
    rows = store.query(
        "SELECT Revision, Details FROM scores FINAL WHERE Metric = 'sessions' ORDER BY TraceId"
    )
    found = {}
    for revision, details in rows:
        parsed = json.loads(details)
        assert parsed["conversation_id"] not in found, "a second row for one conversation"
        found[parsed["conversation_id"]] = (int(revision), parsed)
    return found


def test_two_conversations_judged_once_each_after_idle_and_a_resumed_one_replaced(
    judges_store: Any, add_runs: Any, make_judge: Any, llm: Any, decisions_of: Any
) -> None:
    """Two conversations of three rounds: nothing while they may go on, then exactly two results,
    each over all three rounds; a fourth round later gives a new version of that result."""
    first = add_runs(3, conversation="conv-a", age_s=30)
    add_runs(3, conversation="conv-b", age_s=30)
    judge = make_judge("sessions", type="task_completion", options={"scope": "session"}, session_idle_s=60)
    offset = [0.0]
    worker = JudgeWorker(judges_store.clone, [judge], clock=lambda: time.time() + offset[0])

    assert worker.run_once() == 0  # quiet for 30 s of 60: both may go on
    assert session_rows(judges_store) == {}
    assert decisions_of(judges_store, "sessions") == {}

    offset[0] = 40.0  # quiet for 70 s
    assert worker.run_once() == 6
    assert worker.run_once() == 0
    results = session_rows(judges_store)
    assert {conv: (rev, details["runs"]) for conv, (rev, details) in results.items()} == {
        "conv-a": (3, 3),
        "conv-b": (3, 3),
    }
    prompts = [request["messages"][1]["content"] for request in llm.chat_requests()]
    assert len(prompts) == 2
    assert all("name=run_3.user_input" in p and "name=run_4" not in p for p in prompts)
    assert {decision for decision, _ in decisions_of(judges_store, "sessions").values()} == {"done"}

    resumed = add_runs(1, conversation="conv-a")  # a fourth round, just now
    assert worker.run_once() == 0  # conv-a may go on again
    offset[0] = 70.0
    assert worker.run_once() == 1
    results = session_rows(judges_store)
    assert results["conv-a"][0] == 4
    assert results["conv-a"][1]["runs"] == 4
    assert results["conv-b"][0] == 3
    assert "name=run_4.user_input" in llm.chat_requests()[-1]["messages"][1]["content"]
    [anchor] = judges_store.query(
        "SELECT DISTINCT TraceId FROM scores FINAL WHERE Metric = 'sessions' AND Revision = 4"
    )
    assert anchor[0] == first[0]  # the conversation's first run holds its result
    assert decisions_of(judges_store, "sessions")[resumed[0]][0] == "done"


def test_waiting_conversations_do_not_hold_the_queue(
    judges_store: Any, add_runs: Any, make_judge: Any, llm: Any, decisions_of: Any
) -> None:
    """More runs of conversations that may go on than a batch holds: they are set aside until
    they may be quiet, so a run with no conversation behind them is judged in the next batches."""
    for name in ("conv-a", "conv-b", "conv-c"):
        add_runs(2, conversation=name, age_s=30)
    [alone] = add_runs(1, age_s=0)  # assembled last: the pending query returns it after the others
    judge = make_judge("sessions", type="task_completion", options={"scope": "session"}, session_idle_s=600)
    worker = JudgeWorker(judges_store.clone, [judge], batch_size=4)

    decided = sum(worker.run_once() for _ in range(3))
    assert decided == 1
    assert decisions_of(judges_store, "sessions")[alone][0] == "done"
    assert len(llm.chat_requests()) == 1  # the lone run; the conversations still wait
