"""Reference sets: the file shapes, validation naming row/task/field, the content hash, round trips."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agenttrail.evaluators.metrics import ABSENT, ToolCall
from agenttrail.evaluators.scoring.references import (
    ReferenceEntry,
    ReferenceSet,
    ReferenceSetError,
    load_reference_set,
    parse_reference_set,
)

REFUND: dict[str, Any] = {
    "reference_trajectory": [
        {"tool_name": "lookup_order", "tool_input": {"id": "42"}},
        {"tool_name": "refund", "tool_input": {"id": "42", "amount": 10.0}},
    ],
    "expected_response": "Refunded order 42.",
    "metrics": ["trajectory_exact_match", "tool_correctness:threshold=0.8"],
    "options": {"arguments": "subset", "tool_arguments.refund": "ignore"},
}
GREET: dict[str, Any] = {"expected_tools": [{"name": "say_hello"}]}


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def as_mapping_yaml(tmp_path: Path) -> Path:
    return write(tmp_path / "refs.yaml", yaml.safe_dump({"refund": REFUND, "greet": GREET}))


def test_yaml_mapping_of_task_to_entry(tmp_path: Path) -> None:
    """A YAML object maps task -> entry; the entry is normalised into ReferenceEntry."""
    references = load_reference_set(as_mapping_yaml(tmp_path))
    assert set(references.entries) == {"refund", "greet"}
    refund = references.entries["refund"]
    assert refund.reference == (
        ToolCall("lookup_order", {"id": "42"}),
        ToolCall("refund", {"id": "42", "amount": 10.0}),
    )
    assert refund.expected_response == "Refunded order 42."
    assert refund.metrics == ("trajectory_exact_match", "tool_correctness:threshold=0.8")
    assert refund.options == {"arguments": "subset", "tool_arguments.refund": "ignore"}
    assert references.entries["greet"].reference == (ToolCall("say_hello"),)


def test_all_shapes_load_the_same_set(tmp_path: Path) -> None:
    """JSON object, JSON list, JSONL and YAML list forms give equal entries and the same hash."""
    listed = [{"task": "refund", **REFUND}, {"task": "greet", **GREET}]
    paths = [
        as_mapping_yaml(tmp_path),
        write(tmp_path / "object.json", json.dumps({"refund": REFUND, "greet": GREET})),
        write(tmp_path / "list.json", json.dumps(listed)),
        write(tmp_path / "rows.jsonl", "\n".join(json.dumps(entry) for entry in listed) + "\n"),
        write(tmp_path / "list.yml", yaml.safe_dump(listed)),
    ]
    loaded = [load_reference_set(path) for path in paths]
    assert all(item == loaded[0] for item in loaded)
    assert len({item.content_hash for item in loaded}) == 1


def test_task_mapped_to_a_bare_trajectory(tmp_path: Path) -> None:
    """In the mapping form a task may map straight to its trajectory, in OpenAI message format too."""
    messages = [
        {
            "role": "assistant",
            "tool_calls": [{"id": "1", "function": {"name": "say_hello", "arguments": ""}}],
        },
        {"role": "tool", "tool_call_id": "1", "content": "hello"},
    ]
    references = parse_reference_set({"greet": messages})
    assert references.entries["greet"].reference == (ToolCall("say_hello", {}, "hello"),)


def test_hash_is_stable_under_reordering() -> None:
    """Reordering keys, entries and trajectory formats (same calls) keeps the hash; content changes it."""
    reordered = {
        "greet": {"expected_tools": [{"name": "say_hello"}]},
        "refund": {
            "options": {"tool_arguments.refund": "ignore", "arguments": "subset"},
            "metrics": REFUND["metrics"],
            "expected_response": "Refunded order 42.",
            "expected_tools": [
                {"args": {"id": "42"}, "name": "lookup_order"},
                {"name": "refund", "args": {"amount": 10, "id": "42"}},
            ],
        },
    }
    original = parse_reference_set({"refund": REFUND, "greet": GREET})
    assert parse_reference_set(reordered).content_hash == original.content_hash
    changed = parse_reference_set({"refund": {**REFUND, "expected_response": "Done."}, "greet": GREET})
    assert changed.content_hash != original.content_hash
    assert len(original.content_hash) == 64


def test_entry_json_round_trip() -> None:
    """to_json/from_json keep absent inputs, null (wildcard) inputs, outputs, metrics and options."""
    entry = ReferenceEntry(
        "t",
        (ToolCall("a"), ToolCall("b", None), ToolCall("c", {"k": [1, {"n": None}]}, {"ok": True})),
        {"text": "done"},
        ("trajectory_recall:arguments=subset",),
        {"threshold": "0.7"},
    )
    document = json.loads(json.dumps(entry.to_json()))
    assert ReferenceEntry.from_json(document) == entry
    assert ReferenceEntry.from_json(document).reference[0].input is ABSENT
    assert ReferenceSet.from_entries([entry]).to_json() == [document]


def test_errors_are_collected_naming_row_task_and_field(tmp_path: Path) -> None:
    """Every problem of a list file is reported at once, each with row, line, task and field."""
    lines = [
        {"task": "ok", **GREET},
        {"task": "bad", "reference_trajectory": [{"tool_input": {}}], "metrics": ["nope"]},
        {"reference_trajectory": []},
        "{not json",
        {"task": "ok", "reference_trajectory": []},
        {"task": "typo", "reference_trajectory": [], "metric": ["trajectory_recall"]},
    ]
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    with pytest.raises(ReferenceSetError) as caught:
        load_reference_set(write(tmp_path / "refs.jsonl", text))
    problems = [str(problem) for problem in caught.value.problems]
    assert problems[0].startswith("row 1 (line 2), task 'bad', field reference_trajectory: trajectory[0]")
    assert problems[1].startswith("row 1 (line 2), task 'bad', field metrics[0]: unknown metric 'nope'")
    assert problems[2] == "row 2 (line 3), field task: expected a non-empty task name, got None"
    assert problems[3].startswith("row 3 (line 4): not valid JSON")
    assert problems[4] == "row 4 (line 5), task 'ok', field task: task already defined at row 0"
    assert problems[5].startswith("row 5 (line 6), task 'typo', field metric: unknown field; valid fields:")
    assert len(problems) == 6
    assert str(caught.value).startswith(f"{tmp_path / 'refs.jsonl'}: 6 problems:\n  row 1 (line 2)")


@pytest.mark.parametrize(
    ("entry", "field", "message"),
    [
        ({}, "reference_trajectory", "missing: give one of reference_trajectory, expected_tools"),
        ({**GREET, "reference_trajectory": []}, "expected_tools", "give one reference trajectory"),
        ({**GREET, "metrics": "trajectory_recall"}, "metrics", "expected a list"),
        ({**GREET, "metrics": ["trajectory_recall", "trajectory_recall"]}, "metrics[1]", "already given"),
        ({**GREET, "metrics": ["trajectory_single_tool_use"]}, "metrics[0]", "missing required parameter"),
        ({**GREET, "arguments": "fuzzy"}, "arguments", "expected exact, ignore, subset"),
        ({**GREET, "options": {"threshold": 2}}, "options.threshold", "expected a number in [0, 1]"),
        ({**GREET, "options": {"colour": "red"}}, "options.colour", "no metric takes this parameter"),
        ({**GREET, "options": {"arguments": "a,b"}}, "options.arguments", "cannot contain ','"),
        ({**GREET, "options": ["arguments"]}, "options", "expected an object"),
        ({**GREET, "arguments": "subset", "options": {"arguments": "ignore"}}, "arguments", "given both"),
        ({**GREET, "task": "other"}, "task", "differs from the key 'greet'"),
    ],
)
def test_entry_problems_name_the_field(entry: dict[str, Any], field: str, message: str) -> None:
    """Each kind of bad entry is reported with the task and the field at fault."""
    with pytest.raises(ReferenceSetError) as caught:
        parse_reference_set({"greet": entry}, source="refs.yaml")
    (problem,) = caught.value.problems
    assert (problem.task, problem.field) == ("greet", field)
    assert message in problem.message
    assert str(caught.value).startswith(f"refs.yaml: task 'greet', field {field}: ")


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("refs.yaml", "greet: [unclosed", "not valid YAML"),
        ("refs.yaml", "", "got nothing"),
        ("refs.json", "42", "expected an object of task -> entry or a list of entries, got int"),
        ("refs.json", "{}", "no entries"),
        ("refs.json", '{"greet": [], "greet": []}', "key 'greet' appears twice"),
        ("refs.yaml", "greet: []\ngreet: []\n", "key 'greet' appears twice"),
        ("refs.toml", "", "unsupported file type"),
    ],
)
def test_file_level_problems(tmp_path: Path, name: str, text: str, message: str) -> None:
    """Unparseable, empty, wrongly shaped or key-repeating files are rejected with the path."""
    path = write(tmp_path / name, text)
    with pytest.raises(ReferenceSetError) as caught:
        load_reference_set(path)
    assert str(caught.value).startswith(str(path))
    assert message in str(caught.value)


def test_yaml_non_string_task_key() -> None:
    """A YAML key that is not a string (yes, 1) is reported, not turned into a task."""
    with pytest.raises(ReferenceSetError, match="task keys must be strings"):
        parse_reference_set({1: [], "ok": []})


def test_option_lists_and_scalars_become_spec_values() -> None:
    """Lists become keys:K1|K2 for argument modes, |-joined evaluation params; numbers, booleans text."""
    references = parse_reference_set(
        {
            "t": {
                "reference_trajectory": [],
                "arguments": ["query", "options.limit"],
                "options": {
                    "evaluation_params": ["input_parameters"],
                    "threshold": 0.7,
                    "strict_mode": True,
                },
            }
        }
    )
    assert references.entries["t"].options == {
        "evaluation_params": "input_parameters",
        "threshold": "0.7",
        "strict_mode": "true",
        "arguments": "keys:query|options.limit",
    }


def test_configured_metrics_merge_task_options() -> None:
    """Options reach every metric that takes them unless its own spec sets them; defaults when no metrics."""
    entry = parse_reference_set({"refund": REFUND}).entries["refund"]
    exact, correctness = entry.configured_metrics()
    assert exact.params["arguments"] == "subset"
    assert exact.params["tool_arguments"] == {"refund": "ignore"}
    assert correctness.params["threshold"] == 0.8  # the spec's own value wins
    plain = parse_reference_set({"t": {"reference_trajectory": [], "options": {"threshold": 0.3}}}).entries[
        "t"
    ]
    (recall, tool) = plain.configured_metrics(["trajectory_recall:arguments=ignore", "tool_correctness"])
    assert recall.params["arguments"] == "ignore"
    assert tool.params["threshold"] == 0.3
