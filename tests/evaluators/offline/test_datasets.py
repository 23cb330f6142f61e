"""Dataset files: JSONL, JSON and CSV rows in the Vertex and GLLM/DeepEval formats."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from agenttrail.evaluators.metrics import ABSENT, NOT_CAPTURED, ToolCall
from agenttrail.evaluators.offline.datasets import DatasetError, DatasetRow, RowError, load_dataset, parse_row

SEARCH = {"tool_name": "search", "tool_input": {"q": "x"}}
FETCH = {"tool_name": "fetch", "tool_input": {"url": "u"}}
VERTEX_ROW = {
    "predicted_trajectory": [SEARCH, FETCH],
    "reference_trajectory": [SEARCH],
    "latency_in_seconds": 1.5,
    "failure": 0,
}
OPENAI_MESSAGES = [
    {"role": "user", "content": "find x"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": '["X"]'},
    {"role": "assistant", "content": "X"},
]


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def good(rows: list[DatasetRow | RowError]) -> list[DatasetRow]:
    assert all(isinstance(row, DatasetRow) for row in rows), [str(row) for row in rows]
    return [row for row in rows if isinstance(row, DatasetRow)]


def test_jsonl_vertex_rows(tmp_path: Path) -> None:
    """A Vertex JSONL row gives predicted, reference, latency and failure, numbered from 0 with its line."""
    (row,) = good(load_dataset(write_jsonl(tmp_path / "d.jsonl", [VERTEX_ROW])))
    assert row.index == 0
    assert row.line == 1
    assert row.predicted == [ToolCall("search", {"q": "x"}), ToolCall("fetch", {"url": "u"})]
    assert row.reference == [ToolCall("search", {"q": "x"})]
    assert (row.latency_s, row.failure) == (1.5, False)
    assert row.extra == {}


def test_jsonl_blank_lines_do_not_count_as_rows(tmp_path: Path) -> None:
    """Blank lines are skipped: indexes count rows, lines count file lines."""
    path = tmp_path / "d.jsonl"
    path.write_text(f"\n{json.dumps(VERTEX_ROW)}\n\n{json.dumps(VERTEX_ROW)}\n", encoding="utf-8")
    rows = good(load_dataset(path))
    assert [(row.index, row.line) for row in rows] == [(0, 2), (1, 4)]


@pytest.mark.parametrize("key", ["rows", "data", "instances", "examples", "records"])
def test_json_object_holding_rows(tmp_path: Path, key: str) -> None:
    """A JSON object with the row list under a known key reads like a bare list."""
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"name": "my set", key: [VERTEX_ROW, VERTEX_ROW]}), encoding="utf-8")
    rows = good(load_dataset(path))
    assert [row.index for row in rows] == [0, 1]
    assert rows[0].line is None


def test_json_list_and_columns_read_the_same(tmp_path: Path) -> None:
    """A list of rows, columns of lists and pandas' column orientation give the same rows."""
    second = {**VERTEX_ROW, "latency_in_seconds": 2.0, "failure": 1}
    rows_form = [VERTEX_ROW, second]
    columns = {key: [VERTEX_ROW[key], second[key]] for key in VERTEX_ROW}
    pandas = {key: {"0": VERTEX_ROW[key], "1": second[key]} for key in VERTEX_ROW}
    results = []
    for name, document in [("rows", rows_form), ("columns", columns), ("pandas", pandas)]:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(document), encoding="utf-8")
        results.append(good(load_dataset(path)))
    assert results[0] == results[1] == results[2]
    assert [row.failure for row in results[0]] == [False, True]


def test_csv_cells(tmp_path: Path) -> None:
    """CSV: JSON cells are parsed, empty cells are absent, numbers and flags are read from text."""
    path = write_csv(
        tmp_path / "d.csv",
        ["predicted_trajectory", "reference_trajectory", "latency_in_seconds", "failure", "query", "meta"],
        [
            [json.dumps([SEARCH]), json.dumps([SEARCH]), "0.25", "true", '["not", "parsed"]', '{"k": 1}'],
            [json.dumps([FETCH]), "", "", "", "", "plain"],
        ],
    )
    first, second = good(load_dataset(path))
    assert first.predicted == first.reference == [ToolCall("search", {"q": "x"})]
    assert (first.latency_s, first.failure) == (0.25, True)
    assert first.query == '["not", "parsed"]'  # free text stays text
    assert first.extra == {"meta": {"k": 1}}
    assert second.reference is None
    assert second.latency_s is None
    assert second.failure is None
    assert second.query is None
    assert second.extra == {"meta": "plain"}
    assert [first.line, second.line] == [2, 3]


