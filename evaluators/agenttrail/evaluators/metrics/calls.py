"""The parser that reads every trajectory format the spec accepts into the collector's ``ToolCall``
(``agenttrail.collector.runs``, re-exported here with ``ABSENT`` and ``NOT_CAPTURED``): the same
model the assembler builds, so online and offline evaluation compare one kind of call.

Predicted and reference trajectories may each come as (or as a JSON string of):

- Vertex AI: ``[{"tool_name": "search", "tool_input": {"q": "x"}}]``
- DeepEval / GLLM: ``[{"name": "search", "args": {"q": "x"}, "output": ...}]``, with
  ``input_parameters`` accepted in place of ``args``
- an OpenAI chat message list: tool calls are read from assistant ``tool_calls`` in order; a
  ``tool`` message's content is the output of the call its ``tool_call_id`` names
- ``ToolCall`` objects, passed through

>>> parse_trajectory('[{"tool_name": "search", "tool_input": {"q": "x"}}]')
[ToolCall(name='search', input={'q': 'x'}, output=ABSENT)]
>>> parse_trajectory([
...     {"role": "assistant", "content": None, "tool_calls": [
...         {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}]},
...     {"role": "tool", "tool_call_id": "c1", "content": "2"},
... ])
[ToolCall(name='add', input={'a': 1}, output=2)]

Rules where the spec is open:

- ``ABSENT`` (the data did not carry the field) is kept apart from JSON null, because a reference
  input that is absent *or* null is a wildcard, while a tool that returned null has an output.
- ``"input_captured": false`` on a DeepEval-style call (as agenttrail stores trajectories) makes its
  input ``NOT_CAPTURED``, whatever ``args`` says; ``"output_captured": false`` its output.
- Unknown keys are ignored, so dataset rows may carry extra fields; a row that has both
  ``tool_name`` and ``name``, or both ``args`` and ``input_parameters``, is ambiguous and rejected.
- OpenAI ``arguments`` may be a JSON string or an object; an empty string means no arguments
  (``{}``). A ``tool`` message's content that is a string holding JSON is parsed (``"2"`` -> 2),
  otherwise kept as the string; a list of text parts is joined first. A result for an unknown or
  later call id, or a second result for one id, is rejected.
- Inputs and outputs must be JSON values (string keys, finite numbers); they are copied, so later
  changes to the caller's dicts do not reach a ``ToolCall``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.runs import ABSENT, NOT_CAPTURED, Absent, ToolCall

__all__ = [
    "ABSENT",
    "NOT_CAPTURED",
    "Absent",
    "ToolCall",
    "TrajectoryFormatError",
    "TrajectoryLike",
    "parse_trajectory",
]


class TrajectoryFormatError(AgentTrailError, ValueError):
    """A trajectory that is in none of the accepted formats; the message names the position."""


TrajectoryLike: TypeAlias = str | Sequence[ToolCall | Mapping[str, Any]]
"""What the metrics accept for a trajectory: anything ``parse_trajectory`` reads."""


def parse_trajectory(obj: object) -> list[ToolCall]:
    """Read a trajectory in any accepted format; raise TrajectoryFormatError naming the bad field."""
    if isinstance(obj, str):
        try:
            obj = json.loads(obj)
        except ValueError as exc:
            raise TrajectoryFormatError(f"trajectory: not valid JSON ({exc})") from exc
    if isinstance(obj, str) or not isinstance(obj, Sequence):
        raise TrajectoryFormatError(
            f"trajectory: expected a list of tool calls or chat messages, got {_kind(obj)}"
        )
    if any(isinstance(item, Mapping) and "role" in item for item in obj):
        return _parse_messages(obj)
    return [_parse_call(item, f"trajectory[{i}]") for i, item in enumerate(obj)]


def _parse_call(item: object, where: str) -> ToolCall:
    if isinstance(item, ToolCall):
        return item
    if not isinstance(item, Mapping):
        raise TrajectoryFormatError(f"{where}: expected a tool call object, got {_kind(item)}")
    if "tool_name" in item and "name" in item:
        raise TrajectoryFormatError(f"{where}: has both 'tool_name' (Vertex) and 'name' (DeepEval)")
    if "tool_name" in item:
        name = _name(item["tool_name"], f"{where}.tool_name")
        return ToolCall(name, _input(item.get("tool_input", ABSENT), f"{where}.tool_input"))
    if "name" in item:
        if "args" in item and "input_parameters" in item:
            raise TrajectoryFormatError(f"{where}: has both 'args' and 'input_parameters'")
        key = "input_parameters" if "input_parameters" in item else "args"
        output = _json(item["output"], f"{where}.output") if "output" in item else ABSENT
        if item.get("output_captured") is False:
            output = NOT_CAPTURED
        if item.get("input_captured") is False:
            return ToolCall(_name(item["name"], f"{where}.name"), NOT_CAPTURED, output)
        return ToolCall(
            _name(item["name"], f"{where}.name"), _input(item.get(key, ABSENT), f"{where}.{key}"), output
        )
    raise TrajectoryFormatError(
        f"{where}: expected a 'tool_name' (Vertex) or 'name' (DeepEval) key, "
        f"got keys {sorted(map(str, item))}"
    )


def _parse_messages(messages: Sequence[object]) -> list[ToolCall]:
    calls: list[ToolCall] = []
    index_by_id: dict[str, int] = {}
    outputs: dict[int, object] = {}
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise TrajectoryFormatError(f"{where}: expected a chat message with a string 'role'")
        if message["role"] == "assistant":
            tool_calls = message.get("tool_calls") or []
            if isinstance(tool_calls, str) or not isinstance(tool_calls, Sequence):
                raise TrajectoryFormatError(f"{where}.tool_calls: expected a list, got {_kind(tool_calls)}")
            for j, tool_call in enumerate(tool_calls):
                call_id, call = _openai_tool_call(tool_call, f"{where}.tool_calls[{j}]")
                if call_id is not None:
                    if call_id in index_by_id:
                        raise TrajectoryFormatError(f"{where}.tool_calls[{j}].id: duplicate id {call_id!r}")
                    index_by_id[call_id] = len(calls)
                calls.append(call)
        elif message["role"] == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or call_id not in index_by_id:
                raise TrajectoryFormatError(
                    f"{where}.tool_call_id: expected the id of an earlier assistant tool call, "
                    f"got {call_id!r}"
                )
            index = index_by_id[call_id]
            if index in outputs:
                raise TrajectoryFormatError(f"{where}: a second result for tool call {call_id!r}")
            outputs[index] = _content(message.get("content", ABSENT), f"{where}.content")
    return [
        ToolCall(call.name, call.input, outputs[index]) if index in outputs else call
        for index, call in enumerate(calls)
    ]


def _openai_tool_call(tool_call: object, where: str) -> tuple[str | None, ToolCall]:
    """The id (None when missing) and the call of one assistant ``tool_calls`` entry."""
    if not isinstance(tool_call, Mapping) or not isinstance(tool_call.get("function"), Mapping):
        raise TrajectoryFormatError(f"{where}: expected an object with a 'function' object")
    call_id = tool_call.get("id")
    if call_id is not None and not isinstance(call_id, str):
        raise TrajectoryFormatError(f"{where}.id: expected a string, got {_kind(call_id)}")
    function = tool_call["function"]
    name = _name(function.get("name"), f"{where}.function.name")
    return call_id, ToolCall(name, _arguments(function, f"{where}.function.arguments"))


def _arguments(function: Mapping[str, Any], where: str) -> dict[str, Any] | Absent | None:
    arguments = function.get("arguments", ABSENT)
    if not isinstance(arguments, str):
        return _input(arguments, where)
    if not arguments.strip():
        return {}
    try:
        parsed = json.loads(arguments)
    except ValueError as exc:
        raise TrajectoryFormatError(f"{where}: not valid JSON ({exc})") from exc
    return _input(parsed, where)


def _content(content: object, where: str) -> object:
    if isinstance(content, list) and all(
        isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)
        for part in content
    ):
        content = "".join(part["text"] for part in content)
    if isinstance(content, str):
        try:
            return _json(json.loads(content), where)
        except ValueError:  # not JSON, or NaN/Infinity: the content stays the string it is
            return content
    return content if content is ABSENT else _json(content, where)


def _name(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise TrajectoryFormatError(f"{where}: expected a non-empty tool name string, got {value!r}")
    return value


def _input(value: object, where: str) -> dict[str, Any] | Absent | None:
    if isinstance(value, Absent) or value is None:
        return value
    if not isinstance(value, Mapping):
        raise TrajectoryFormatError(f"{where}: expected a JSON object or null, got {_kind(value)}")
    return _json_object(value, where)


def _json(value: object, where: str) -> object:
    """A deep copy of a JSON value; anything that is not JSON raises TrajectoryFormatError."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TrajectoryFormatError(f"{where}: expected a finite number, got {value}")
        return value
    if isinstance(value, list):
        return [_json(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, Mapping):
        return _json_object(value, where)
    raise TrajectoryFormatError(f"{where}: expected a JSON value, got {_kind(value)}")


def _json_object(value: Mapping[Any, Any], where: str) -> dict[str, Any]:
    copy: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise TrajectoryFormatError(f"{where}: expected string keys, got {key!r}")
        copy[key] = _json(item, f"{where}.{key}")
    return copy


def _kind(value: object) -> str:
    return type(value).__name__
