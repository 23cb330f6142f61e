"""The quantifier: one accepted value per criterion, stored as one scores row per criterion."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from llm_server import Reply

from agenttrail.collector.schema import MIGRATIONS, migrate
from agenttrail.collector.store import Store, parse_store
from agenttrail.evaluators.cli.criteria import criteria
from agenttrail.evaluators.judges.criteria.quantifier import quantify_run
from agenttrail.evaluators.judges.criteria.runs import run_from_json
from agenttrail.evaluators.scoring.schema import EVALUATOR_MIGRATIONS

from .support import (
    answer_by_steps,
    client_for,
    criteria_set,
    insert_runs,
    judge_args,
    run_doc,
    store_args,
    user_text,
    write_set,
)


def test_one_result_per_criterion_with_label_and_number(serve: Any) -> None:
    """Each criterion gets its label's number; the request carries the labels as an enum schema."""
    llm = serve(answer_by_steps)
    run = run_from_json(run_doc(["lookup"])).judge_input
    results = quantify_run(client_for(llm), criteria_set(), "draft-x", run)
    assert [(r.metric, r.label, r.score) for r in results] == [
        ("refunds:completeness", "some steps", 1.0),
        ("refunds:politeness", "polite", 1.0),
    ]
    assert results[0].explanation == "1 steps"
    assert (results[0].prompt_tokens, results[1].prompt_tokens) == (100, 0)  # usage counted once
    request = llm.chat_requests()[0]
    schema = request["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["completeness"]["properties"]["label"]["enum"] == [
        "missing steps", "some steps", "all steps"
    ]  # fmt: skip
    assert "<<<DATA name=trajectory>>>" in user_text(request)


def test_an_unaccepted_label_twice_is_an_error_per_criterion(serve: Any) -> None:
    """A label outside the accepted values, after one repair, gives error results with no score."""
    answer = {"completeness": {"label": "great", "explanation": ""}, "politeness": {"label": "polite"}}
    llm = serve(lambda request: Reply.chat_json(answer))
    results = quantify_run(client_for(llm), criteria_set(), "draft-x", run_from_json(run_doc([])).judge_input)
    assert len(llm.chat_requests()) == 2
    assert [r.score for r in results] == [None, None]
    assert all("great" in r.error for r in results)


def stored_scores(chdb_dir: Path, database: str) -> list[tuple[Any, ...]]:
    store = Store(parse_store(str(chdb_dir), database))
    try:
        return store.query(
            "SELECT TraceId, Metric, Evaluator, EvaluatorVersion, Label, Score, Error, Revision, "
            "Model, PromptTokens + CompletionTokens, LatencyMs > 0 "
            "FROM scores FINAL ORDER BY TraceId, Metric"
        )
    finally:
        store.close()


def test_cli_stores_one_row_per_criterion_and_errors(
    serve: Any, chdb_dir: Path, database: str, tmp_path: Path
) -> None:
    """`quantify` from the store writes "<set>:<criterion>" rows with the judge's model, tokens and
    latency, as online results have them; a failed run's carry Error, no Score."""
    doomed = run_doc(["a", "b", "c"], output="DOOMED")

    def respond(request: dict[str, Any]) -> Reply:
        return Reply.chat("not json at all") if "DOOMED" in user_text(request) else answer_by_steps(request)

    llm = serve(respond)
    runs = [run_doc(["lookup", "refund"]), run_doc([]), doomed]
    store = Store(parse_store(str(chdb_dir), database))
    migrate(store, (*MIGRATIONS, *EVALUATOR_MIGRATIONS))
    insert_runs(store, runs)
    store.close()
    result = CliRunner().invoke(
        criteria,
        ["quantify", "--criteria-file", write_set(tmp_path / "set.json"), "--format", "json",
         *store_args(chdb_dir, database), *judge_args(llm)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "stored 6 score(s) for 3 run(s)" in result.stderr
    printed = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(printed) == 6
    version = criteria_set().draft_version
    rows = {(r[0], r[1]): r[2:] for r in stored_scores(chdb_dir, database)}
    assert rows[(runs[0]["trace_id"], "refunds:completeness")] == (
        "criteria",
        version,
        "all steps",
        2.0,
        "",
        1,
        "judge-model",
        120,  # the call's usage, counted once: on the set's first criterion
        True,
    )
    assert rows[(runs[0]["trace_id"], "refunds:politeness")][6:] == ("judge-model", 0, False)
    assert rows[(runs[1]["trace_id"], "refunds:completeness")][2:4] == ("missing steps", 0.0)
    assert rows[(runs[1]["trace_id"], "refunds:politeness")][2:4] == ("polite", 1.0)
    failed = rows[(doomed["trace_id"], "refunds:politeness")]
    assert failed[3] is None
    assert failed[4]


def test_cli_no_save_reads_a_file_without_a_store(serve: Any, tmp_path: Path) -> None:
    """--no-save with a runs file needs no store and prints a table."""
    from .support import write_runs

    llm = serve(answer_by_steps)
    runs = write_runs(tmp_path / "runs.jsonl", [run_doc(["lookup"])])
    result = CliRunner().invoke(
        criteria,
        ["quantify", "--criteria-file", write_set(tmp_path / "set.json"), "--runs-file", runs, "--no-save",
         "--store", str(tmp_path / "nowhere"), *judge_args(llm)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["trace", "metric", "label", "score", "error"]
    assert "refunds:completeness  some steps" in result.stdout
    assert not (tmp_path / "nowhere").exists()
