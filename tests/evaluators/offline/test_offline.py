"""evaluate_rows: per-row scores, null-not-0, aggregates and the JSON contract."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from agenttrail.evaluators.offline.datasets import DatasetRow, RowError, parse_row
from agenttrail.evaluators.offline.evaluate import DEFAULT_METRICS, EvaluationReport, evaluate_rows

A = {"name": "search", "args": {"q": "x"}}
B = {"name": "fetch", "args": {"url": "u"}}


def rows(*records: dict[str, Any]) -> list[DatasetRow | RowError]:
    return [parse_row(index, record) for index, record in enumerate(records)]


def test_default_metrics_when_rows_have_references() -> None:
    """Without specs: the five reference metrics of Vertex's six, then latency and failure."""
    report = evaluate_rows(rows({"tools_called": [A], "expected_tools": [A]}))
    assert report.metric_names == (*DEFAULT_METRICS, "latency", "failure")
    assert report.instances[0].metrics == {
        **dict.fromkeys(DEFAULT_METRICS, 1.0),
        "latency": None,
        "failure": None,
    }


def test_default_metrics_without_any_reference() -> None:
    """No row has a reference: only latency and failure are reported."""
    report = evaluate_rows(rows({"tools_called": [A], "latency_in_seconds": 2, "failure": True}))
    assert report.metric_names == ("latency", "failure")
    assert report.instances[0].metrics == {"latency": 2.0, "failure": 1.0}


def test_reference_less_row_is_null_not_zero() -> None:
    """A row without reference gets null reference metrics, missing from the aggregate, never 0."""
    report = evaluate_rows(
        rows({"tools_called": [A], "expected_tools": [A]}, {"tools_called": [B]}),
        ["trajectory_recall", "trajectory_single_tool_use:tool_name=fetch"],
    )
    assert [instance.metrics["trajectory_recall"] for instance in report.instances] == [1.0, None]
    assert [instance.metrics["trajectory_single_tool_use"] for instance in report.instances] == [0.0, 1.0]
    recall = report.aggregate["trajectory_recall"]
    assert (recall.count, recall.mean, recall.std, recall.missing) == (1, 1.0, 0.0, 1)


def test_aggregate_values_by_hand() -> None:
    """Precision over [A]/[A], [A, B]/[A], [B]/[A] and a reference-less row: mean 0.5, sample std 0.5."""
    report = evaluate_rows(
        rows(
            {"tools_called": [A], "expected_tools": [A], "latency_in_seconds": 1},
            {"tools_called": [A, B], "expected_tools": [A], "latency_in_seconds": 2},
            {"tools_called": [B], "expected_tools": [A], "latency_in_seconds": 4},
            {"tools_called": [A]},
        ),
        ["trajectory_precision"],
    )
    precision = report.aggregate["trajectory_precision"]
    # values 1, 0.5, 0: mean 0.5; squared deviations 0.25 + 0 + 0.25 over n - 1 = 2: variance 0.25
    assert (precision.count, precision.missing, precision.mean, precision.std) == (3, 1, 0.5, 0.5)
    latency = report.aggregate["latency"]
    # 1, 2, 4: mean 7/3; deviations -4/3, -1/3, 5/3; squares 16/9 + 1/9 + 25/9 = 42/9, / 2 = 7/3
    assert latency.count == 3
    assert latency.mean == pytest.approx(7 / 3)
    assert latency.std == pytest.approx(math.sqrt(7 / 3))


def test_json_contract_shape() -> None:
    """to_json is exactly {instances: [{index, metrics, error}], aggregate: {name: {count, mean, std}}}."""
    report = evaluate_rows(
        [
            *rows({"tools_called": [A], "expected_tools": [A, B], "failure": 0}),
            RowError(1, "failure", "bad", 3),
        ],
        ["trajectory_recall"],
    )
    document = json.loads(json.dumps(report.to_json()))
    assert document == {
        "instances": [
            {
                "index": 0,
                "metrics": {"trajectory_recall": 0.5, "latency": None, "failure": 0.0},
                "error": None,
            },
            {
                "index": 1,
                "metrics": {"trajectory_recall": None, "latency": None, "failure": None},
                "error": {"field": "failure", "message": "bad", "line": 3},
            },
        ],
        "aggregate": {
            "trajectory_recall": {"count": 1, "mean": 0.5, "std": 0.0},
            "latency": {"count": 0, "mean": None, "std": None},
            "failure": {"count": 1, "mean": 0.0, "std": 0.0},
        },
    }


