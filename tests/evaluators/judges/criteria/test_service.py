"""The criteria commands' service functions, called without click: which runs, which set,
quantify and store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store
from agenttrail.evaluators.judges.criteria.service import (
    CriteriaUsageError,
    RunsQuery,
    load_runs,
    quantify_runs,
    resolve_set,
    scores_by_trace,
)
from agenttrail.evaluators.judges.criteria.sets import CRITERIA_MIGRATIONS
from agenttrail.evaluators.scoring.schema import EVALUATOR_MIGRATIONS

from .support import answer_by_steps, client_for, criteria_set, insert_runs, run_doc, write_set


def query(**given: Any) -> RunsQuery:
    fields: dict[str, Any] = dict.fromkeys(RunsQuery.__dataclass_fields__)
    return RunsQuery(**{**fields, "limit": 100, "success_threshold": 0.5, **given})


def test_quantify_runs_stores_one_score_per_criterion_and_returns_the_rows(serve: Any, store: Store) -> None:
    migrate(store, (*EVALUATOR_MIGRATIONS, *CRITERIA_MIGRATIONS))
    documents = [run_doc(["lookup", "refund"]), run_doc(["lookup"])]
    insert_runs(store, documents)
    runs = load_runs(query(agent="shop"), store)
    assert sorted(run.trace_id for run in runs) == sorted(d["trace_id"] for d in documents)
    version = criteria_set().draft_version
    outcome = quantify_runs(client_for(serve(answer_by_steps)), criteria_set(), version, runs, 2, store)
    assert outcome.stored == 4
    by_run = {(r["trace_id"], r["metric"]): r["label"] for r in outcome.rows}
    assert by_run[(documents[0]["trace_id"], "refunds:completeness")] == "all steps"
    assert by_run[(documents[1]["trace_id"], "refunds:completeness")] == "some steps"
    assert {r["evaluator"] for r in outcome.rows} == {f"criteria@{version}"}
    stored = scores_by_trace(store, query(success_metric="refunds:completeness"), runs)
    assert stored == {documents[0]["trace_id"]: 2.0, documents[1]["trace_id"]: 1.0}


def test_quantify_runs_without_a_store_stores_nothing(serve: Any) -> None:
    outcome = quantify_runs(client_for(serve(answer_by_steps)), criteria_set(), "v", [], 1)
    assert (outcome.rows, outcome.stored) == ([], 0)


@pytest.mark.parametrize(
    ("criteria_file", "set_name", "set_version", "message"),
    [
        (None, None, None, "give either --criteria-file or --criteria-set"),
        ("set.json", "refunds", None, "give either --criteria-file or --criteria-set"),
        ("set.json", None, 2, "--set-version goes with --criteria-set, not a file"),
    ],
)
def test_option_clashes_are_usage_errors(
    criteria_file: str | None, set_name: str | None, set_version: int | None, message: str, tmp_path: Path
) -> None:
    path = write_set(tmp_path / "set.json") if criteria_file else None
    with pytest.raises(CriteriaUsageError, match=message):
        resolve_set(path, set_name, set_version, lambda: pytest.fail("no store is read"))


def test_a_set_file_needs_no_store(tmp_path: Path) -> None:
    found, version = resolve_set(
        write_set(tmp_path / "set.json"), None, None, lambda: pytest.fail("no store")
    )
    assert (found.name, version) == ("refunds", criteria_set().draft_version)


def test_a_success_metric_needs_a_store() -> None:
    with pytest.raises(CriteriaUsageError, match="--success-metric reads scores from the store"):
        scores_by_trace(None, query(success_metric="done"), [])


def test_a_trace_prefix_of_several_runs_names_the_option(store: Store) -> None:
    """--trace takes a prefix, as tables print ids; one that starts several runs says so."""
    documents = [run_doc(["a"], trace_id=f"deadbeef{i}" + "0" * 23) for i in range(2)]
    insert_runs(store, documents)
    with pytest.raises(CriteriaUsageError, match="is the start of 2 trace ids") as raised:
        load_runs(query(trace_id="DEADBEEF"), store)
    assert raised.value.option == "--trace"
    [one] = load_runs(query(trace_id="deadbeef1"), store)
    assert one.trace_id == documents[1]["trace_id"]


def test_the_command_turns_a_usage_error_into_click_usage(tmp_path: Path) -> None:
    """Exit 2 with the option named, as click's own usage errors, not a plain error (exit 1)."""
    from click.testing import CliRunner

    from agenttrail.evaluators.cli.criteria import criteria

    runs = str(tmp_path / "runs.jsonl")
    Path(runs).write_text("")
    result = CliRunner().invoke(criteria, ["quantify", "--runs-file", runs, "--no-save"])
    assert result.exit_code == 2, result.output
    assert "give either --criteria-file or --criteria-set" in result.output
