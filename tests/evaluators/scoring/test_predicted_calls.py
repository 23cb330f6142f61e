"""Every path reads a traced call the same way: the online scorer from its stored form
(`predicted_calls`), runnable offline evaluation from build_runs' call (`ToolCall.as_predicted`),
and a dataset file of runs as `agenttrail trajectories --format json` prints them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from traced_calls import traced_calls

from agenttrail.collector.runs import ToolCall, predicted_calls
from agenttrail.evaluators.offline.datasets import DatasetRow, parse_row


@given(st.lists(traced_calls(), max_size=4))
def test_online_offline_and_dataset_compare_the_same_calls(calls: list[ToolCall]) -> None:
    """Equal with nothing kept apart: arguments not captured stay NOT_CAPTURED on every path, and
    a failed call, a result not captured and a null result are no output on every path."""
    stored = [call.to_json() for call in calls]
    online = predicted_calls(stored)
    assert online == [call.as_predicted() for call in calls]
    row = parse_row(0, {"trace_id": "t", "tool_calls": stored})
    assert isinstance(row, DatasetRow), row
    assert row.predicted == online


def test_a_null_result_is_no_output() -> None:
    """A tool that returned None is read as a call without an output (the stored form cannot tell
    them apart), so tool correctness never compares a null against an expected output."""
    call = ToolCall("search", {"q": "x"}, None)
    assert predicted_calls([call.to_json()]) == [call.as_predicted()] == [ToolCall("search", {"q": "x"})]
