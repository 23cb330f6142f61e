"""`agenttrail evaluate`: the click command run through CliRunner."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from agenttrail.evaluators.cli.offline import evaluate_command
from agenttrail.evaluators.offline.datasets import load_dataset
from agenttrail.evaluators.offline.evaluate import evaluate_rows

SEARCH = {"tool_name": "search", "tool_input": {"q": "x"}}
FETCH = {"tool_name": "fetch", "tool_input": {"url": "u"}}
ROWS: list[Any] = [
    {
        "predicted_trajectory": [SEARCH, FETCH],
        "reference_trajectory": [SEARCH],
        "latency_in_seconds": 1,
        "failure": 0,
    },
    {
        "tools_called": [{"name": "fetch", "args": {"url": "v"}}],
        "expected_tools": [{"name": "fetch", "args": {"url": "u"}}],
    },
    {"predicted_trajectory": [{"tool_input": {}}]},
    {"tools_called": [{"name": "search"}]},
]


def dataset(tmp_path: Path, rows: list[Any] = ROWS) -> Path:
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def invoke(*args: str) -> Result:
    return CliRunner().invoke(evaluate_command, list(args), catch_exceptions=False)


def test_table_output_with_bad_rows_exits_3(tmp_path: Path) -> None:
    """The table lists every row and the aggregates, names the bad row and field, and exits 3 (bad input)."""
    result = invoke(str(dataset(tmp_path)))
    assert result.exit_code == 3, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split()[:2] == ["row", "trajectory_exact_match"]
    assert [line.split()[0] for line in lines[2:6]] == ["0", "1", "2", "3"]
    assert any(
        line.startswith("  row 2 (line 3), field predicted_trajectory: trajectory[0]") for line in lines
    )
    assert any(line.split()[:3] == ["trajectory_recall", "2", "2"] for line in lines)


def test_json_output_is_the_report(tmp_path: Path) -> None:
    """--format json prints the JSON contract (same as evaluate_rows) and echoes bad rows on stderr."""
    path = dataset(tmp_path)
    result = invoke(str(path), "--format", "json")
    assert result.exit_code == 3
    document = json.loads(result.stdout)
    assert document == json.loads(json.dumps(evaluate_rows(load_dataset(path)).to_json()))
    assert [instance["index"] for instance in document["instances"]] == [0, 1, 2, 3]
    assert document["instances"][3]["metrics"]["trajectory_recall"] is None
    assert document["instances"][2]["error"]["field"] == "predicted_trajectory"
    assert "bad row: row 2 (line 3), field predicted_trajectory" in result.stderr


def test_metric_parameters_reach_the_metrics(tmp_path: Path) -> None:
    """--metric specs with parameters (tool name, argument modes, tool correctness options) are applied."""
    result = invoke(
        str(dataset(tmp_path)),
        "--format", "json",
        "--metric", "trajectory_single_tool_use:tool_name=fetch",
        "--metric", "trajectory_recall:arguments=ignore",
        "--metric", "trajectory_precision:arguments=exact,tool_arguments.fetch=ignore",
        "--metric", "tool_correctness:strict_mode=true,evaluation_params=output",
    )  # fmt: skip
    assert result.exit_code == 3
    instances = json.loads(result.stdout)["instances"]
    assert list(instances[0]["metrics"]) == [
        "trajectory_single_tool_use",
        "trajectory_recall",
        "trajectory_precision",
        "tool_correctness",
        "tool_correctness_success",
        "latency",
        "failure",
    ]
    assert [instance["metrics"]["trajectory_single_tool_use"] for instance in instances] == [
        1.0,
        1.0,
        None,
        0.0,
    ]
    assert instances[1]["metrics"]["trajectory_recall"] == 1.0  # url v vs u, arguments ignored
    assert instances[1]["metrics"]["trajectory_precision"] == 1.0  # fetch's arguments ignored
    assert instances[0]["metrics"]["tool_correctness"] == 1.0  # names only: search then extra fetch
    assert instances[0]["metrics"]["tool_correctness_success"] == 1.0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("trajectory_nope", "valid metrics: trajectory_exact_match, trajectory_in_order_match"),
        ("trajectory_recall:mode=subset", "valid parameters: arguments="),
        ("tool_correctness:threshold=2", "expected a number in [0, 1]"),
        ("trajectory_single_tool_use", "missing required parameter tool_name"),
    ],
)
def test_invalid_metric_is_a_usage_error(tmp_path: Path, spec: str, message: str) -> None:
    """A bad --metric exits 2 with click's message for --metric, saying what is valid."""
    result = invoke(str(dataset(tmp_path)), "--metric", spec)
    assert result.exit_code == 2
    assert "Invalid value for '--metric'" in result.stderr
    assert message in result.stderr


