"""Online, a tool-selection judge's run gets tool_correctness = min(judge, deterministic), and with
a response-quality judge, multiply_score and avg_score rows readable through the scores API."""

from __future__ import annotations

from typing import Any

import pytest
from llm_server import LlmServer, Reply

from agenttrail.evaluators.judges.config import JudgesConfig
from agenttrail.evaluators.judges.setup import build_online_judges
from agenttrail.evaluators.judges.worker import JudgeWorker
from agenttrail.evaluators.scoring.reference_store import store_reference_set
from agenttrail.evaluators.scoring.references import parse_reference_set
from agenttrail.evaluators.scoring.scores import ScoreFilter, query_scores

TOOLS = [{"name": "lookup", "description": "Find an order", "parameters": None}]


def respond(request: dict[str, Any]) -> Reply:
    if "choose tools" in request["messages"][0]["content"]:
        return Reply.chat_json({"reason": "refund tool never considered", "score": 0.4})
    return Reply.chat_json({"explanation": "close to the expected answer", "score": 0.5})


def test_online_min_multiply_and_average(judges_store: Any, add_runs: Any) -> None:
    """A run with available tools and a reference: the judge's tool_correctness is the min (0.4, not
    the deterministic 1.0); multiply_score 0.2 and avg_score 0.45 are stored and read back."""
    reference = {"reference_trajectory": [{"tool_name": "lookup", "tool_input": {"id": 0}}]}
    reference["expected_response"] = "answer 0"
    store_reference_set(judges_store, parse_reference_set({"refund": reference}), source="test")
    [trace] = add_runs(tools=TOOLS)
    with LlmServer(respond) as llm:
        defaults = {"base_url": llm.base_url, "model": "judge-model", "api_key": "t", "max_retries": 0}
        config = JudgesConfig.from_document(
            {
                "judge_defaults": defaults,
                "judges": [
                    {"name": "picks", "type": "tool_selection"},
                    {"name": "answer", "type": "final_response"},
                ],
            },
            "test",
        )
        worker = JudgeWorker(judges_store.clone, build_online_judges(config))
        while worker.run_once():
            pass
    scores = {
        (row["metric"], row["evaluator"].split("@")[0]): row["score"]
        for row in query_scores(judges_store, ScoreFilter.from_params({"trace_id": trace}))
    }
    assert scores[("picks", "picks")] == 0.4
    assert scores[("tool_correctness", "picks")] == 0.4  # min(0.4, deterministic 1.0)
    assert scores[("answer", "answer")] == 0.5
    assert scores[("multiply_score", "combined")] == pytest.approx(0.2)
    assert scores[("avg_score", "combined")] == pytest.approx(0.45)
