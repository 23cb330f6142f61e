"""Decide a batch of runs for one judge: filter, sample, judge in parallel, store, record.

Shared by the online judge worker and `agenttrail backfill`, so both record the same
decisions: `filtered` (detail: which filter), `sampled_out`, `done`, `error` (detail: the
message; the result rows are stored with Error set and Score NULL) and `budget_paused` (the
budget ran out before the run was judged; the run stays pending).

A session-scope judge judges a conversation (runs sharing a conversation id) once, when its
last run ended `session_idle_s` ago, or at once when that last run marks the conversation ended
(`agenttrail.conversation.ended`, set by `end_conversation()`): until then its runs stay
pending, undecided. Its result is stored under the conversation's first run, with Revision =
the number of runs judged and the conversation and its runs in Details, so a conversation that
resumes is judged again and the new result replaces the old one (the same row key: a new
version, never a second row). Filters and sampling apply to the conversation's first run. A run
with no conversation is a session of one.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from agenttrail.collector.queries import TRAJECTORY_JSON_COLUMNS, trajectory_to_json
from agenttrail.collector.store import Store
from agenttrail.evaluators.judges.base import BudgetExhausted, Judge, JudgeInput, JudgeResult
from agenttrail.evaluators.judges.config import JudgeSpec
from agenttrail.evaluators.metrics import ABSENT
from agenttrail.evaluators.scoring.reference_store import StoredReference
from agenttrail.evaluators.scoring.run_queue import DecisionRow, now_stamp, record_decisions
from agenttrail.evaluators.scoring.schema import ScoreRow
from agenttrail.instrumentation.attributes import AGENTTRAIL_CONVERSATION_ENDED as CONVERSATION_ENDED

_CONVERSATIONS = f"""
SELECT {TRAJECTORY_JSON_COLUMNS} FROM trajectories FINAL
WHERE IsDeleted = 0 AND ConversationId IN {{ids:Array(String)}}
ORDER BY Start, TraceId
"""

_ENDED = """
SELECT DISTINCT TraceId FROM otel_traces
WHERE TraceId IN {traces:Array(String)} AND SpanAttributes[{key:String}] = 'true'
"""


@dataclass(frozen=True, slots=True)
class OnlineJudge:
    """A configured judge, built: what the worker and backfill run."""

    spec: JudgeSpec
    judge: Judge
    concurrency: int = 4  # calls in flight at once (the client's limit)
    session: bool = False  # judged with every run of its conversation
    session_idle_s: float = 900.0  # a conversation quiet this long is judged (session judges)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def version(self) -> str:
        """The configured pin, else the judge's own hash of its prompt and settings."""
        return self.spec.version or self.judge.version

    @property
    def queue_key(self) -> str:
        """Its key in decisions and heartbeats: qualified by name, since two judges may share a
        version (same settings, or the same pinned version)."""
        return f"{self.spec.name}@{self.version}"


@dataclass
class BatchOutcome:
    decisions: Counter[str] = field(default_factory=Counter)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    pause: BudgetExhausted | None = None  # set when the budget ran out during the batch
    # session judges: (trace, root) of runs whose conversation may go on -> when it may be quiet
    waiting: dict[tuple[str, str], float] = field(default_factory=dict)

    @property
    def decided(self) -> int:
        """Runs that left the queue (budget-paused runs stay in it)."""
        return sum(n for decision, n in self.decisions.items() if decision != "budget_paused")

    def add(self, other: BatchOutcome) -> None:
        self.decisions.update(other.decisions)
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost += other.cost
        self.pause = other.pause or self.pause


def reference_json(reference: StoredReference) -> tuple[Mapping[str, Any], ...]:
    """A reference trajectory as judges see it: name, and input/output where given."""
    calls = []
    for call in reference.entry.reference:
        item: dict[str, Any] = {"name": call.name}
        if call.input is not ABSENT:
            item["input"] = call.input
        if call.output is not ABSENT:
            item["output"] = call.output
        calls.append(item)
    return tuple(calls)


def judge_input(
    run: Mapping[str, Any],
    reference: StoredReference | None = None,
    session: Sequence[JudgeInput] = (),
) -> JudgeInput:
    """A judge's view of a stored run (`trajectories --format json` shape) with its task's reference."""
    return JudgeInput.from_trajectory(
        run,
        reference_trajectory=reference_json(reference) if reference else None,
        expected_response=reference.entry.expected_response if reference else None,
        runs=tuple(session),
    )


