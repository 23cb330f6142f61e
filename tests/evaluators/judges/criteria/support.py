"""Criteria test helpers: judge clients on a local LLM server, example trajectories, stored runs."""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any

from llm_server import LlmServer
from trajectory_rows import agent_run, insert_trajectories, run_row

from agenttrail.evaluators.judges.client import JudgeSettings, OpenAIJudgeClient
from agenttrail.evaluators.judges.criteria.model import parse_criteria_set

SET_DOCUMENT: dict[str, Any] = {
    "name": "refunds",
    "task": "Refund a customer's order",
    "criteria": [
        {
            "name": "completeness",
            "description": "The agent did every step a refund needs.",
            "accepted_values": [
                {"label": "missing steps", "value": 0},
                {"label": "some steps", "value": 1},
                {"label": "all steps", "value": 2},
            ],
        },
        {
            "name": "politeness",
            "description": "The final answer is polite.",
            "accepted_values": [{"label": "rude", "value": 0}, {"label": "polite", "value": 1}],
        },
    ],
}


def criteria_set() -> Any:
    return parse_criteria_set(SET_DOCUMENT, "test")


def user_text(request: dict[str, Any]) -> str:
    """The text of the request's user message(s)."""
    parts = []
    for message in request.get("messages", []):
        if message["role"] != "user":
            continue
        content = message["content"]
        parts.append(content if isinstance(content, str) else " ".join(p.get("text", "") for p in content))
    return "\n".join(parts)


def step_count(request: dict[str, Any]) -> int:
    """How many tool steps the rendered run in the request has."""
    return len(re.findall(r'"step": \d+', user_text(request)))


def run_doc(
    tools: list[str], *, failed: bool = False, output: str = "Your refund is done. Thank you.", **extra: Any
) -> dict[str, Any]:
    """A trajectory in the `agenttrail trajectories --format json` shape."""
    document = {
        "trace_id": uuid.uuid4().hex,
        "agent": "shop",
        "task": "refund",
        "conversation_id": "",
        "start": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "latency_s": 1.0,
        "failure": int(failed),
        "error_type": "RuntimeError" if failed else "",
        "input": "Please refund order 7",
        "output": output,
        "tool_calls": [
            {"name": name, "input": {"order": 7}, "output": "ok", "status": "ok"} for name in tools
        ],
        "root_span_id": uuid.uuid4().hex[:16],
        "input_tokens": 0,
        "output_tokens": 0,
        "revision": 1,
    }
    document.update(extra)
    return document


def write_runs(path: Any, documents: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(d) + "\n" for d in documents), encoding="utf-8")
    return str(path)


def insert_runs(store: Any, documents: list[dict[str, Any]]) -> None:
    """Store trajectories as the assembler would (latest version, not deleted)."""
    now = time.time()
    rows = []
    for i, d in enumerate(documents):
        run = agent_run(
            start=now - i,
            trace_id=d["trace_id"],
            root_span_id=d["root_span_id"],
            agent=d["agent"],
            task=d["task"],
            latency_s=d["latency_s"],
            failure=bool(d["failure"]),
            error_type=d["error_type"],
            input=d["input"],
            output=d["output"],
            tools=d["tool_calls"],
        )
        rows.append(run_row(run, revision=d["revision"], version=1, assembled_at=now))
    insert_trajectories(store, rows)


def client_for(server: LlmServer, **overrides: Any) -> OpenAIJudgeClient:
    """The real judge client on the local server, with fast backoff."""
    settings: dict[str, Any] = {
        "model": "judge-model",
        "base_url": server.base_url,
        "api_key": "test",
        "timeout_s": 10.0,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
    }
    settings.update(overrides)
    return OpenAIJudgeClient(JudgeSettings.from_mapping(settings, "test"))


def judge_args(server: LlmServer) -> list[str]:
    return ["--judge-model", "judge-model", "--judge-base-url", server.base_url]


def store_args(chdb_dir: Any, database: str) -> list[str]:
    return ["--store", str(chdb_dir), "--database", database]


def answer_by_steps(request: dict[str, Any]) -> Any:
    """A quantifier answer whose completeness follows the run's step count (2+: all, 1: some, 0: missing)."""
    from llm_server import Reply

    label = {0: "missing steps", 1: "some steps"}.get(step_count(request), "all steps")
    return Reply.chat_json(
        {
            "completeness": {"label": label, "explanation": f"{step_count(request)} steps"},
            "politeness": {"label": "polite", "explanation": "says thank you"},
        }
    )


def write_set(path: Any, document: dict[str, Any] | None = None) -> str:
    path.write_text(json.dumps(document or SET_DOCUMENT), encoding="utf-8")
    return str(path)
