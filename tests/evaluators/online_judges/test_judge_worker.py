"""The online judge worker on a real chDB store, with the model played by a local server."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from llm_server import Reply

from agenttrail.evaluators.judges.worker import JudgeWorker
from agenttrail.evaluators.scoring.scores import ScoreFilter, query_scores
from agenttrail.evaluators.scoring.worker import sample_fraction


def drain(worker: JudgeWorker, rounds: int = 50) -> None:
    for _ in range(rounds):
        if worker.run_once() == 0:
            return
    raise AssertionError("the worker never ran out of work")


def test_judged_runs_are_stored_with_usage(
    judges_store: Any, add_runs: Any, make_judge: Any, decisions_of: Any, llm: Any
) -> None:
    """Each judged run gets a score row with model, tokens, latency, cost and details, and a done decision."""
    traces = add_runs(3)
    worker = JudgeWorker(judges_store.clone, [make_judge("helpful")], batch_size=2)
    drain(worker)
    assert len(llm.chat_requests()) == 3
    assert {t: d for t, (d, _) in decisions_of(judges_store, "helpful").items()} == dict.fromkeys(
        traces, "done"
    )
    [row] = query_scores(judges_store, ScoreFilter.from_params({"trace_id": traces[0]}))
    assert row["metric"] == "helpful"
    assert row["evaluator"] == f"helpful@{worker.judges[0].judge.version}"
    assert (row["score"], row["label"], row["explanation"]) == (0.75, "", "mostly right")
    assert (row["model"], row["prompt_tokens"], row["completion_tokens"]) == ("judge-model", 120, 30)
    assert row["cost"] == pytest.approx(120e-6 + 60e-6)
    assert row["latency_ms"] >= 0
    assert "error" not in row
    assert worker.counters.per_judge["helpful"].prompt_tokens == 360
    worker.run_once()
    assert len(llm.chat_requests()) == 3, "decided runs are not judged again"


def test_judged_scores_carry_the_runs_agent_version(
    judges_store: Any, add_runs: Any, make_judge: Any
) -> None:
    """A judge's score row keeps the judged run's agent version, as the evaluator's do, so drift
    against a version reads it from the scores; a run without one stores "" (known: none)."""
    [v2] = add_runs(version="2.0")
    [none] = add_runs()
    drain(JudgeWorker(judges_store.clone, [make_judge("helpful")]))
    rows = judges_store.query("SELECT TraceId, AgentVersion FROM scores WHERE Metric = 'helpful'")
    assert dict(rows) == {v2: "2.0", none: ""}


def test_sampling_is_shared_between_judges(
    judges_store: Any, add_runs: Any, make_judge: Any, decisions_of: Any
) -> None:
    """Two judges at the same rate judge exactly the same runs, about rate x runs of them."""
    traces = add_runs(200)
    judges = [
        make_judge("a", sample_rate=0.25, concurrency=8),
        make_judge("b", sample_rate=0.25, concurrency=8),
    ]
    worker = JudgeWorker(judges_store.clone, judges, batch_size=100)
    drain(worker)
    done = {
        name: {t for t, (d, _) in decisions_of(judges_store, name).items() if d == "done"}
        for name in ("a", "b")
    }
    assert done["a"] == done["b"] == {t for t in traces if sample_fraction(t) < 0.25}
    assert 20 <= len(done["a"]) <= 80
    assert {d for d, _ in decisions_of(judges_store, "a").values()} == {"done", "sampled_out"}


def test_filters_by_agent_task_and_failure(
    judges_store: Any, add_runs: Any, make_judge: Any, decisions_of: Any
) -> None:
    """Runs outside a judge's agents, tasks or failure filter are recorded as filtered, naming the filter."""
    [wanted] = add_runs(agent="support", task="refund", failed=True)
    [other_agent] = add_runs(agent="sales", task="refund", failed=True)
    [other_task] = add_runs(agent="support", task="faq", failed=True)
    [succeeded] = add_runs(agent="support", task="refund", failed=False)
    judge = make_judge("failures", agents=["support"], tasks=["refund"], failure="failed")
    drain(JudgeWorker(judges_store.clone, [judge]))
    found = decisions_of(judges_store, "failures")
    assert found[wanted] == ("done", "")
    assert found[other_agent][0] == "filtered"
    assert "agent 'sales'" in found[other_agent][1]
    assert found[other_task][0] == "filtered"
    assert "task 'faq'" in found[other_task][1]
    assert found[succeeded] == ("filtered", "failure: failed, and the run succeeded")


def test_error_answers_are_stored_as_error_rows(
    judges_store: Any, add_runs: Any, make_judge: Any, decisions_of: Any, llm: Any
) -> None:
    """A malformed answer is stored as a row with the error and a NULL score, never 0, and decided error."""
    llm.responder = lambda request: Reply.chat("this is not JSON")
    [trace] = add_runs()
    drain(JudgeWorker(judges_store.clone, [make_judge("helpful")]))
    decision, detail = decisions_of(judges_store, "helpful")[trace]
    assert decision == "error"
    [row] = query_scores(judges_store, ScoreFilter.from_params({"trace_id": trace}))
    assert row["score"] is None
    assert row["error"] == detail != ""
    assert row["prompt_tokens"] == 200, "the answer and its one repair are both counted"
    assert len(llm.chat_requests()) == 2


