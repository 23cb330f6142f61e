"""Runnable mode: the agent runs on each row's query, traced, and its run becomes the prediction."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.util.types import AttributeValue

from agenttrail.evaluators.metrics import ABSENT, ToolCall
from agenttrail.evaluators.offline.datasets import DatasetRow, RowError, parse_row
from agenttrail.evaluators.offline.evaluate import evaluate_rows
from agenttrail.evaluators.offline.runnable import (
    AgentLoadError,
    attribute_text,
    load_agent,
    run_agent_over_dataset,
    spans_to_records,
)
from agenttrail.instrumentation.testing import capture_spans

from . import sample_agent

MODULE = "evaluators.offline.sample_agent"


def ran(rows: list[DatasetRow | RowError]) -> list[DatasetRow]:
    assert all(isinstance(row, DatasetRow) for row in rows), [str(row) for row in rows]
    return [row for row in rows if isinstance(row, DatasetRow)]


def prompts(*queries: str) -> list[DatasetRow | RowError]:
    return [parse_row(index, {"query": query}) for index, query in enumerate(queries)]


def test_sync_agent() -> None:
    """A decorated sync agent's tool calls, latency, success and return value fill the row."""
    (row,) = ran(run_agent_over_dataset(f"{MODULE}:run", prompts("hi")))
    assert row.predicted == [ToolCall("search", {"q": "hi"}, ["HI"])]
    assert row.failure is False
    assert row.latency_s is not None
    assert row.latency_s > 0
    assert row.response == "HI"


def test_async_agent() -> None:
    """An async agent is awaited; its async and sync tool calls are in call order."""
    rows = ran(run_agent_over_dataset(f"{MODULE}:arun", prompts("a", "b")))
    assert [row.predicted for row in rows] == [
        [
            ToolCall("fetch", {"url": query}, f"page {query}"),
            ToolCall("search", {"q": query}, [query.upper()]),
        ]
        for query in ("a", "b")
    ]
    assert [row.response for row in rows] == ["A / page a", "B / page b"]


def test_failing_agent_is_a_failure_not_a_crash(caplog: pytest.LogCaptureFixture) -> None:
    """An agent that raises makes that row failure=1 with no response; the other rows still run."""
    with caplog.at_level(logging.WARNING, logger="agenttrail.evaluators.offline.runnable"):
        first, failed, last = ran(run_agent_over_dataset(f"{MODULE}:run", prompts("x", "boom", "y")))
    assert (failed.failure, failed.response, failed.predicted) == (True, None, [])
    assert failed.latency_s is not None
    assert (first.failure, last.failure) == (False, False)
    assert "row 1: the agent raised ValueError: boom" in caplog.text
    report = evaluate_rows([first, failed, last], ["trajectory_single_tool_use:tool_name=search"])
    assert [instance.metrics["failure"] for instance in report.instances] == [0.0, 1.0, 0.0]


def test_nested_agent_calls_belong_to_the_run() -> None:
    """Calls made by a sub-agent are part of the trajectory of the run that contains them."""
    (row,) = ran(run_agent_over_dataset(sample_agent.planner, prompts("q")))
    assert row.predicted == [ToolCall("search", {"q": "q"}, ["Q"]), ToolCall("search", {"q": "q!"}, ["Q!"])]


def test_undecorated_function_and_failed_tool() -> None:
    """A plain function's @tool calls still form the run; a failed tool call has no output."""
    (row,) = ran(run_agent_over_dataset(sample_agent.plain, prompts("q")))
    assert row.predicted == [
        ToolCall("explode", {"reason": "q"}, ABSENT),
        ToolCall("search", {"q": "q"}, ["Q"]),
    ]
    assert row.failure is False


def test_run_replaces_what_the_file_predicted() -> None:
    """The agent's run replaces a predicted trajectory, latency and failure already in the row."""
    row = parse_row(0, {"prompt": "z", "predicted_trajectory": [{"tool_name": "old"}], "failure": 1})
    (new,) = ran(run_agent_over_dataset(sample_agent.run, [row]))
    assert new.predicted == [ToolCall("search", {"q": "z"}, ["Z"])]
    assert new.failure is False


