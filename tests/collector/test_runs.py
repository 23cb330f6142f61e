"""The one run model: a traced call's stored form reads back as the same call, and `as_predicted`
is what the metrics compare of it (spec/metrics.md: not captured is not `{}`, a failed call has no
output)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from traced_calls import traced_calls

from agenttrail.collector import conventions, trajectory
from agenttrail.collector.runs import ABSENT, NOT_CAPTURED, ToolCall


@given(traced_calls())
def test_the_stored_form_reads_back_as_the_call(call: ToolCall) -> None:
    """to_json then from_json keeps every stored field and the not-captured marks (times are not
    stored)."""
    assert ToolCall.from_json(call.to_json()) == call


def test_the_stored_form_keeps_not_captured_apart_from_empty_arguments() -> None:
    blind = ToolCall("search", NOT_CAPTURED, NOT_CAPTURED, span_id="s1").to_json()
    empty = ToolCall("search", {}, None, span_id="s2").to_json()
    assert (blind["input"], blind["input_captured"], blind["output_captured"]) == (None, False, False)
    assert (empty["input"], empty["input_captured"], empty["output_captured"]) == ({}, True, True)
    assert ToolCall.from_json(blind).input is NOT_CAPTURED
    assert ToolCall.from_json(empty).input == {}


def test_a_stored_call_without_the_capture_flags_reads_its_fields_or_absent() -> None:
    assert ToolCall.from_json({"name": "search", "input": {"q": 1}}) == ToolCall("search", {"q": 1})
    assert ToolCall.from_json({"name": "search"}) == ToolCall("search", ABSENT, ABSENT)


def test_as_predicted_is_what_the_metrics_compare() -> None:
    """Arguments: a JSON object stays, NOT_CAPTURED stays, anything else (a string cut by the size
    limit, null) is absent. Output: kept, unless the call failed or its result was not recorded or
    is null (the stored form cannot tell a tool that returned None from a call without an output)."""
    traced: list[tuple[Any, Any, str]] = [
        ({"q": "x"}, ["hit"], "ok"),
        (NOT_CAPTURED, ["hit"], "ok"),
        ('{"q": "x', None, "ok"),
        (None, NOT_CAPTURED, "ok"),
        ({"q": "x"}, None, "error"),
    ]
    calls = [ToolCall("search", i, o, status=s, span_id="s", latency_ms=3.0) for i, o, s in traced]
    assert [call.as_predicted() for call in calls] == [
        ToolCall("search", {"q": "x"}, ["hit"]),
        ToolCall("search", NOT_CAPTURED, ["hit"]),
        ToolCall("search", ABSENT, ABSENT),
        ToolCall("search", ABSENT, ABSENT),
        ToolCall("search", {"q": "x"}, ABSENT),
    ]


def test_one_not_captured_mark_for_conventions_assembly_and_metrics() -> None:
    """The mark build_runs puts on a call is the one the metrics test for, not a look-alike."""
    from agenttrail.evaluators import metrics

    assert conventions.NOT_CAPTURED is trajectory.NOT_CAPTURED is metrics.NOT_CAPTURED is NOT_CAPTURED
    assert trajectory.ToolCall is metrics.ToolCall is ToolCall


def test_repr_shows_only_the_trace_fields_that_are_set() -> None:
    assert repr(ToolCall("a", {"x": 1})) == "ToolCall(name='a', input={'x': 1}, output=ABSENT)"
    assert repr(ToolCall("a", NOT_CAPTURED, None, status="error", span_id="s1")) == (
        "ToolCall(name='a', input=NOT_CAPTURED, output=None, status='error', span_id='s1')"
    )
