"""Fixtures for the online judge tests: stored runs, a judge on a local model server, a worker."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from llm_server import LlmServer, Reply
from otlp_builders import new_span_id, new_trace_id
from trajectory_rows import agent_run, store_runs

from agenttrail.collector.conventions import ToolDefinition


def verdict(request: dict[str, Any]) -> Reply:
    """A correct answer for whichever judge asks: task completion, or trajectory accuracy."""
    if "sub_goal" in json.dumps(request.get("messages")):
        answer: dict[str, Any] = {
            "sub_scores": [{"sub_goal": "answer the user", "evaluation": "yes"}],
            "complete": "yes",
            "reason": "all done",
        }
    else:
        answer = {"reasoning": "mostly right", "score": 0.75}
    return Reply.chat_json(answer, prompt_tokens=120, completion_tokens=30)


@pytest.fixture
def llm() -> Iterator[LlmServer]:
    with LlmServer(verdict) as server:
        yield server


@pytest.fixture
def judges_store(store: Any) -> Any:
    """The test's store with every evaluator migration (scores, decisions, judge columns)."""
    from agenttrail.collector.schema import migrate
    from agenttrail.evaluators.composition import ALL_MIGRATIONS

    migrate(store, ALL_MIGRATIONS)
    return store


@pytest.fixture
def add_runs(judges_store: Any) -> Callable[..., list[str]]:
    """Store assembled runs directly (as the assembler would); returns their trace ids."""

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
        tools: list[dict[str, Any]] | None = None,  # the run's available tools
        version: str = "",  # the agent's version (gen_ai.agent.version)
    ) -> list[str]:
        ids = traces or [new_trace_id() for _ in range(count)]
        at = time.time() - age_s
        runs = [
            agent_run(
                start=at + i * 0.001,
                trace_id=trace,
                root_span_id=(roots or {}).get(trace) or new_span_id(),
                agent=agent,
                agent_version=version,
                task=task,
                conversation_id=conversation,
                latency_s=0.5,
                failure=failed,
                input=f"request {i}",
                output=f"answer {i}",
                tools=[{"name": "lookup", "input": {"id": i}, "output": {"ok": True}}],
                available_tools=[ToolDefinition(**tool) for tool in tools or []],
            )
            for i, trace in enumerate(ids)
        ]
        store_runs(judges_store, runs, revision=revision, assembled_at=at)
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


@pytest.fixture
def make_judge(llm: LlmServer) -> Callable[..., Any]:
    """A real judge on the local model server, built from a config item as the sidecar builds it:
    make_judge("helpful", sample_rate=0.5, agents=["bot"], ...)."""
    from agenttrail.evaluators.judges.budget import BudgetTracker
    from agenttrail.evaluators.judges.client import OpenAIJudgeClient
    from agenttrail.evaluators.judges.config import JudgesConfig
    from agenttrail.evaluators.judges.registry import ClientPool
    from agenttrail.evaluators.judges.setup import build_online_judge

    def make(
        name: str,
        *,
        type: str = "trajectory_accuracy",
        options: dict[str, Any] | None = None,
        token_budget: int | None = None,
        clock: Callable[[], float] = time.time,
        **keys: Any,
    ) -> Any:
        item = {
            "name": name,
            "type": type,
            "base_url": llm.base_url,
            "model": "judge-model",
            "api_key": "test",
            "max_retries": 0,
            "prompt_price_per_1m": 1.0,
            "completion_price_per_1m": 2.0,
            "options": {"continuous": True} if options is None else options,
            **keys,
        }
        if token_budget is not None:
            item["budget"] = {"tokens_per_day": token_budget}
        [spec] = JudgesConfig.from_document({"judges": [item]}, "test config").judges
        pool = ClientPool(
            lambda settings: OpenAIJudgeClient(settings, budget=BudgetTracker(settings.budget, clock))
        )
        return build_online_judge(spec, pool)

    return make


@pytest.fixture
def live_judge_sidecar(start_sidecar: Any, tmp_path: Path) -> Callable[..., tuple[Any, Any]]:
    """start(llm, judge, service) -> (sidecar, provider): a sidecar whose config runs the one
    `judge` (a config item) on the local model server, and an SDK tracer provider, installed as
    the instrumentation's, exporting to that sidecar over OTLP/HTTP (shut it down to flush)."""
    import yaml
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from agenttrail.instrumentation import configure

    def start(llm: LlmServer, judge: dict[str, Any], service: str) -> tuple[Any, TracerProvider]:
        config = tmp_path / "agenttrail.yaml"
        defaults = {"base_url": llm.base_url, "model": "judge-model", "api_key": "test", "max_retries": 0}
        config.write_text(
            yaml.safe_dump(
                {"evaluators": {"poll_interval_s": 0.1}, "judge_defaults": defaults, "judges": [judge]}
            )
        )
        sidecar = start_sidecar(config_file=str(config))
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        provider.add_span_processor(
            SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"http://{sidecar.http.address}/v1/traces"))
        )
        configure(tracer_provider=provider)
        return sidecar, provider

    return start