def test_bad_rows_stay_in_the_report() -> None:
    """Bad rows keep their place with null metrics and their error; the other rows are scored."""
    report = evaluate_rows(
        rows({"tools_called": [A], "expected_tools": [A]}, {"tools_called": [{"args": {}}]})
    )
    assert [instance.index for instance in report.instances] == [0, 1]
    assert report.instances[0].error is None
    assert report.instances[0].metrics["trajectory_recall"] == 1.0
    bad = report.instances[1]
    assert bad.error is not None
    assert bad.error.field == "tools_called"
    assert set(bad.metrics.values()) == {None}
    assert report.errors == [bad.error]


def test_row_without_predicted_trajectory_is_an_error() -> None:
    """A row with nothing to score is reported as an error on predicted_trajectory, not silently null."""
    report = evaluate_rows(rows({"expected_tools": [A], "query": "hi"}))
    (error,) = report.errors
    assert (error.index, error.field) == (0, "predicted_trajectory")
    assert "tools_called" in error.message


def test_metric_parameters_pass_through() -> None:
    """Argument modes, per-tool overrides and tool correctness options change the scores."""
    record = {
        "tools_called": [
            {"name": "fetch", "args": {"url": "u", "page": 2}},
            {"name": "search", "args": {"q": "y"}},
        ],
        "expected_tools": [{"name": "search", "args": {"q": "x"}}, {"name": "fetch", "args": {"url": "u"}}],
    }
    report = evaluate_rows(
        rows(record),
        [
            "trajectory_any_order_match:arguments=superset,tool_arguments.search=ignore",
            "trajectory_recall:arguments=keys:q",
            "trajectory_precision",
            "tool_correctness:should_consider_ordering=true,evaluation_params=output",
            "trajectory_single_tool_use:tool_name=search",
        ],
    )
    metrics = report.instances[0].metrics
    assert metrics["trajectory_any_order_match"] == 1.0  # fetch is a superset, search args ignored
    assert metrics["trajectory_recall"] == 0.5  # fetch matches (no q in either), search has q y != x
    assert metrics["trajectory_precision"] == 0.0  # exact mode: nothing matches
    assert metrics["tool_correctness"] == 0.5  # names in order: one of two (no outputs to compare)
    assert metrics["tool_correctness_success"] == 1.0
    assert metrics["trajectory_single_tool_use"] == 1.0


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        (["nope"], "valid metrics: trajectory_exact_match"),
        (["trajectory_single_tool_use"], "missing required parameter tool_name"),
        (["trajectory_recall:bogus=1"], "valid parameters: arguments="),
        (["trajectory_recall", "trajectory_recall:arguments=subset"], "more than once: trajectory_recall"),
    ],
)
def test_invalid_specs_raise_before_scoring(specs: list[str], message: str) -> None:
    """A bad or repeated metric spec raises ValueError saying what is valid."""
    with pytest.raises(ValueError, match=message):
        evaluate_rows(rows({"tools_called": [A]}), specs)


def test_table_rendering() -> None:
    """The table lists each row (null as '-', latency in a fitting unit), the bad rows' errors, then
    count/missing/mean/std."""
    report: EvaluationReport = evaluate_rows(
        [
            *rows(
                {"tools_called": [A], "expected_tools": [A, B], "latency_in_seconds": 0.123456},
                {"tools_called": [A]},
            ),
            RowError(2, "failure", "expected 0, 1, true or false, got 'x'", 4),
        ],
        ["trajectory_recall"],
    )
    lines = report.to_table().splitlines()
    assert lines[0].split() == ["row", "trajectory_recall", "latency", "failure"]
    assert lines[2].split() == ["0", "0.5", "123", "ms", "-"]
    assert lines[3].split() == ["1", "-", "-", "-"]
    assert "1 bad row(s), not scored:" in lines
    assert "  row 2 (line 4), field failure: expected 0, 1, true or false, got 'x'" in lines
    aggregate_header = lines.index(next(line for line in lines if line.startswith("metric")))
    assert lines[aggregate_header].split() == ["metric", "count", "missing", "mean", "std"]
    assert lines[aggregate_header + 2].split() == ["trajectory_recall", "1", "2", "0.5", "0"]
