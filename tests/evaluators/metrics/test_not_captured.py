"""Arguments the trace did not capture (NOT_CAPTURED) are not `{}`: they match only in mode
`ignore` or against a wildcard; otherwise the metric is missing with a reason, never 0."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenttrail.collector.runs import predicted_calls
from agenttrail.evaluators.metrics import (
    METRICS,
    NOT_CAPTURED,
    NotComputable,
    ToolCall,
    TrajectoryFormatError,
    call_matcher,
    compute_metrics,
    parse_trajectory,
    tool_correctness,
)

from .strategies import INPUTS, MODES, REFERENCE_INPUTS, trajectories

BLIND = ToolCall("search", NOT_CAPTURED)
PAIRWISE = [name for name, spec in METRICS.items() if spec.needs_reference and name != "tool_correctness"]


@pytest.mark.parametrize("mode", ["exact", "subset", "superset", ["q"]])
def test_comparing_a_not_captured_input_is_not_computable(mode: Any) -> None:
    """In every mode but ignore, a not-captured input against a reference input raises NotComputable
    that names the call and says what to do."""
    with pytest.raises(NotComputable) as raised:
        call_matcher(mode)(BLIND, ToolCall("search", {"q": "x"}))
    assert str(raised.value) == (
        "the arguments of predicted call 'search' were not captured; they can only be matched with "
        "arguments=ignore or a reference call without input (turn on argument capture to compare them)"
    )


def test_not_captured_matches_in_ignore_mode_and_against_wildcards_only() -> None:
    """Ignore mode (default or per tool) and a reference without input match; another name does not;
    `{}` is a different thing: it is compared and fails."""
    assert call_matcher("ignore")(BLIND, ToolCall("search", {"q": "x"}))
    assert call_matcher("exact", {"search": "ignore"})(BLIND, ToolCall("search", {"q": "x"}))
    assert call_matcher("exact")(BLIND, ToolCall("search", None))
    assert not call_matcher("exact")(BLIND, ToolCall("fetch", {"q": "x"}))
    assert not call_matcher("exact")(ToolCall("search", {}), ToolCall("search", {"q": "x"}))
    with pytest.raises(NotComputable):  # an override that compares wins over an ignoring default
        call_matcher("ignore", {"search": "exact"})(BLIND, ToolCall("search", {"q": "x"}))


def test_metrics_are_missing_with_a_reason_not_zero() -> None:
    """compute_metrics reports None and why for metrics that must compare the input; name-only and
    ignore-mode metrics are still computed."""
    reasons: dict[str, str] = {}
    reference = [ToolCall("search", {"q": "x"})]
    results = compute_metrics(
        [BLIND],
        reference,
        [*PAIRWISE, "tool_correctness", "trajectory_single_tool_use:tool_name=search"],
        reasons=reasons,
    )
    for name in [*PAIRWISE, "tool_correctness", "tool_correctness_success"]:
        assert results[name] is None, name
        assert "were not captured" in reasons[name]
    assert results["trajectory_single_tool_use"] == 1.0
    assert "trajectory_single_tool_use" not in reasons
    ignoring = compute_metrics([BLIND], reference, ["trajectory_exact_match:arguments=ignore"])
    assert ignoring["trajectory_exact_match"] == 1.0
    by_output = tool_correctness(reference, [BLIND], evaluation_params=["output"])
    assert by_output.score == 1.0


def test_stored_and_dataset_forms_say_not_captured() -> None:
    """`input_captured: false` (or `output_captured: false`) in a stored trajectory or a
    DeepEval-style row reads as NOT_CAPTURED."""
    stored = [{"name": "search", "input": None, "input_captured": False, "output": None, "status": "ok"}]
    assert predicted_calls(stored) == [BLIND]
    assert predicted_calls([{"name": "search", "input": {}, "status": "ok"}])[0].input == {}
    assert parse_trajectory([{"name": "search", "args": {}, "input_captured": False}]) == [BLIND]
    [kept] = parse_trajectory([{"name": "search", "input_captured": False, "output": {"hits": 2}}])
    assert (kept.input, kept.output) == (NOT_CAPTURED, {"hits": 2})  # the output is still compared
    [blind] = parse_trajectory(
        [{"name": "search", "args": {"q": 1}, "output": None, "output_captured": False}]
    )
    assert (blind.input, blind.output) == ({"q": 1}, NOT_CAPTURED)  # not the null result it stands for
    with pytest.raises(TrajectoryFormatError, match=r"^trajectory\[0\].name: expected a non-empty tool name"):
        parse_trajectory([{"name": "", "input_captured": False}])


@given(
    trajectories(st.one_of(INPUTS, st.just(NOT_CAPTURED))),
    trajectories(REFERENCE_INPUTS),
    MODES,
    st.sampled_from(PAIRWISE),
    INPUTS,
)
def test_a_computed_value_never_depends_on_what_was_not_captured(
    predicted: list[ToolCall], reference: list[ToolCall], mode: Any, metric: str, guess: dict[str, Any]
) -> None:
    """Whenever a metric is computed despite not-captured inputs, it has the value it would have for
    any arguments in their place (they took no part); otherwise it is None."""
    spec = f"{metric}:arguments={'keys:' + '|'.join(mode) if isinstance(mode, list) else mode}"
    value = compute_metrics(predicted, reference, [spec])[metric]
    filled = [ToolCall(c.name, guess if c.input is NOT_CAPTURED else c.input) for c in predicted]
    if value is not None:
        assert value == compute_metrics(filled, reference, [spec])[metric]
    else:
        assert any(c.input is NOT_CAPTURED for c in predicted)