def test_metric_given_twice_is_a_usage_error(tmp_path: Path) -> None:
    """The same metric twice is refused: each is reported under its name."""
    result = invoke(str(dataset(tmp_path)), "--metric", "trajectory_recall", "--metric", "trajectory_recall")
    assert result.exit_code == 2
    assert "more than once: trajectory_recall" in result.stderr


@pytest.mark.parametrize(("name", "content"), [("missing.jsonl", None), ("bad.json", "[{"), ("d.xlsx", "")])
def test_unreadable_dataset_exits_3(tmp_path: Path, name: str, content: str | None) -> None:
    """A dataset that cannot be read is bad input: exit 3 with a message naming the file."""
    path = tmp_path / name
    if content is not None:
        path.write_text(content, encoding="utf-8")
    result = invoke(str(path))
    assert result.exit_code == 3
    assert f"cannot read the dataset {path}: " in result.stderr


def test_output_file(tmp_path: Path) -> None:
    """--output writes the report to the file and says so on stderr."""
    target = tmp_path / "report.json"
    result = invoke(str(dataset(tmp_path)), "--format", "json", "--output", str(target))
    assert result.exit_code == 3
    assert result.stdout == ""
    assert len(json.loads(target.read_text(encoding="utf-8"))["instances"]) == 4
    assert f"wrote 4 instance(s), 1 bad to {target}" in result.stderr