def test_budget_pauses_the_judge_and_resumes(
    judges_store: Any, add_runs: Any, make_judge: Any, decisions_of: Any, caplog: Any, llm: Any
) -> None:
    """A spent budget pauses the judge: one WARNING naming it and when it resumes, runs left pending,
    no model calls while paused; after the window turns over the rest is judged."""
    now = [86400.0 * 20_000 + 3600]
    clock = lambda: now[0]  # noqa: E731
    traces = add_runs(6)
    judge = make_judge("thrifty", token_budget=600, clock=clock, concurrency=1)  # 4 calls of 150 tokens
    worker = JudgeWorker(judges_store.clone, [judge], clock=clock)
    with caplog.at_level(logging.WARNING, logger="agenttrail.evaluators.judges.worker"):
        assert worker.run_once() == 4
        assert worker.run_once() == 0
        assert worker.run_once() == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "'thrifty'" in warnings[0]
    assert "600 of 600 tokens per day" in warnings[0]
    assert "resumes at 2024-10-05T00:00:00Z" in warnings[0]
    status = worker.status()["thrifty"]
    assert status.startswith("paused: ")
    assert "tokens per day" in status
    assert status.endswith("2024-10-05T00:00:00Z")
    found = decisions_of(judges_store, "thrifty")
    assert sorted(d for d, _ in found.values()) == ["budget_paused"] * 2 + ["done"] * 4
    assert len(llm.chat_requests()) == 4, "no model call while paused"
    now[0] += 86400
    drain(worker)
    assert worker.status() == {"thrifty": "ok"}
    assert {d for d, _ in decisions_of(judges_store, "thrifty").values()} == {"done"}
    assert set(decisions_of(judges_store, "thrifty")) == set(traces)


def test_new_judge_version_rejudges_and_keeps_old_results(
    judges_store: Any, add_runs: Any, make_judge: Any, llm: Any
) -> None:
    """A changed judge (its settings hash to a new version) judges the runs again; the old
    version's rows stay."""
    traces = add_runs(2)
    first = make_judge("helpful")
    drain(JudgeWorker(judges_store.clone, [first]))
    llm.responder = lambda request: Reply.chat_json({"reasoning": "stricter", "score": 0.25})
    second = make_judge("helpful", temperature=0.5)
    assert second.version != first.version
    drain(JudgeWorker(judges_store.clone, [second]))
    rows = query_scores(judges_store, ScoreFilter.from_params({"trace_id": traces[0]}))
    assert sorted((r["evaluator"], r["score"]) for r in rows) == sorted(
        [(f"helpful@{first.version}", 0.75), (f"helpful@{second.version}", 0.25)]
    )
    assert len(llm.chat_requests()) == 4


def test_session_judge_sees_the_whole_conversation(
    judges_store: Any, add_runs: Any, make_judge: Any, llm: Any, decisions_of: Any
) -> None:
    """A session-scope task completion judge judges a quiet conversation once, with every stored
    run of it; a run without a conversation is a session of one."""
    conversation = add_runs(3, conversation="conv-1", age_s=5)
    add_runs(1)
    online = make_judge("session", type="task_completion", options={"scope": "session"}, session_idle_s=1)
    assert online.session
    drain(JudgeWorker(judges_store.clone, [online]))
    prompts = [json.dumps(request["messages"]) for request in llm.chat_requests()]
    whole = [p for p in prompts if all(f"request {i}" in p for i in range(3))]
    assert len(prompts) == 2
    assert len(whole) == 1, "the conversation is judged once, with all three runs"
    assert {d for d, _ in decisions_of(judges_store, "session").values()} == {"done"}
    [row] = query_scores(judges_store, ScoreFilter.from_params({"trace_id": conversation[0]}))
    assert (row["score"], row["label"], row["revision"]) == (1.0, "yes", 3)
    assert row["details"] == {
        "sub_scores": {"answer the user": "yes"},
        "complete": "yes",
        "conversation_id": "conv-1",
        "runs": 3,
    }


def test_two_judges_with_the_same_version_keep_separate_queues(
    judges_store: Any, add_runs: Any, make_judge: Any, decisions_of: Any
) -> None:
    """Judges that share a pinned version still each decide every run, and store that version."""
    traces = add_runs(3)
    judges = [make_judge("one", version="pinned"), make_judge("two", version="pinned")]
    drain(JudgeWorker(judges_store.clone, judges))
    assert set(decisions_of(judges_store, "one")) == set(decisions_of(judges_store, "two")) == set(traces)
    rows = query_scores(judges_store, ScoreFilter.from_params({"trace_id": traces[0]}))
    assert sorted(r["evaluator"] for r in rows) == ["one@pinned", "two@pinned"]


def test_worker_runs_a_full_cycle_in_its_thread(
    judges_store: Any, add_runs: Any, make_judge: Any, decisions_of: Any
) -> None:
    """Started as a background worker, it judges runs and stops cleanly."""
    import time

    traces = add_runs(2)
    worker = JudgeWorker(judges_store.clone, [make_judge("helpful")], poll_interval_s=0.05)
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while len(decisions_of(judges_store, "helpful")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert worker.alive()
    finally:
        worker.stop()
    assert set(decisions_of(judges_store, "helpful")) == set(traces)
    assert not worker.alive()


def test_judging_waits_while_ingestion_has_a_backlog(
    judges_store: Any, add_runs: Any, make_judge: Any, llm: Any
) -> None:
    """While the ingest queue is backed up the worker judges nothing; once it drains, it judges."""
    traces = add_runs(2)
    busy = [True]
    worker = JudgeWorker(judges_store.clone, [make_judge("helpful")], ingest_busy=lambda: busy[0])
    assert worker.run_once() == 0
    assert llm.chat_requests() == []
    assert worker.counters.yielded_cycles == 1
    busy[0] = False
    assert worker.run_once() == 2
    assert len(llm.chat_requests()) == len(traces)
