"""format_duration: the unit that fits, three significant digits, never "0.00 s" for milliseconds."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenttrail.collector.durations import format_duration

SCALE = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0}


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (float("nan"), "-"),
        (0, "0 s"),
        (0.0000123, "12.3 us"),
        (0.000999, "999 us"),
        (0.0009996, "1 ms"),
        (0.0123, "12.3 ms"),
        (0.5, "500 ms"),
        (1.5, "1.5 s"),
        (12.345, "12.3 s"),
        (90, "1.5 min"),
        (7200, "120 min"),
        (-0.012, "-12 ms"),
    ],
)
def test_examples(seconds: float | None, text: str) -> None:
    """Each unit where it fits, rounding that crosses a unit moving to the next one."""
    assert format_duration(seconds) == text


@given(st.floats(min_value=1e-7, max_value=1e6))
def test_reads_back_within_rounding(seconds: float) -> None:
    """The text reads back to the value within 0.5 % (three significant digits), and the number
    shown is below the point where the next unit would take over."""
    match = re.fullmatch(r"([0-9.]+) (us|ms|s|min)", format_duration(seconds))
    assert match is not None
    amount, unit = float(match.group(1)), match.group(2)
    assert amount * SCALE[unit] == pytest.approx(seconds, rel=0.006, abs=0.006e-6)
    assert amount < {"us": 1000, "ms": 1000, "s": 60, "min": float("inf")}[unit]