def conversations(store: Store, runs: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Every stored run of the batch's conversations (`trajectories --format json` rows), in start
    order, in one query."""
    ids = sorted({run["conversation_id"] for run in runs if run["conversation_id"]})
    found: dict[str, list[dict[str, Any]]] = {}
    if ids:
        for row in store.query(_CONVERSATIONS, {"ids": ids}):
            member = trajectory_to_json(row)
            found.setdefault(member["conversation_id"], []).append(member)
    return found


def ended_conversations(store: Store, last_runs: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """The conversations whose last run marked them ended (`agenttrail.conversation.ended` on a
    span of that run's trace, e.g. from `agenttrail.instrumentation.end_conversation()`)."""
    traces = sorted({run["trace_id"] for run in last_runs.values()})
    if not traces:
        return set()
    rows = store.query(_ENDED, {"traces": traces, "key": CONVERSATION_ENDED})
    ended = {row[0] for row in rows}
    return {conversation for conversation, run in last_runs.items() if run["trace_id"] in ended}


def _end_s(run: Mapping[str, Any]) -> float:
    return float(_seconds(run["start"])) + float(run["latency_s"] or 0.0)


def _seconds(iso: str) -> str:
    return f"{datetime.fromisoformat(iso.replace('Z', '+00:00')).astimezone(UTC).timestamp():.6f}"


def score_row(
    online: OnlineJudge, result: JudgeResult, run: Mapping[str, Any], reference_version: int, stamp: str
) -> ScoreRow:
    """One stored verdict; an error keeps Score NULL."""
    return ScoreRow(
        TraceId=run["trace_id"],
        RootSpanId=run["root_span_id"],
        Metric=result.metric,
        Evaluator=online.name,
        EvaluatorVersion=online.version,
        Score=None if result.error else result.score,
        Label=result.label,
        Explanation=result.explanation,
        Agent=run["agent"],
        Task=run["task"],
        RunStart=_seconds(run["start"]),
        Revision=run["revision"],
        # the judged revision's, as the evaluator writes it; None (unknown, drift looks it up by
        # trace) for runs that come without one (an older caller's JSON)
        AgentVersion=run.get("agent_version"),
        ReferenceVersion=reference_version,
        Error=result.error,
        CreatedAt=stamp,
        Model=result.model,
        PromptTokens=result.prompt_tokens,
        CompletionTokens=result.completion_tokens,
        LatencyMs=round(result.latency_s * 1000),
        Cost=result.cost,
        Details=json.dumps(dict(result.details), ensure_ascii=False, default=str) if result.details else "",
    )


def resume_text(resume_at: float) -> str:
    return datetime.fromtimestamp(resume_at, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pause_text(pause: BudgetExhausted) -> str:
    """Which budget is spent and when judging resumes (the client's message usually says both)."""
    text = str(pause)
    resumes = resume_text(pause.resume_at)
    return text if resumes in text else f"{text}; resumes {resumes}"


def decide_runs(
    store: Store,
    online: OnlineJudge,
    runs: Sequence[Mapping[str, Any]],
    executor: Executor,
    *,
    references: Mapping[str, StoredReference],
    worker_id: str,
    now: float | None = None,
) -> BatchOutcome:
    """Decide every run of the batch for this judge; store scores, then decisions. `now` (unix
    seconds, default the clock) decides which conversations are quiet (session judges)."""
    if online.session:
        return _decide_sessions(
            store, online, runs, executor, references=references, worker_id=worker_id, now=now
        )
    outcome = BatchOutcome()
    decisions: list[tuple[str, str]] = []  # per run, in order: (decision, detail)
    chosen: list[int] = []
    for index, run in enumerate(runs):
        decisions.append(_admitted(online, run))
        if not decisions[-1][0]:
            chosen.append(index)
    inputs = {index: _judged(runs[index], references) for index in chosen}
    _judge_and_store(store, online, runs, inputs, {}, decisions, executor, outcome, references, worker_id)
    return outcome


def _admitted(online: OnlineJudge, run: Mapping[str, Any]) -> tuple[str, str]:
    """('', '') when the judge takes the run, else the filter or sampling decision."""
    reason = online.spec.filtered_by(run["agent"], run["task"], bool(run["failure"]))
    if reason:
        return ("filtered", reason)
    if not online.spec.sampled(run["trace_id"]):
        return ("sampled_out", f"sample rate {online.spec.sample_rate:g}")
    return ("", "")


def _judged(
    run: Mapping[str, Any],
    references: Mapping[str, StoredReference],
    session: Sequence[Mapping[str, Any]] = (),
) -> JudgeInput:
    reference = references.get(run["task"]) if run["task"] else None
    return judge_input(run, reference, [judge_input(member) for member in session])


def _decide_sessions(
    store: Store,
    online: OnlineJudge,
    runs: Sequence[Mapping[str, Any]],
    executor: Executor,
    *,
    references: Mapping[str, StoredReference],
    worker_id: str,
    now: float | None,
) -> BatchOutcome:
    """A session judge's batch: each quiet conversation judged once, over all its runs."""
    outcome = BatchOutcome()
    members = conversations(store, runs)
    ended = ended_conversations(
        store, {conversation: session[-1] for conversation, session in members.items()}
    )
    clock = time.time() if now is None else now
    decisions: list[tuple[str, str]] = []
    inputs: dict[int, JudgeInput] = {}  # index of the run that carries the verdict -> its input
    anchors: dict[int, tuple[Mapping[str, Any], int, str]] = {}  # -> (first run, runs judged, id)
    followers: dict[str, int] = {}  # conversation -> the index judging it
    waiting: set[int] = set()
    for index, run in enumerate(runs):
        conversation = run["conversation_id"]
        session = members.get(conversation, []) if conversation else []
        if not session:  # no conversation: a session of one, judged as it comes
            decisions.append(_admitted(online, run))
            if not decisions[-1][0]:
                inputs[index] = _judged(run, references)
            continue
        last_end = max(_end_s(member) for member in session)
        quiet = clock - last_end >= online.session_idle_s
        if not quiet and conversation not in ended:
            decisions.append(("", ""))
            waiting.add(index)  # the conversation may go on: judged when it has been quiet
            outcome.waiting[(run["trace_id"], run["root_span_id"])] = last_end + online.session_idle_s
            continue
        decisions.append(_admitted(online, session[0]))
        if decisions[-1][0] or conversation in followers:
            continue
        followers[conversation] = index
        inputs[index] = _judged(session[-1], references, session)
        anchors[index] = (session[0], len(session), conversation)
    verdicts = _judge_and_store(
        store, online, runs, inputs, anchors, decisions, executor, outcome, references, worker_id, waiting
    )
    # the other pending runs of a judged conversation share its verdict's decision
    for index, run in enumerate(runs):
        judged_by = followers.get(run["conversation_id"]) if run["conversation_id"] else None
        if judged_by is not None and judged_by != index and index not in waiting:
            verdicts[index] = verdicts[judged_by]
    _record(store, online, runs, verdicts, waiting, outcome, worker_id)
    return outcome


def _judge_and_store(
    store: Store,
    online: OnlineJudge,
    runs: Sequence[Mapping[str, Any]],
    inputs: Mapping[int, JudgeInput],
    anchors: Mapping[int, tuple[Mapping[str, Any], int, str]],
    decisions: list[tuple[str, str]],
    executor: Executor,
    outcome: BatchOutcome,
    references: Mapping[str, StoredReference],
    worker_id: str,
    waiting: set[int] | None = None,
) -> list[tuple[str, str]]:
    """Judge `inputs` in parallel, store their results; fills `decisions` (returned). Without
    `waiting` (run scope), also records the decisions."""
    futures: dict[int, Future[list[JudgeResult]]] = {
        index: executor.submit(online.judge.evaluate, run) for index, run in inputs.items()
    }
    _, stamp = now_stamp()
    scores: list[tuple[Any, ...]] = []
    for index, future in futures.items():
        run = runs[index]
        if outcome.pause is not None and future.cancel():
            decisions[index] = ("budget_paused", pause_text(outcome.pause))
            continue
        try:
            results = future.result()
        except BudgetExhausted as exc:
            outcome.pause = outcome.pause or exc
            for other in futures.values():
                other.cancel()
            decisions[index] = ("budget_paused", pause_text(exc))
            continue
        except Exception as exc:  # a judge bug: recorded as an error result, never dropped
            results = [
                JudgeResult(online.name, online.version, online.name, error=f"{type(exc).__name__}: {exc}")
            ]
        reference = references.get(run["task"]) if run["task"] else None
        used_reference = reference.version if reference else 0
        errors = [result.error for result in results if result.error]
        decisions[index] = ("error", errors[0]) if errors else ("done", "" if results else "no result")
        anchor = anchors.get(index)
        for result in results:
            if anchor is None:
                scores.append(score_row(online, result, run, used_reference, stamp))
                continue
            first, count, conversation = anchor
            details = {**result.details, "conversation_id": conversation, "runs": count}
            row = score_row(online, replace(result, details=details), first, used_reference, stamp)
            scores.append(row._replace(Revision=count))  # a resumed session: a newer version
        if anchor is not None and not errors:
            decisions[index] = ("done", f"judged with its conversation {anchor[2]!r} ({anchor[1]} runs)")
        outcome.prompt_tokens += sum(result.prompt_tokens for result in results)
        outcome.completion_tokens += sum(result.completion_tokens for result in results)
        outcome.cost += sum(result.cost for result in results)
    store.insert("scores", scores)
    if waiting is None:
        _record(store, online, runs, decisions, set(), outcome, worker_id)
    return decisions


def _record(
    store: Store,
    online: OnlineJudge,
    runs: Sequence[Mapping[str, Any]],
    decisions: Sequence[tuple[str, str]],
    waiting: set[int],
    outcome: BatchOutcome,
    worker_id: str,
) -> None:
    """Record each run's decision (after the scores it stands for); waiting runs get none."""
    _, stamp = now_stamp()
    rows = []
    for index, (run, (decision, detail)) in enumerate(zip(runs, decisions, strict=True)):
        if index in waiting:
            continue
        outcome.decisions[decision] += 1
        rows.append(
            DecisionRow(
                TraceId=run["trace_id"],
                RootSpanId=run["root_span_id"],
                Evaluator=online.name,
                EvaluatorVersion=online.queue_key,
                Revision=run["revision"],
                Decision=decision,
                Detail=detail,
                WorkerId=worker_id,
                DecidedAt=stamp,
            )
        )
    record_decisions(store, rows)
