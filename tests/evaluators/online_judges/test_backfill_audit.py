"""Backfill of past runs and the per-run audit of decisions, on a real chDB store."""

from __future__ import annotations

from typing import Any

from llm_server import Reply

from agenttrail.collector.queries import TrajectoryFilter, parse_time
from agenttrail.evaluators.admin.backfill import backfill
from agenttrail.evaluators.judges.worker import JudgeWorker
from agenttrail.evaluators.scoring.audit import AuditSubject, audit_run

WEEK = 7 * 86400


def test_backfill_judges_old_runs_once(
    judges_store: Any, add_runs: Any, make_judge: Any, decisions_of: Any, llm: Any
) -> None:
    """Runs older than the online window are judged by backfill once; a second backfill does nothing;
    a dry run counts without calling the model."""
    old = add_runs(5, age_s=WEEK)
    online = make_judge("helpful")
    JudgeWorker(judges_store.clone, [online], lookback_s=86400).run_once()
    assert decisions_of(judges_store, "helpful") == {}, "the online worker keeps to its window"

    window = TrajectoryFilter(since=parse_time("8d"), limit=100)
    dry = backfill(judges_store, online, window, dry_run=True)
    assert dict(dry.would) == {"judge": 5}
    assert llm.chat_requests() == []

    seen: list[int] = []
    report = backfill(judges_store, online, window, batch_size=2, progress=lambda r: seen.append(r.decided))
    assert report.outcome.decisions["done"] == 5
    assert seen == [2, 4, 5]
    assert report.outcome.prompt_tokens == 600
    assert set(decisions_of(judges_store, "helpful")) == set(old)
    again = backfill(judges_store, online, window)
    assert again.decided == 0
    assert len(llm.chat_requests()) == 5


def test_backfill_respects_range_limit_and_budget(
    judges_store: Any, add_runs: Any, make_judge: Any, decisions_of: Any
) -> None:
    """--until, --agent and --limit narrow the runs; a spent budget stops backfill with runs left pending."""
    add_runs(3, age_s=3 * 86400, agent="a")
    add_runs(2, age_s=3 * 86400, agent="b")
    add_runs(2, age_s=60, agent="a")
    online = make_judge("helpful")
    limited = TrajectoryFilter(since=parse_time("4d"), until=parse_time("1d"), agent="a", limit=2)
    assert backfill(judges_store, online, limited).decided == 2
    clock = lambda: 86400.0 * 20_000  # noqa: E731
    thrifty = make_judge("thrifty", token_budget=300, clock=clock, concurrency=1)  # 2 calls
    report = backfill(judges_store, thrifty, TrajectoryFilter(since=parse_time("4d"), limit=100))
    assert report.outcome.pause is not None
    assert report.outcome.decisions["done"] == 2
    assert report.outcome.decisions["budget_paused"] == 5


def test_audit_lists_every_decision_kind(judges_store: Any, add_runs: Any, make_judge: Any, llm: Any) -> None:
    """The audit shows, per run, each evaluator's decision: done, sampled_out, filtered, error,
    budget_paused, pending (with the reason), disabled."""
    [trace] = add_runs(agent="support")
    [old] = add_runs(agent="support", age_s=WEEK)
    clock = lambda: 86400.0 * 20_000  # noqa: E731
    judges = [
        make_judge("done"),
        make_judge("sampled", sample_rate=0.0),
        make_judge("filtered", agents=["sales"]),
        make_judge("broken"),
        make_judge("thrifty", token_budget=1, clock=clock),
        make_judge("waiting"),
    ]
    judges[4].judge.client.budget.record(tokens=1, cost=0.0)  # already spent today
    JudgeWorker(judges_store.clone, judges[:3], lookback_s=86400).run_once()
    llm.responder = lambda request: Reply.chat("not json")
    JudgeWorker(judges_store.clone, judges[3:5], lookback_s=86400, clock=clock).run_once()
    subjects = [AuditSubject(j.name, j.version, j.queue_key, backfill_hint=True) for j in judges] + [
        AuditSubject("off", "", "", "disabled")
    ]
    rows = audit_run(judges_store, trace, subjects, lookback_s=86400)
    assert {r["evaluator"]: r["decision"] for r in rows} == {
        "done": "done",
        "sampled": "sampled_out",
        "filtered": "filtered",
        "broken": "error",
        "thrifty": "budget_paused",
        "waiting": "pending",
        "off": "disabled",
    }
    by_name = {r["evaluator"]: r for r in rows}
    assert "agent 'support'" in by_name["filtered"]["detail"]
    assert "invalid answer" in by_name["broken"]["detail"]
    assert "resumes" in by_name["thrifty"]["detail"]
    assert by_name["done"]["decided_at"].endswith("Z")
    assert by_name["waiting"]["decided_at"] is None
    [old_row] = audit_run(judges_store, old, subjects[:1], lookback_s=86400)
    assert old_row["decision"] == "pending"
    assert "backfill --judge done" in old_row["detail"]
    assert audit_run(judges_store, "0" * 32, subjects, lookback_s=86400) == []
