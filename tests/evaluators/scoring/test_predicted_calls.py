"""The online scorer and offline evaluation read a traced call the same way: the online one from
its stored form (`predicted_calls`), offline from build_runs' call (`ToolCall.as_predicted`)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from traced_calls import traced_calls

from agenttrail.collector.runs import ABSENT, ToolCall
from agenttrail.evaluators.scoring.worker import predicted_calls


@given(traced_calls())
def test_online_and_offline_compare_the_same_call(call: ToolCall) -> None:
    """Equal, but for one kept difference: online, a stored null output (a tool that returned
    None) counts as absent, where offline keeps the traced null."""
    offline = call.as_predicted()
    if offline.output is None:
        offline = replace(offline, output=ABSENT)
    assert predicted_calls([call.to_json()]) == [offline]
