"""Parsing every accepted trajectory format into ToolCall, and the errors for everything else."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agenttrail.evaluators.metrics import ABSENT, ToolCall, TrajectoryFormatError, parse_trajectory


def _assistant(*calls: tuple[str, str, object]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            for call_id, name, arguments in calls
        ],
    }


def _tool(call_id: str, content: object) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


class TestVertex:
    def test_name_and_input(self) -> None:
        """Vertex rows give name and input; there is no output."""
        assert parse_trajectory([{"tool_name": "search", "tool_input": {"q": "x"}}]) == [
            ToolCall("search", {"q": "x"}, ABSENT)
        ]

    def test_absent_and_null_input_are_kept_apart(self) -> None:
        """A missing tool_input is ABSENT, a null one is None."""
        assert parse_trajectory([{"tool_name": "a"}, {"tool_name": "a", "tool_input": None}]) == [
            ToolCall("a", ABSENT),
            ToolCall("a", None),
        ]

    def test_extra_keys_are_ignored(self) -> None:
        """Dataset rows may carry extra fields."""
        assert parse_trajectory([{"tool_name": "a", "tool_input": {}, "span_id": "s1"}]) == [
            ToolCall("a", {})
        ]


class TestDeepEval:
    @pytest.mark.parametrize("key", ["args", "input_parameters"])
    def test_args_or_input_parameters(self, key: str) -> None:
        """Both spellings of the input are read."""
        assert parse_trajectory([{"name": "a", key: {"x": 1}, "output": [1]}]) == [
            ToolCall("a", {"x": 1}, [1])
        ]

    def test_null_output_is_an_output(self) -> None:
        """A null output is data (None); a missing one is ABSENT."""
        assert parse_trajectory([{"name": "a", "output": None}, {"name": "a"}]) == [
            ToolCall("a", ABSENT, None),
            ToolCall("a", ABSENT, ABSENT),
        ]

    def test_both_input_spellings_are_ambiguous(self) -> None:
        """A row with both args and input_parameters is rejected."""
        with pytest.raises(
            TrajectoryFormatError, match=r"trajectory\[0\]: has both 'args' and 'input_parameters'"
        ):
            parse_trajectory([{"name": "a", "args": {}, "input_parameters": {}}])

    def test_vertex_and_deepeval_names_are_ambiguous(self) -> None:
        """A row with both tool_name and name is rejected."""
        with pytest.raises(TrajectoryFormatError, match="both 'tool_name'"):
            parse_trajectory([{"tool_name": "a", "name": "b"}])


class TestOpenAIMessages:
    def test_calls_in_order_with_outputs_by_id(self) -> None:
        """Calls come from assistant messages in order; tool results attach by id, not position."""
        messages = [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"},
            _assistant(("c1", "search", '{"q": "x"}'), ("c2", "fetch", {"url": "u"})),
            _tool("c2", "page"),
            _tool("c1", '["r1", "r2"]'),
            _assistant(("c3", "search", '{"q": "y"}')),
            {"role": "assistant", "content": "done"},
        ]
        assert parse_trajectory(messages) == [
            ToolCall("search", {"q": "x"}, ["r1", "r2"]),
            ToolCall("fetch", {"url": "u"}, "page"),
            ToolCall("search", {"q": "y"}, ABSENT),
        ]

    @pytest.mark.parametrize(
        ("content", "output"),
        [
            ("2", 2),
            ('{"a": 18446744073709551617}', {"a": 2**64 + 1}),
            ("hello", "hello"),
            ('"quoted"', "quoted"),
            ("NaN", "NaN"),
            (None, None),
            ({"a": 1}, {"a": 1}),
            ([{"type": "text", "text": '{"a"'}, {"type": "text", "text": ": 1}"}], {"a": 1}),
            ([{"type": "input_text", "text": "7"}], [{"type": "input_text", "text": "7"}]),
            (
                [{"type": "image_url", "image_url": {"url": "u"}}],
                [{"type": "image_url", "image_url": {"url": "u"}}],
            ),
        ],
    )
    def test_tool_content(self, content: object, output: object) -> None:
        """Content holding JSON is parsed (big ints exactly), other strings stay strings, text parts
        join; a list with any part that is not a text part stays the list it is."""
        assert parse_trajectory([_assistant(("c1", "a", "{}")), _tool("c1", content)])[0].output == output

    @pytest.mark.parametrize(
        ("arguments", "expected"),
        [("", {}), ("  ", {}), ("null", None), (None, None), ({"x": [1]}, {"x": [1]})],
    )
    def test_arguments(self, arguments: object, expected: object) -> None:
        """Arguments may be a JSON string or an object; an empty string means no arguments."""
        assert parse_trajectory([_assistant(("c1", "a", arguments))])[0].input == expected

    def test_a_tool_message_without_content_is_absent(self) -> None:
        """A tool result message with no content key leaves the output ABSENT, not null."""
        calls = parse_trajectory([_assistant(("c1", "a", "{}")), {"role": "tool", "tool_call_id": "c1"}])
        assert calls[0].output is ABSENT

    def test_missing_arguments_are_absent(self) -> None:
        """A function without arguments has an ABSENT input (a wildcard in a reference)."""
        message = {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "a"}}]}
        assert parse_trajectory([message]) == [ToolCall("a", ABSENT)]

    @pytest.mark.parametrize(
        ("messages", "message"),
        [
            ([_tool("c1", "x")], r"messages\[0\].tool_call_id: expected the id of an earlier"),
            ([_assistant(("c1", "a", "{}")), _tool("c2", "x")], r"messages\[1\].tool_call_id"),
            ([_tool("c1", "x"), _assistant(("c1", "a", "{}"))], r"messages\[0\].tool_call_id"),
            ([_assistant(("c1", "a", "{}")), _tool("c1", "x"), _tool("c1", "y")], "a second result"),
            ([_assistant(("c1", "a", "{}"), ("c1", "b", "{}"))], r"tool_calls\[1\].id: duplicate id 'c1'"),
            ([_assistant(("c1", "a", "{nope"))], r"tool_calls\[0\].function.arguments: not valid JSON"),
            ([_assistant(("c1", "a", "[1]"))], "arguments: expected a JSON object or null, got list"),
            ([_assistant(("c1", "", "{}"))], r"function.name: expected a non-empty tool name"),
            ([{"role": "assistant", "tool_calls": [{"id": "c1"}]}], "expected an object with a 'function'"),
            ([{"role": "assistant", "tool_calls": "x"}], r"messages\[0\].tool_calls: expected a list"),
            ([{"role": "user"}, {"tool_name": "a"}], r"messages\[1\]: expected a chat message"),
            (
                [{"role": "assistant", "tool_calls": [{"id": 7, "function": {"name": "a"}}]}],
                r"^messages\[0\].tool_calls\[0\].id: expected a string, got int$",
            ),
            (
                [_assistant(("c1", "a", 5))],
                r"^messages\[0\].tool_calls\[0\].function.arguments: expected a JSON object or null, got int",
            ),
            (
                [_assistant(("c1", "a", "{}")), _tool("c1", {"x": float("nan")})],
                r"^messages\[1\].content.x: expected a finite number, got nan$",
            ),
        ],
    )
    def test_errors_name_the_position(self, messages: list[Any], message: str) -> None:
        """Malformed message lists raise TrajectoryFormatError naming the message and field."""
        with pytest.raises(TrajectoryFormatError, match=message):
            parse_trajectory(messages)


class TestOtherInputs:
    def test_json_string(self) -> None:
        """A JSON string of any format is read, keeping big integers exact."""
        text = json.dumps([{"name": "a", "args": {"n": 2**63 + 1}}])
        assert parse_trajectory(text) == [ToolCall("a", {"n": 2**63 + 1})]

    def test_tool_calls_pass_through(self) -> None:
        """ToolCall objects are accepted as they are, also beside dict rows."""
        call = ToolCall("a", {"x": 1})
        assert parse_trajectory([call, {"tool_name": "b"}]) == [call, ToolCall("b")]

    def test_input_is_copied(self) -> None:
        """Changing the caller's dict afterwards does not change the parsed call."""
        args = {"x": {"y": 1}}
        [call] = parse_trajectory([{"name": "a", "args": args}])
        args["x"]["y"] = 2
        assert call.input == {"x": {"y": 1}}

    def test_empty(self) -> None:
        """An empty list is an empty trajectory."""
        assert parse_trajectory([]) == []

    @pytest.mark.parametrize(
        ("value", "message"),
        [
            ({"tool_name": "a"}, "trajectory: expected a list of tool calls or chat messages, got dict"),
            ("[", r"trajectory: not valid JSON"),
            ('"calls"', "got str"),
            (None, "got NoneType"),
            ([{"tool_name": "a"}, 3], r"trajectory\[1\]: expected a tool call object, got int"),
            (
                [{"tool": "a"}],
                r"trajectory\[0\]: expected a 'tool_name' \(Vertex\) or 'name' \(DeepEval\) key",
            ),
            ([{"tool_name": 3}], r"trajectory\[0\].tool_name: expected a non-empty tool name string"),
            (
                [{"tool_name": "a", "tool_input": [1]}],
                r"tool_input: expected a JSON object or null, got list",
            ),
            (
                [{"name": "a", "args": {"x": float("nan")}}],
                r"trajectory\[0\].args.x: expected a finite number",
            ),
            ([{"name": "a", "args": {1: "x"}}], "expected string keys, got 1"),
            (
                [{"name": "a", "output": {"s": {1, 2}}}],
                r"trajectory\[0\].output.s: expected a JSON value, got set",
            ),
            ([{"name": "a", "output": [0, (1,)]}], r"output\[1\]: expected a JSON value, got tuple"),
        ],
    )
    def test_errors_name_the_position(self, value: object, message: str) -> None:
        """Bad input raises TrajectoryFormatError naming the position, the field and what was expected."""
        with pytest.raises(TrajectoryFormatError, match=message):
            parse_trajectory(value)

    def test_format_error_is_a_value_error(self) -> None:
        """Callers that catch ValueError also catch format errors."""
        assert issubclass(TrajectoryFormatError, ValueError)
