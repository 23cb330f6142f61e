"""Fixtures for the online judge tests: stored runs, a judge on a local model server, a worker."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from llm_server import LlmServer, Reply
from otlp_builders import new_span_id, new_trace_id


def score_reply(request: dict[str, Any]) -> Reply:
    """A correct verdict: the score is in the prompt's run so tests can tell runs apart."""
    return Reply.chat_json({"score": 0.75, "reason": "mostly right"}, prompt_tokens=120, completion_tokens=30)


@pytest.fixture
def llm() -> Iterator[LlmServer]:
    with LlmServer(score_reply) as server:
        yield server


@pytest.fixture
def judges_store(store: Any) -> Any:
    """The test's store with every evaluator migration (scores, decisions, judge columns)."""
    from agenttrail.collector.schema import migrate
    from agenttrail.evaluators.cli import ALL_MIGRATIONS

    migrate(store, ALL_MIGRATIONS)
    return store


@pytest.fixture
def add_runs(judges_store: Any) -> Callable[..., list[str]]:
    """Store assembled runs directly (as the assembler would); returns their trace ids."""
    from agenttrail.collector.assembler import TRAJECTORY_COLUMNS

    def add(
        count: int = 1,
        *,
        agent: str = "bot",
        task: str = "refund",
        failed: bool = False,
        conversation: str = "",
        age_s: float = 0.0,
        traces: list[str] | None = None,
        revision: int = 1,
        roots: dict[str, str] | None = None,
    ) -> list[str]:
        ids = traces or [new_trace_id() for _ in range(count)]
        at = time.time() - age_s
        rows = []
        for i, trace in enumerate(ids):
            root = (roots or {}).get(trace) or new_span_id()
            calls = [{"name": "lookup", "input": {"id": i}, "output": {"ok": True}, "status": "ok"}]
            rows.append(
                (
                    trace,
                    root,
                    agent,
                    "",
                    "",
                    task,
                    conversation,
                    "svc",
                    f"{at + i * 0.001:.6f}",
                    0.5,
                    int(failed),
                    "RuntimeError" if failed else "",
                    json.dumps(f"request {i}"),
                    json.dumps(f"answer {i}"),
                    0,
                    0,
                    1,
                    ["lookup"],
                    ["ok"],
                    json.dumps(calls),
                    2,
                    revision,
                    f"{at:.6f}",
                    revision,
                    0,
                )
            )
        judges_store.insert_rows("trajectories", TRAJECTORY_COLUMNS, rows)
        return ids

    return add


def decisions(store: Any, judge: str) -> dict[str, tuple[str, str]]:
    """trace id -> (decision, detail) of a judge, latest per run."""
    rows = store.query(
        "SELECT TraceId, Decision, Detail FROM evaluation_decisions FINAL WHERE Evaluator = {j:String}",
        {"j": judge},
    )
    return {trace: (decision, detail) for trace, decision, detail in rows}


@pytest.fixture
def decisions_of() -> Callable[[Any, str], dict[str, tuple[str, str]]]:
    return decisions


class ChatScoreJudge:
    """A minimal judge over the real `openai` client: asks for {"score", "reason"} about one run.

    Stands in for the judge types until they are merged; the model is the local LlmServer.
    `token_budget` mimics the judge client's budget: spent tokens raise BudgetExhausted.
    """

    def __init__(
        self,
        name: str,
        base_url: str,
        version: str = "v1",
        *,
        token_budget: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        import openai

        self.name = name
        self.version = version
        self.seen: list[Any] = []
        self._client = openai.OpenAI(base_url=base_url, api_key="test", max_retries=0)
        self._budget = token_budget
        self._spent = 0
        self._clock = clock
        self._window = 0

    def evaluate(self, run: Any) -> list[Any]:
        from agenttrail.evaluators.judges.base import BudgetExhausted, JudgeResult

        window = int(self._clock() // 86400)
        if window != self._window:
            self._window, self._spent = window, 0
        if self._budget is not None and self._spent >= self._budget:
            raise BudgetExhausted(
                f"daily token budget {self._budget} spent", resume_at=(window + 1) * 86400.0
            )
        self.seen.append(run)
        started = time.monotonic()
        response = self._client.chat.completions.create(
            model="judge-model",
            messages=[
                {"role": "user", "content": json.dumps({"trace": run.trace_id, "runs": len(run.runs)})}
            ],
        )
        usage = response.usage
        tokens = (usage.prompt_tokens, usage.completion_tokens) if usage else (0, 0)
        self._spent += sum(tokens)
        common = {
            "model": response.model,
            "prompt_tokens": tokens[0],
            "completion_tokens": tokens[1],
            "latency_s": time.monotonic() - started,
            "cost": sum(tokens) * 1e-6,
        }
        try:
            answer = json.loads(response.choices[0].message.content or "")
            score, reason = float(answer["score"]), str(answer["reason"])
        except (ValueError, KeyError, TypeError) as exc:
            return [JudgeResult(self.name, self.version, self.name, error=f"invalid answer: {exc}", **common)]
        return [
            JudgeResult(
                self.name,
                self.version,
                self.name,
                score=score,
                label="pass" if score >= 0.5 else "fail",
                explanation=reason,
                details={"runs": len(run.runs)},
                **common,
            )
        ]


@pytest.fixture
def make_judge(llm: LlmServer) -> Callable[..., Any]:
    """An OnlineJudge from a spec's online keys: make_judge("helpful", sample_rate=0.5, ...)."""
    from agenttrail.evaluators.judge_config import JudgeSpec
    from agenttrail.evaluators.judge_runs import OnlineJudge

    def make(
        name: str,
        *,
        version: str = "v1",
        session: bool = False,
        token_budget: int | None = None,
        clock: Callable[[], float] = time.time,
        concurrency: int = 4,
        **online: Any,
    ) -> OnlineJudge:
        for key in ("agents", "tasks"):
            if key in online:
                online[key] = tuple(online[key])
        judge = ChatScoreJudge(name, llm.base_url, version, token_budget=token_budget, clock=clock)
        return OnlineJudge(JudgeSpec(name, {"type": "test"}, **online), judge, concurrency, session)

    return make