def test_rows_without_query_and_bad_rows() -> None:
    """A row with no prompt becomes a RowError on query; RowErrors pass through untouched."""
    bad = RowError(1, "failure", "bad")
    no_query = parse_row(0, {"reference_trajectory": []}, line=1)
    result = run_agent_over_dataset(sample_agent.run, [no_query, bad])
    assert result[1] is bad
    assert isinstance(result[0], RowError)
    assert (
        str(result[0])
        == "row 0 (line 1), field query: no prompt to run the agent on: give one of query, prompt, input"
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon", "expected MODULE:FUNCTION"),
        (":run", "expected MODULE:FUNCTION"),
        ("no_such_module_xyz:run", "no module named 'no_such_module_xyz'"),
        (f"{MODULE}:missing", "has no attribute 'missing'"),
        (f"{MODULE}:NOT_CALLABLE", "is a int, not a callable"),
    ],
)
def test_load_agent_errors(spec: str, message: str) -> None:
    """A bad MODULE:FUNCTION spec raises AgentLoadError saying which part is wrong."""
    with pytest.raises(AgentLoadError, match=message):
        load_agent(spec)


def test_load_agent_reports_failing_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module that exists but fails to import is told apart from a missing one."""
    (tmp_path / "broken_agent_mod.py").write_text("import missing_dependency_xyz\n", encoding="utf-8")
    (tmp_path / "raising_agent_mod.py").write_text("raise RuntimeError('bad config')\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AgentLoadError, match="importing 'broken_agent_mod' failed: No module named"):
        load_agent("broken_agent_mod:run")
    with pytest.raises(AgentLoadError, match="raised RuntimeError: bad config"):
        load_agent("raising_agent_mod:run")
    for name in ("broken_agent_mod", "raising_agent_mod"):
        sys.modules.pop(name, None)


def test_load_agent_dotted_attribute() -> None:
    """The function part may be a dotted path into the module."""
    assert load_agent(f"{MODULE}:asyncio.sleep") is asyncio.sleep


def test_spans_become_collector_records() -> None:
    """SDK spans keep ids, parentage, status and events; attributes are stored text as the decoder does."""
    tracer_attributes: dict[str, AttributeValue] = {
        "s": "x",
        "b": True,
        "i": 3,
        "f": 2.0,
        "g": 0.25,
        "l": ["a", "b"],
        "n": [1, 2],
    }
    with capture_spans() as captured:
        tracer = captured.provider.get_tracer("test")
        with tracer.start_as_current_span("parent"), tracer.start_as_current_span("child") as child:
            child.set_attributes(tracer_attributes)
            child.add_event("note", {"k": False})
            child.set_status(trace.Status(trace.StatusCode.ERROR, "broke"))
        records = {record.name: record for record in spans_to_records(captured.spans)}
    parent, child_record = records["parent"], records["child"]
    assert child_record.parent_span_id == parent.span_id
    assert parent.parent_span_id == ""
    assert child_record.trace_id == parent.trace_id
    assert len(parent.trace_id) == 32
    assert (child_record.status_code, child_record.status_message) == ("Error", "broke")
    assert parent.status_code == "Unset"
    assert dict(child_record.attributes) == {
        "s": "x",
        "b": "true",
        "i": "3",
        "f": "2",
        "g": "0.25",
        "l": '["a","b"]',
        "n": "[1,2]",
    }
    assert [(event.name, dict(event.attributes)) for event in child_record.events] == [
        ("note", {"k": "false"})
    ]
    assert child_record.duration_ns >= 0


def test_attribute_text() -> None:
    """Attribute values render like the OTLP decoder: JSON for sequences, no trailing .0."""
    assert [attribute_text(value) for value in ("é", False, 10, 1.5, 3.0, ("é", 1.5))] == [
        "é",
        "false",
        "10",
        "1.5",
        "3",
        '["é",1.5]',
    ]