def test_agent_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--agent runs the function on each prompt and evaluates its traced run against the references."""
    monkeypatch.setattr(sys, "path", list(sys.path))  # the command puts the working directory on it
    path = dataset(
        tmp_path,
        [
            {"prompt": "x", "reference_trajectory": [SEARCH]},
            {"query": "boom", "reference_trajectory": [SEARCH]},
            {"reference_trajectory": []},
        ],
    )
    agent = "evaluators.offline.sample_agent:run"
    result = invoke(str(path), "--agent", agent, "--format", "json", "--metric", "trajectory_exact_match")
    assert result.exit_code == 3, result.output
    instances = json.loads(result.stdout)["instances"]
    assert instances[0]["metrics"]["trajectory_exact_match"] == 1.0
    assert instances[0]["metrics"]["failure"] == 0.0
    assert instances[0]["metrics"]["latency"] > 0
    assert instances[1]["metrics"]["failure"] == 1.0
    assert instances[1]["metrics"]["trajectory_exact_match"] == 0.0
    assert instances[2]["error"]["field"] == "query"


def test_bad_agent_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An --agent that names nothing callable exits 2 before any row is read."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    result = invoke(str(tmp_path / "missing.jsonl"), "--agent", "evaluators.offline.sample_agent:nope")
    assert result.exit_code == 2
    assert "Invalid value for '--agent'" in result.stderr
    assert "has no attribute 'nope'" in result.stderr


def test_help_lists_the_metric_catalogue() -> None:
    """--help shows every metric with its parameters."""
    result = invoke("--help")
    assert "trajectory_single_tool_use" in result.stdout
    assert "tool_name=<str> (required)" in result.stdout
    assert "should_consider_ordering=<true|false>" in result.stdout


def test_stored_references_fill_rows_without_one(
    store: Any, chdb_dir: Path, database: str, tmp_path: Path
) -> None:
    """--stored-references gives each row without a reference its task's current reference from
    the store, so a file of runs (which carry their task, not a reference) scores against what
    `references load` stored; a row with its own reference keeps it; without the flag neither
    row of the task is scored against a reference."""
    from agenttrail.collector.schema import migrate
    from agenttrail.evaluators.composition import ALL_MIGRATIONS
    from agenttrail.evaluators.scoring.reference_store import store_reference_set
    from agenttrail.evaluators.scoring.references import parse_reference_set

    migrate(store, ALL_MIGRATIONS)
    store_reference_set(store, parse_reference_set({"refund": [{"tool_name": "search"}]}), source="t")
    rows = [
        {"task": "refund", "predicted_trajectory": [SEARCH]},
        {"task": "refund", "predicted_trajectory": [SEARCH], "reference_trajectory": [FETCH]},
        {"task": "faq", "predicted_trajectory": [SEARCH]},
    ]
    path = dataset(tmp_path, rows)
    where = ["--store", str(chdb_dir), "--database", database, "--format", "json"]
    filled = invoke(str(path), "--stored-references", *where)
    assert filled.exit_code == 0, filled.output
    instances = json.loads(filled.stdout)["instances"]
    assert [i["metrics"]["trajectory_exact_match"] for i in instances] == [1.0, 0.0, None]
    plain = invoke(str(path), *where)
    assert plain.exit_code == 0, plain.output
    assert [i["metrics"]["trajectory_exact_match"] for i in json.loads(plain.stdout)["instances"]] == [
        None,
        0.0,
        None,
    ]


def test_stored_references_bring_the_tasks_metric_settings(
    store: Any, chdb_dir: Path, database: str, tmp_path: Path
) -> None:
    """--stored-references scores a row with its task's stored metric settings (the task's options,
    and its own spec of a metric), as `references load` stored them; a row's own `options` win
    over them, and a --metric spec's own parameters over both."""
    from agenttrail.collector.schema import migrate
    from agenttrail.evaluators.composition import ALL_MIGRATIONS
    from agenttrail.evaluators.scoring.reference_store import store_reference_set
    from agenttrail.evaluators.scoring.references import parse_reference_set

    migrate(store, ALL_MIGRATIONS)
    stored = {
        "refund": {"reference_trajectory": [SEARCH], "options": {"arguments": "ignore"}},
        "faq": {"reference_trajectory": [SEARCH], "metrics": ["trajectory_exact_match:arguments=ignore"]},
    }
    store_reference_set(store, parse_reference_set(stored), source="t")
    other_query = {"tool_name": "search", "tool_input": {"q": "y"}}
    rows = [
        {"task": "refund", "predicted_trajectory": [other_query]},
        {"task": "faq", "predicted_trajectory": [other_query]},
        {"task": "refund", "predicted_trajectory": [other_query], "options": {"arguments": "exact"}},
    ]
    where = [str(dataset(tmp_path, rows)), "--stored-references", "--store", str(chdb_dir)]
    where += ["--database", database, "--format", "json"]

    def exact(*extra: str) -> list[Any]:
        result = invoke(*where, *extra)
        assert result.exit_code == 0, result.output
        return [i["metrics"]["trajectory_exact_match"] for i in json.loads(result.stdout)["instances"]]

    assert exact() == [1.0, 1.0, 0.0]
    assert exact("--metric", "trajectory_exact_match") == [1.0, 1.0, 0.0]
    assert exact("--metric", "trajectory_exact_match:arguments=exact") == [0.0, 0.0, 0.0]


def test_a_rows_bad_options_name_the_row_and_field(tmp_path: Path) -> None:
    """A row's `options` are checked as a reference entry's are: a bad one is a bad row (exit 3)."""
    row = {"predicted_trajectory": [SEARCH], "reference_trajectory": [SEARCH], "options": {"arguments": "x"}}
    rows = [row]
    result = invoke(str(dataset(tmp_path, rows)))
    assert result.exit_code == 3, result.output
    assert "row 0 (line 1), field options: arguments:" in result.output, result.output
