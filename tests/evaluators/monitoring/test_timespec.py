"""Durations: one grammar for alert rules (config values) and CLI options (whole seconds)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenttrail.collector.queries import QueryError
from agenttrail.evaluators.monitoring.timespec import format_duration, parse_duration, parse_duration_s


@given(st.integers(0, 10 * 86400))
def test_durations_round_trip(seconds: int) -> None:
    """The short form of any whole number of seconds parses back to it."""
    assert parse_duration(format_duration(seconds)) == seconds


@given(st.integers(0, 10 * 86400 * 1000))
def test_millisecond_durations_round_trip(ms: int) -> None:
    """The short form is exact to the millisecond: 1.5s is `1s500ms`, not `2s`."""
    assert round(parse_duration(format_duration(ms / 1000)) * 1000) == ms


def test_duration_forms() -> None:
    """Units, compounds, bare numbers; junk is refused."""
    assert [parse_duration(v) for v in ("500ms", "30s", "1h30m", "1d", "2w", "5 m", 45, 1.5)] == [
        0.5,
        30,
        5400,
        86400,
        1209600,
        300,
        45,
        1.5,
    ]
    for bad in ("", "5", "m5", "5 min", True, "-5s"):
        with pytest.raises(ValueError, match="not a duration"):
            parse_duration(bad)


def test_short_forms() -> None:
    """Durations print as people write them, compound where needed."""
    assert [format_duration(s) for s in (0, 0.5, 90, 3600, 5400, 86400, 1.5)] == [
        "0s",
        "500ms",
        "1m30s",
        "1h",
        "1h30m",
        "1d",
        "1s500ms",
    ]


def test_option_durations_are_whole_seconds_in_range() -> None:
    """CLI options take the same grammar as whole seconds; errors name the option and the bounds."""
    assert parse_duration_s("1h30m", what="--bucket") == 5400
    assert parse_duration_s("2000ms", what="--bucket") == 2
    with pytest.raises(QueryError, match=r"--bucket '1500ms' is not a whole number of seconds"):
        parse_duration_s("1500ms", what="--bucket")
    with pytest.raises(QueryError, match=r"--bucket '2d' is out of range: between 1s and 1d"):
        parse_duration_s("2d", what="--bucket", high_s=86_400)
    with pytest.raises(QueryError, match=r"--bucket '45' is not a duration: write a number and a unit"):
        parse_duration_s("45", what="--bucket")
