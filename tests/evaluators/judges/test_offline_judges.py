"""`agenttrail evaluate --judge`: judges next to the metrics, offline, against a local model server."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from llm_server import LlmServer, Reply

from agenttrail.evaluators.cli.offline import evaluate_command
from agenttrail.evaluators.judges import JudgeSettings, OpenAIJudgeClient, TaskCompletionJudge
from agenttrail.evaluators.offline.datasets import load_dataset
from agenttrail.evaluators.offline.evaluate import evaluate_rows

Serve = Callable[..., LlmServer]
SEARCH = {"name": "search", "args": {"q": "paris weather"}}
ROWS = [
    {
        "query": "Weather in Paris?",
        "response": "Sunny.",
        "tools_called": [SEARCH],
        "expected_tools": [SEARCH],
    },
    {"query": "Weather in Rome?", "response": "No idea.", "tools_called": [], "expected_tools": [SEARCH]},
    {"query": "Broken", "tools_called": "not a trajectory"},
]


def completion(complete: str) -> dict[str, Any]:
    return {
        "sub_scores": [{"sub_goal": "answer", "evaluation": complete}],
        "reason": "r",
        "complete": complete,
    }


def by_request(request: dict[str, Any]) -> Reply:
    """yes for Paris, unsure for Rome."""
    user = request["messages"][-1]["content"]
    return Reply.chat_json(completion("yes" if "Paris" in user else "unsure"))


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    return path


def evaluate(*args: str) -> Result:
    return CliRunner().invoke(evaluate_command, list(args), catch_exceptions=False)


def test_judge_type_results_sit_next_to_the_metrics(serve: Serve, dataset: Path) -> None:
    """--judge TYPE adds per-row judge results and aggregates; unsure is missing, bad rows unjudged."""
    llm = serve(by_request)
    result = evaluate(
        str(dataset),
        "--judge", "task_completion",
        "--judge-model", "judge-model",
        "--judge-base-url", llm.base_url,
        "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    document = json.loads(result.stdout)
    paris, rome, broken = document["instances"]
    assert paris["metrics"]["trajectory_recall"] == 1.0
    assert (paris["judges"]["task_completion"]["score"], paris["judges"]["task_completion"]["label"]) == (
        1.0,
        "yes",
    )
    assert rome["judges"]["task_completion"]["score"] is None
    assert rome["judges"]["task_completion"]["label"] == "unsure"
    assert rome["judges"]["task_completion"]["error"] is None
    assert broken["judges"] == {}
    assert document["aggregate"]["task_completion"] == {"count": 1, "mean": 1.0, "std": 0.0}
    assert document["judges"]["task_completion"]["missing"] == 1
    assert document["judges"]["task_completion"]["prompt_tokens"] == 200
    assert len(llm.chat_requests()) == 2


def test_judge_file_with_several_judges_prints_tables(serve: Serve, dataset: Path, tmp_path: Path) -> None:
    """A judges file (a config's judges: list; online-only keys ignored) runs each judge in the tables."""
    llm = serve(
        lambda request: Reply.chat_json(
            completion("no")
            if "sub-goals" in request["messages"][0]["content"]
            else {"explanation": "ok", "score": 0.5}
        )
    )
    judges = tmp_path / "judges.yaml"
    judges.write_text(
        "judges:\n"
        "  - name: done\n"
        "    type: task_completion\n"
        "    sample_rate: 0.1\n"
        "  - name: answer\n"
        "    type: rubric\n"
        f"    base_url: {llm.base_url}\n"
        "    options:\n"
        "      criteria: {concise: The answer is short.}\n"
        "      rating_rubric: {1: short, 0.5: medium, 0: long}\n"
        "      inputs: [user_input, final_response]\n"
    )
    result = evaluate(
        str(dataset), "--judge", str(judges), "--judge-model", "m", "--judge-base-url", llm.base_url
    )
    assert result.exit_code == 3, result.output
    header = result.stdout.splitlines()[0].split()
    assert header[-2:] == ["done", "answer"]
    assert "judge metric" in result.stdout
    first_row = result.stdout.splitlines()[2].split()
    assert first_row[-2:] == ["0", "0.5"]


def test_bad_judge_spec_is_a_usage_error_before_reading(tmp_path: Path) -> None:
    """An unknown judge type, or a bad definition, exits 2 before the dataset is read."""
    missing = str(tmp_path / "absent.jsonl")
    result = evaluate(missing, "--judge", "vibes", "--judge-model", "m")
    assert result.exit_code == 2
    assert "neither a judge type" in result.output
    bad = tmp_path / "judges.json"
    bad.write_text(json.dumps([{"name": "x", "type": "rubric", "modle": "m"}]))
    result = evaluate(missing, "--judge", str(bad), "--judge-model", "m")
    assert result.exit_code == 2
    assert "unknown key(s) ['modle']" in result.output
    result = evaluate(missing, "--judge", "task_completion", "--judge-base-url", "http://127.0.0.1:9/v1")
    assert result.exit_code == 2
    assert "model: required" in result.output


def test_tool_correctness_is_the_min_with_the_selection_judge_and_combines_with_the_response(
    serve: Serve, tmp_path: Path
) -> None:
    """--metric tool_correctness beside a tool_selection judge reports min(judge, deterministic) on
    rows with available tools (the deterministic value elsewhere), with the metric's threshold;
    with a final_response judge, multiply_score and avg_score sit beside them in the report."""
    tools = [{"name": "search", "description": "Web search"}, {"name": "book", "description": "Book"}]
    rows = [
        {**ROWS[0], "available_tools": tools, "expected_response": "Sunny."},
        {**ROWS[0], "query": "Weather in Oslo?", "expected_response": "Sunny."},
    ]
    dataset = tmp_path / "rows.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))

    def respond(request: dict[str, Any]) -> Reply:
        system = request["messages"][0]["content"]
        if "choose tools" in system:
            return Reply.chat_json({"reason": "book was needed too", "score": 0.4})
        return Reply.chat_json({"explanation": "close", "score": 0.5})

    llm = serve(respond)
    judges = tmp_path / "judges.yaml"
    judges.write_text("- {name: sel, type: tool_selection}\n- {name: answer, type: final_response}\n")
    result = evaluate(
        str(dataset), "--metric", "tool_correctness:threshold=0.6", "--judge", str(judges),
        "--judge-model", "m", "--judge-base-url", llm.base_url, "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    with_tools, without = document["instances"]
    assert with_tools["metrics"]["tool_correctness"] == 0.4  # min(0.4, deterministic 1.0)
    assert with_tools["metrics"]["tool_correctness_success"] == 0.0  # 0.4 < threshold 0.6
    assert with_tools["judges"]["sel"]["score"] == 0.4
    assert "tool_correctness" not in with_tools["judges"]  # one tool_correctness, the metric's
    assert with_tools["metrics"]["multiply_score"] == pytest.approx(0.2)
    assert with_tools["metrics"]["avg_score"] == pytest.approx(0.45)
    assert without["metrics"]["tool_correctness"] == 1.0  # no available tools: deterministic
    assert without["judges"]["sel"]["score"] is None
    assert without["metrics"]["multiply_score"] == pytest.approx(0.5)
    assert document["aggregate"]["multiply_score"]["count"] == 2
    table = evaluate(
        str(dataset), "--metric", "tool_correctness", "--judge", str(judges),
        "--judge-model", "m", "--judge-base-url", llm.base_url,
    )  # fmt: skip
    assert table.stdout.splitlines()[0].split()[-2:] == ["multiply_score", "avg_score"]


def test_spent_budget_turns_the_rest_into_errors(
    serve: Serve, dataset: Path, tmp_path: Path, budget_clock: float
) -> None:
    """When the budget is spent mid-way, the remaining rows are judge errors saying so, not dropped."""
    llm = serve(by_request)
    judges = tmp_path / "judges.yaml"
    # one request at a time: with more in flight, each may take the spend past the limit
    judges.write_text("- {name: done, type: task_completion, concurrency: 1, budget: {tokens_per_hour: 50}}")
    result = evaluate(
        str(dataset), "--judge", str(judges), "--judge-model", "m",
        "--judge-base-url", llm.base_url, "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    document = json.loads(result.stdout)
    assert document["instances"][0]["judges"]["done"]["score"] == 1.0
    error = document["instances"][1]["judges"]["done"]["error"]
    assert error.startswith("not judged: judge budget spent: 120 of 50 tokens per hour")
    assert error.endswith(
        "since 2025-12-31T23:00:00Z; judging resumes at 2026-01-01T00:00:00Z"
    )  # budget_clock
    assert "judge error: row 1, judge done: not judged" in result.stderr
    assert len(llm.chat_requests()) == 1


def test_python_api_scores_rows_concurrently(serve: Serve, dataset: Path) -> None:
    """evaluate_rows with judges and several workers keeps rows in order."""
    llm = serve(by_request)
    client = OpenAIJudgeClient(JudgeSettings(model="m", base_url=llm.base_url, concurrency=2))
    report = evaluate_rows(load_dataset(dataset), judges=[TaskCompletionJudge(client)], judge_workers=2)
    assert [instance.value("task_completion") for instance in report.instances] == [1.0, None, None]
    assert report.aggregate["task_completion"].missing == 2


@pytest.mark.skipif(
    not os.environ.get("AGENTTRAIL_TEST_OPENAI_BASE_URL"),
    reason="set AGENTTRAIL_TEST_OPENAI_BASE_URL (and AGENTTRAIL_TEST_OPENAI_MODEL) for a real endpoint",
)
def test_real_endpoint(dataset: Path) -> None:
    """Against a real OpenAI-compatible endpoint every judge type answers in the validated shape."""
    settings = JudgeSettings(
        model=os.environ.get("AGENTTRAIL_TEST_OPENAI_MODEL", "gpt-4o-mini"),
        base_url=os.environ["AGENTTRAIL_TEST_OPENAI_BASE_URL"],
        timeout_s=120,
    )
    from agenttrail.evaluators.judges import build_judge

    client = OpenAIJudgeClient(settings)
    judges = [
        build_judge("done", {"type": "task_completion"}, client, "test"),
        build_judge("accuracy", {"type": "trajectory_accuracy", "use_reference": True}, client, "test"),
    ]
    report = evaluate_rows(load_dataset(dataset)[:1], judges=judges)
    results = report.instances[0].judges
    assert results["done"].error == ""
    assert results["done"].label in ("yes", "no", "unsure")
    assert results["accuracy"].error == ""
    assert results["accuracy"].score in (0.0, 1.0)
    assert results["accuracy"].prompt_tokens > 0


def test_session_scope_judges_each_named_conversation_once(serve: Serve, tmp_path: Path) -> None:
    """Offline, scope session groups rows by conversation_id: two conversations of three rounds give
    two results, each over all three rounds, on each conversation's last row; rows that name no
    conversation are refused with a clear error."""
    rounds = [
        {**ROWS[0], "query": f"{conversation} round {i}", "conversation_id": conversation}
        for i in range(3)
        for conversation in ("alpha", "beta")
    ]  # interleaved, as a log of two conversations would be
    dataset = tmp_path / "rows.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rounds))
    llm = serve(Reply.chat_json(completion("yes")))
    judges = tmp_path / "judges.yaml"
    judges.write_text("- {name: done, type: task_completion, options: {scope: session}}\n")
    args = ["--judge", str(judges), "--judge-model", "m", "--judge-base-url", llm.base_url]
    result = evaluate(str(dataset), *args, "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    judged = {i["index"]: i["judges"]["done"] for i in document["instances"] if "done" in i["judges"]}
    assert sorted(judged) == [4, 5]  # the last rows of alpha and beta
    assert judged[4]["details"]["conversation_id"] == "alpha"
    assert judged[4]["details"]["rows"] == [0, 2, 4]
    assert document["aggregate"]["done"]["count"] == 2
    prompts = [request["messages"][1]["content"] for request in llm.chat_requests()]
    assert len(prompts) == 2
    for prompt in prompts:
        name = "alpha" if "alpha" in prompt else "beta"
        assert all(f"{name} round {i}" in prompt for i in range(3))
        assert ("beta" in prompt) != ("alpha" in prompt)

    unnamed = tmp_path / "unnamed.jsonl"
    unnamed.write_text(json.dumps(ROWS[0]) + "\n")
    refused = evaluate(str(unnamed), *args)
    assert refused.exit_code == 2
    assert "scope: session" in refused.output
    assert "conversation_id" in refused.output


def test_stored_references_give_each_rows_tool_correctness_its_tasks_settings_beside_the_judge(
    serve: Serve, store: Any, chdb_dir: Path, database: str, tmp_path: Path
) -> None:
    """With --stored-references, the tool_correctness folded with a tool_selection judge's verdict
    is set as the row's own metric is: the --metric spec's parameters, then the row's `options`,
    then its task's spec, then the task's options (not the bare --metric spec for every row)."""
    from agenttrail.collector.schema import migrate
    from agenttrail.evaluators.composition import ALL_MIGRATIONS
    from agenttrail.evaluators.scoring.reference_store import store_reference_set
    from agenttrail.evaluators.scoring.references import parse_reference_set

    migrate(store, ALL_MIGRATIONS)
    stored = {
        "refund": {"reference_trajectory": [SEARCH], "metrics": ["tool_correctness:threshold=0.3"]},
        "faq": {"reference_trajectory": [SEARCH], "options": {"threshold": "0.3"}},
    }
    store_reference_set(store, parse_reference_set(stored), source="t")
    tools = [{"name": "search", "description": "Web search"}, {"name": "book", "description": "Book"}]
    row = {"query": "Weather in Paris?", "tools_called": [SEARCH], "available_tools": tools}
    rows = [
        {**row, "task": "refund"},  # the task's own spec: threshold 0.3
        {**row, "task": "faq"},  # the task's options: threshold 0.3
        {**row, "task": "refund", "options": {"threshold": "0.9"}},  # the row's options win
    ]
    dataset = tmp_path / "rows.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    llm = serve(Reply.chat_json({"reason": "book was needed too", "score": 0.4}))
    where = [str(dataset), "--stored-references", "--store", str(chdb_dir), "--database", database]
    where += ["--judge", "tool_selection", "--judge-model", "m", "--judge-base-url", llm.base_url]

    def success(metric: str) -> list[Any]:
        result = evaluate(*where, "--metric", metric, "--format", "json")
        assert result.exit_code == 0, result.output
        instances = json.loads(result.stdout)["instances"]
        assert [i["metrics"]["tool_correctness"] for i in instances] == [0.4, 0.4, 0.4]  # the min
        return [i["metrics"]["tool_correctness_success"] for i in instances]

    assert success("tool_correctness") == [1.0, 1.0, 0.0]
    assert success("tool_correctness:threshold=0.35") == [1.0, 1.0, 1.0]  # the spec's own wins
