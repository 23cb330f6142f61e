"""The critic: proposals parsed and validated from LlmServer answers, examples from a file or the store."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from llm_server import Reply

from agenttrail.collector.store import Store, parse_store
from agenttrail.evaluators.cli.criteria import criteria
from agenttrail.evaluators.judges.criteria.critic import propose_criteria, validate_answer
from agenttrail.evaluators.scoring.schema import EVALUATOR_MIGRATIONS, ScoreRow

from .support import client_for, insert_runs, judge_args, run_doc, store_args, user_text, write_runs

ANSWER = {
    "criteria": [
        {
            "name": "completeness",
            "description": "Every refund step was done.",
            "accepted_values": [{"label": "all steps", "value": 2}, {"label": "missing steps", "value": 0}],
        },
        {
            "name": "politeness",
            "description": "The answer is polite.",
            "accepted_values": [{"label": "rude", "value": 0}, {"label": "polite", "value": 1}],
        },
    ]
}


def test_task_based_proposal_is_parsed_and_ordered(serve: Any) -> None:
    """A task-only critic call returns validated criteria with accepted values ordered by number."""
    llm = serve(lambda request: Reply.chat_json(ANSWER))
    [run] = propose_criteria(client_for(llm), "Refund a customer's order", count=2)
    assert run.error == ""
    assert [c.name for c in run.criteria] == ["completeness", "politeness"]
    assert run.criteria[0].labels == ["missing steps", "all steps"]
    text = user_text(llm.chat_requests()[0])
    assert "Refund a customer's order" in text
    assert "<<<DATA name=task_description>>>" in text
    assert "run_1" not in text
    assert "successful" not in text.lower()


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ({"items": []}, '"criteria"'),
        ({"criteria": []}, "non-empty list"),
        ({"criteria": [{"name": "a", "description": "d", "accepted_values": [{"label": "x", "value": 0}]}]},
         "at least two"),
        ({"criteria": [{"name": "a", "description": "d",
                        "accepted_values": [{"label": "x", "value": 0}, {"label": "y", "value": 0}]}]},
         "share one number"),
        ({"criteria": [{"name": "a:b", "description": "d",
                        "accepted_values": [{"label": "x", "value": 0}, {"label": "y", "value": 1}]}]},
         "may not contain ':'"),
        ({"criteria": [ANSWER["criteria"][0], ANSWER["criteria"][0]]}, "appears more than once"),
    ],
)  # fmt: skip
def test_invalid_answers_say_what_is_wrong(answer: Any, message: str) -> None:
    """The validator's message (sent back to the model for repair) names the fault."""
    with pytest.raises(ValueError, match=message):
        validate_answer(answer)


def test_an_invalid_answer_is_repaired_once(serve: Any) -> None:
    """An answer breaking the rules gets one repair request; the repaired answer is used."""
    bad = {
        "criteria": [{"name": "x", "description": "d", "accepted_values": [{"label": "only", "value": 1}]}]
    }
    answers = [Reply.chat_json(bad), Reply.chat_json(ANSWER)]
    llm = serve(lambda request: answers.pop(0))
    [run] = propose_criteria(client_for(llm), "Refund an order")
    assert run.error == ""
    assert len(run.criteria) == 2
    repair = json.dumps(llm.chat_requests()[1]["messages"])
    assert "at least two" in repair


def test_cli_malformed_answers_end_in_a_clear_error(serve: Any, tmp_path: Path) -> None:
    """When every critic run answers malformed JSON, propose says so, shows why, and exits 1."""
    llm = serve(lambda request: Reply.chat('{"criteria": [{"name": '))
    output = tmp_path / "proposals.yaml"
    result = CliRunner().invoke(
        criteria,
        [
            "propose",
            "--description",
            "Refund an order",
            "--output",
            str(output),
            "--runs",
            "2",
            *judge_args(llm),
        ],
    )
    assert result.exit_code == 1
    assert "every critic run failed" in result.output
    assert "JSON" in result.output
    document = yaml.safe_load(output.read_text())
    assert [p["criteria"] for p in document["proposals"]] == [[], []]
    assert all(p["error"] for p in document["proposals"])


def test_cli_solution_based_from_a_file_with_several_runs(serve: Any, tmp_path: Path) -> None:
    """--examples shows successful and failed runs from a file as data; --runs N calls N times."""
    llm = serve(lambda request: Reply.chat_json(ANSWER))
    runs = write_runs(
        tmp_path / "runs.jsonl",
        [
            run_doc(["lookup", "refund"]),
            run_doc(["lookup"], failed=True, output="Error."),
            run_doc(["lookup"]),
        ],
    )
    output = tmp_path / "proposals.json"
    result = CliRunner().invoke(
        criteria,
        ["propose", "--description", "Refund an order", "--examples", "1", "--runs-file", runs,
         "--runs", "3", "--output", str(output), "--name", "refunds", *judge_args(llm)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "solution-based: 3 of 3 critic run(s) answered" in result.stderr
    assert len(llm.chat_requests()) == 3
    text = user_text(llm.chat_requests()[0])
    assert "<<<DATA name=successful_run_1.trajectory>>>" in text
    assert "<<<DATA name=failed_run_1.final_response>>>" in text
    assert "successful_run_2" not in text
    document = json.loads(output.read_text())
    assert document["name"] == "refunds"
    assert document["mode"] == "solution-based"
    assert [len(p["criteria"]) for p in document["proposals"]] == [2, 2, 2]
    assert result.stdout.splitlines()[0].split()[:3] == ["run", "criterion", "accepted"]


def test_cli_examples_from_the_store_by_score_threshold(serve: Any, chdb_dir: Path, database: str) -> None:
    """With --success-metric, stored runs are split by their score, not their failure flag."""
    llm = serve(lambda request: Reply.chat_json(ANSWER))
    good, bad = run_doc(["lookup", "refund"], output="GOOD RUN"), run_doc(["lookup"], output="BAD RUN")
    store = Store(parse_store(str(chdb_dir), database))
    try:
        from agenttrail.collector.schema import MIGRATIONS, migrate

        migrate(store, (*MIGRATIONS, *EVALUATOR_MIGRATIONS))
        insert_runs(store, [good, bad])
        now = f"{time.time():.6f}"
        store.insert(
            "scores",
            [
                ScoreRow(d["trace_id"], d["root_span_id"], "trajectory_recall", "trajectory", "v", score,
                         "", "", "shop", "refund", now, 1, 0, "", now)
                for d, score in ((good, 1.0), (bad, 0.5))
            ],
        )  # fmt: skip
    finally:
        store.close()
    result = CliRunner().invoke(
        criteria,
        ["propose", "--description", "Refund an order", "--examples", "2", "--success-metric",
         "trajectory_recall", "--success-threshold", "0.9", "--output", str(chdb_dir / f"{database}.yaml"),
         *store_args(chdb_dir, database), *judge_args(llm)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    text = user_text(llm.chat_requests()[0])
    successful, failed = text.split("Failed runs of the agent")
    assert "GOOD RUN" in successful
    assert "BAD RUN" not in successful
    assert "BAD RUN" in failed
