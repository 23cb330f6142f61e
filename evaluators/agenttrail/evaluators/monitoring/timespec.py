"""Durations as people write them (`90s`, `5m`, `1h`, `7d`), for windows and time buckets."""

from __future__ import annotations

import re

from agenttrail.collector.queries import QueryError

_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_duration_s(text: str, *, what: str, low_s: int = 1, high_s: int = 366 * 86_400) -> int:
    """Whole seconds from `<n><unit>`; out-of-range or malformed values name `what` and the form."""
    match = _DURATION.match(str(text))
    if not match:
        raise QueryError(
            f"{what} {text!r} is not a duration: write a whole number and a unit, e.g. 5m, 1h, 7d"
        )
    seconds = int(match.group(1)) * _UNIT_S[match.group(2)]
    if not low_s <= seconds <= high_s:
        raise QueryError(
            f"{what} {text!r} is out of range: between {format_duration(low_s)} and {format_duration(high_s)}"
        )
    return seconds


def format_duration(seconds: int) -> str:
    """The shortest exact `<n><unit>` form (inverse of `parse_duration_s`)."""
    for unit in ("w", "d", "h", "m"):
        if seconds % _UNIT_S[unit] == 0:
            return f"{seconds // _UNIT_S[unit]}{unit}"
    return f"{seconds}s"