def test_csv_line_numbers_follow_multiline_cells(tmp_path: Path) -> None:
    """A quoted cell spanning lines moves the next row's line number on."""
    path = write_csv(
        tmp_path / "d.csv",
        ["query", "predicted_trajectory"],
        [["line one\nline two", "[]"], ["q", "[{}]"]],
    )
    first, second = load_dataset(path)
    assert isinstance(first, DatasetRow)
    assert first.query == "line one\nline two"
    assert isinstance(second, RowError)
    assert str(second).startswith("row 1 (line 4), field predicted_trajectory: trajectory[0]")


def test_csv_row_with_too_many_cells_is_a_row_error(tmp_path: Path) -> None:
    """A CSV row with more cells than the header has columns is reported, the others still read."""
    path = tmp_path / "d.csv"
    path.write_text('predicted_trajectory\n"[]"\n"[]",extra\n"[]"\n', encoding="utf-8")
    rows = load_dataset(path)
    assert isinstance(rows[1], RowError)
    assert "2 cells" in rows[1].message
    assert isinstance(rows[0], DatasetRow)
    assert isinstance(rows[2], DatasetRow)


def test_gllm_deepeval_row() -> None:
    """tools_called / expected_tools (with args, input_parameters, output) and the GLLM text fields."""
    row = parse_row(
        3,
        {
            "query": "find x",
            "tools_called": [{"name": "search", "args": {"q": "x"}, "output": ["X"]}],
            "expected_tools": [{"name": "search", "input_parameters": {"q": "x"}}],
            "generated_response": "X",
            "expected_response": "X!",
        },
    )
    assert isinstance(row, DatasetRow)
    assert row.index == 3
    assert row.predicted == [ToolCall("search", {"q": "x"}, ["X"])]
    assert row.reference == [ToolCall("search", {"q": "x"}, ABSENT)]
    assert (row.query, row.response, row.expected_response) == ("find x", "X", "X!")


def test_openai_message_trajectories() -> None:
    """agent_trajectory / expected_agent_trajectory are OpenAI message lists; tool results become outputs."""
    row = parse_row(0, {"agent_trajectory": OPENAI_MESSAGES, "expected_agent_trajectory": OPENAI_MESSAGES})
    assert isinstance(row, DatasetRow)
    assert row.predicted == row.reference == [ToolCall("search", {"q": "x"}, ["X"])]


def test_tools_called_wins_over_agent_trajectory() -> None:
    """With both, tools_called is the predicted trajectory and agent_trajectory stays in extra."""
    row = parse_row(0, {"tools_called": [{"name": "fetch"}], "agent_trajectory": OPENAI_MESSAGES})
    assert isinstance(row, DatasetRow)
    assert row.predicted == [ToolCall("fetch")]
    assert row.extra == {"agent_trajectory": OPENAI_MESSAGES}


def test_vertex_trajectory_as_json_text() -> None:
    """Trajectories may be JSON strings, as Vertex dataframes often hold them."""
    row = parse_row(0, {"predicted_trajectory": json.dumps([SEARCH]), "reference_trajectory": "[]"})
    assert isinstance(row, DatasetRow)
    assert row.predicted == [ToolCall("search", {"q": "x"})]
    assert row.reference == []


def test_null_fields_are_absent() -> None:
    """JSON null means absent: no reference, no latency, and no stray extra field."""
    row = parse_row(0, {"predicted_trajectory": [], "reference_trajectory": None, "latency_in_seconds": None})
    assert isinstance(row, DatasetRow)
    assert (row.reference, row.latency_s, row.extra) == (None, None, {})


@pytest.mark.parametrize(
    ("record", "field", "message"),
    [
        ({"predicted_trajectory": [SEARCH, {"tool_input": {}}]}, "predicted_trajectory", "trajectory[1]"),
        ({"tools_called": "not json"}, "tools_called", "not valid JSON"),
        ({"predicted_trajectory": [], "expected_tools": {"name": "x"}}, "expected_tools", "expected a list"),
        ({"predicted_trajectory": [], "latency_in_seconds": -1}, "latency_in_seconds", "non-negative"),
        ({"predicted_trajectory": [], "latency_in_seconds": True}, "latency_in_seconds", "seconds"),
        ({"predicted_trajectory": [], "failure": 2}, "failure", "0, 1, true or false"),
        ({"predicted_trajectory": [], "query": {"text": "hi"}}, "query", "expected a string"),
        ([SEARCH], None, "expected an object of fields, got list"),
    ],
)
def test_bad_row_names_row_and_field(record: object, field: str | None, message: str) -> None:
    """A bad row becomes a RowError naming the row and the field at fault."""
    error = parse_row(4, record, line=7)
    assert isinstance(error, RowError)
    assert (error.index, error.field, error.line) == (4, field, 7)
    assert message in error.message
    assert str(error).startswith(f"row 4 (line 7){f', field {field}' if field else ''}: ")


