"""Hypothesis strategy: tool calls as build_runs makes them (tests/collector/test_runs.py and the
online/offline agreement test in tests/evaluators/scoring/test_predicted_calls.py)."""

from __future__ import annotations

from hypothesis import strategies as st

from agenttrail.collector.runs import NOT_CAPTURED, ToolCall

JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=3)),
    lambda children: st.one_of(
        st.lists(children, max_size=2), st.dictionaries(st.text(max_size=2), children, max_size=2)
    ),
    max_leaves=4,
)


@st.composite
def traced_calls(draw: st.DrawFn) -> ToolCall:
    """Calls as build_runs makes them: arguments a JSON value or NOT_CAPTURED, a failed call's
    output None."""
    status = draw(st.sampled_from(["ok", "error"]))
    return ToolCall(
        draw(st.sampled_from(["search", "fetch"])),
        draw(st.one_of(st.just(NOT_CAPTURED), st.dictionaries(st.text(max_size=2), JSON, max_size=2), JSON)),
        None if status == "error" else draw(st.one_of(st.just(NOT_CAPTURED), JSON)),
        status=status,
        error_type="Timeout" if status == "error" else "",
        latency_ms=draw(st.floats(0, 1e4)),
        span_id=draw(st.text("0123456789abcdef", min_size=16, max_size=16)),
        agent=draw(st.sampled_from(["bot", "sub"])),
        call_id=draw(st.sampled_from(["", "call_1"])),
    )
