"""Hypothesis strategies for tool calls: a small value space so that calls often match."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from agenttrail.evaluators.metrics import ABSENT, Absent, ArgumentMode, ToolCall

NAMES = st.sampled_from(["search", "fetch", "calc"])
SCALARS = st.one_of(st.integers(-1, 2), st.sampled_from([True, False, None, 1.0, 0.5, "a", 2**63, 2**63 + 1]))
VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=2), st.dictionaries(st.sampled_from(["x", "y"]), children, max_size=2)
    ),
    max_leaves=4,
)
INPUTS: st.SearchStrategy[dict[str, Any]] = st.dictionaries(
    st.sampled_from(["x", "y", "z"]), VALUES, max_size=3
)
REFERENCE_INPUTS: st.SearchStrategy[dict[str, Any] | Absent | None] = st.one_of(
    INPUTS, st.none(), st.just(ABSENT)
)
MODES: st.SearchStrategy[ArgumentMode] = st.sampled_from(
    ["exact", "ignore", "subset", "superset", ["x"], ["x.y", "z"]]
)


def calls(inputs: st.SearchStrategy[dict[str, Any] | Absent | None] = INPUTS) -> st.SearchStrategy[ToolCall]:
    """Tool calls with no output (outputs play no part in trajectory matching)."""
    return st.builds(ToolCall, NAMES, inputs)


def trajectories(
    inputs: st.SearchStrategy[dict[str, Any] | Absent | None] = INPUTS, max_size: int = 5
) -> st.SearchStrategy[list[ToolCall]]:
    return st.lists(calls(inputs), max_size=max_size)


@st.composite
def related_pair(
    draw: st.DrawFn, reference_inputs: st.SearchStrategy[dict[str, Any] | Absent | None] = INPUTS
) -> tuple[list[ToolCall], list[ToolCall]]:
    """(predicted, reference) where the prediction reuses, reorders and drops reference calls and
    adds others, so that the interesting partial matches are common."""
    reference = draw(trajectories(reference_inputs))
    kept = [
        ToolCall(call.name, call.input if isinstance(call.input, dict) else draw(INPUTS))
        for call in reference
        if draw(st.booleans())
    ]
    predicted = draw(st.permutations([*kept, *draw(trajectories(max_size=3))]))
    return list(predicted), reference