def test_bad_rows_do_not_stop_the_others(tmp_path: Path) -> None:
    """A bad JSON line and a bad field each spoil only their own row."""
    path = tmp_path / "d.jsonl"
    lines = [
        json.dumps(VERTEX_ROW),
        "{not json",
        json.dumps({**VERTEX_ROW, "failure": "maybe"}),
        json.dumps(VERTEX_ROW),
    ]
    path.write_text("\n".join(lines), encoding="utf-8")
    rows = load_dataset(path)
    assert [type(row).__name__ for row in rows] == ["DatasetRow", "RowError", "RowError", "DatasetRow"]
    assert str(rows[1]).startswith("row 1 (line 2): not valid JSON")
    assert str(rows[2]).startswith("row 2 (line 3), field failure: ")


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("d.txt", b"[]", "unsupported file type '.txt'"),
        ("d.json", b"[{]", "not valid JSON"),
        ("d.json", b'"rows"', "expected a list of rows"),
        ("d.json", b'{"rows": {"a": 1}}', "'rows' must be a list"),
        ("d.json", b'{"a": [1, 2], "b": [1]}', "different lengths"),
        ("d.json", b'{"a": 1}', "equal-length columns"),
        ("d.csv", b"", "no header row"),
        ("d.csv", b"query,query\nx,y\n", "appears more than once"),
        ("d.jsonl", b'{"query": "\xff"}', "not UTF-8"),
    ],
)
def test_unreadable_files_raise_naming_the_path(
    tmp_path: Path, name: str, content: bytes, reason: str
) -> None:
    """A file that cannot be read or parsed at all raises DatasetError with its path and the reason."""
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    assert str(caught.value) == f"{path}: {caught.value.reason}"
    assert reason in caught.value.reason


def test_missing_file(tmp_path: Path) -> None:
    """A missing file is a DatasetError saying so."""
    with pytest.raises(DatasetError, match="no such file"):
        load_dataset(tmp_path / "nope.jsonl")


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    """A byte-order mark (as Excel writes in CSV) does not end up in the first column name."""
    path = tmp_path / "d.csv"
    path.write_bytes("\ufeffquery,predicted_trajectory\nhi,[]\n".encode())
    (row,) = good(load_dataset(path))
    assert row.query == "hi"
    assert row.predicted == []


def test_a_run_row_carries_its_run_and_reads_its_calls_as_online(tmp_path: Path) -> None:
    """A run as `trajectories --format json` prints it: `run` is its AgentRun, arguments not
    captured stay NOT_CAPTURED (not null), a string cut by the size limit is no arguments (not a
    bad row), and a run the model cannot read is a RowError saying so; the next row still loads."""
    calls = [
        {"name": "audit", "input": None, "input_captured": False, "output": None, "output_captured": False},
        {"name": "search", "input": '{"q": "cut', "output": ["x"], "status": "ok"},
    ]
    run = {"trace_id": "t1", "agent": "bot", "start": "2026-01-02T03:04:05.123456Z", "tool_calls": calls}
    broken = {**run, "start": "yesterday"}
    first, second, third = load_dataset(write_jsonl(tmp_path / "runs.jsonl", [run, broken, run]))
    assert isinstance(first, DatasetRow)
    assert first.predicted == [ToolCall("audit", NOT_CAPTURED), ToolCall("search", output=["x"])]
    assert first.run is not None
    assert (first.run.trace_id, first.run.agent, first.run.start_ns) == (
        "t1",
        "bot",
        1_767_323_045_123_456_000,
    )
    assert first.run.tool_calls[0] == ToolCall("audit", NOT_CAPTURED, NOT_CAPTURED)
    assert isinstance(second, RowError)
    assert "not a run as `agenttrail trajectories --format json` prints it (ValueError" in str(second)
    assert isinstance(third, DatasetRow)
