"""Data sections cannot be escaped from inside, and runs read from trajectory rows."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agenttrail.evaluators.judges import JudgeInput
from agenttrail.evaluators.judges.render import DATA_CLOSE, data_section, neutralise

PIECES = st.sampled_from(["<", ">", "<<<", ">>>", "END DATA", "DATA name=x", " ", "a", "\n"])
ANGLES = st.lists(PIECES).map("".join)


@given(name=st.text(min_size=1, max_size=10), text=ANGLES)
def test_a_section_has_exactly_one_opening_and_one_closing(name: str, text: str) -> None:
    """Whatever the data holds, its section opens once at the start and closes once at the end."""
    section = data_section(name, text)
    assert section.count("<<<") == 2
    assert section.count(">>>") == 2
    assert section.startswith("<<<DATA name=")
    assert section.endswith(f"\n{DATA_CLOSE}")


@given(text=st.text())
def test_neutralise_keeps_text_without_delimiters(text: str) -> None:
    """Text with no run of three angle brackets is passed through unchanged."""
    if "<<<" not in text and ">>>" not in text:
        assert neutralise(text) == text
    assert "<<<" not in neutralise(text)
    assert ">>>" not in neutralise(text)


def test_non_text_values_are_json() -> None:
    """Objects are shown as indented JSON; absent values say so."""
    assert (
        data_section("x", {"a": [1, 2]})
        == '<<<DATA name=x>>>\n{\n  "a": [\n    1,\n    2\n  ]\n}\n<<<END DATA>>>'
    )
    assert "(not given)" in data_section("x", None)


def test_from_trajectory_reads_the_json_row_shape() -> None:
    """A `trajectories --format json` row (plus extras) becomes a JudgeInput; other keys are ignored."""
    row = {
        "trace_id": "t1",
        "agent": "a",
        "task": "k",
        "conversation_id": "c",
        "start": "2025-01-01T00:00:00Z",
        "latency_s": 1.0,
        "failure": 1,
        "error_type": "E",
        "input": {"q": "x"},
        "output": "y",
        "tool_calls": [{"name": "s", "input": {}, "output": 1, "status": "ok"}],
        "root_span_id": "r",
        "input_tokens": 1,
        "output_tokens": 2,
        "revision": 3,
    }
    run = JudgeInput.from_trajectory(row, expected_response="z", runs=[row])
    assert (run.trace_id, run.agent, run.task, run.conversation_id, run.failure) == (
        "t1",
        "a",
        "k",
        "c",
        True,
    )
    assert (run.input, run.output, run.expected_response) == ({"q": "x"}, "y", "z")
    assert run.tool_calls[0]["name"] == "s"
    assert run.reference_trajectory is None
    assert run.runs[0].trace_id == "t1"
