"""Durations as people write them (`500ms`, `90s`, `5m`, `1h30m`, `7d`, `2w`): one grammar for
alert rules, drift windows and time buckets.

`parse_duration` reads a config value (text, or a number of seconds from YAML) and raises
ValueError with a phrase that completes "<key>: ..."; `parse_duration_s` reads the text of a
CLI option or query parameter as whole seconds within bounds and raises QueryError naming it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from agenttrail.collector.queries import QueryError

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h|d|w))+")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
FORMS = "a number and a unit (ms, s, m, h, d, w), e.g. 500ms, 30s, 5m, 1h30m, 7d"


def parse_duration(value: Any) -> float:
    """`30s`, `5m`, `1h30m`, `1d`, `500ms`, or a number of seconds -> seconds."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration: write {FORMS}, or a number of seconds")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = str(value).strip().replace(" ", "")
        if not _DURATION.fullmatch(text):
            raise ValueError(f"{value!r} is not a duration: write {FORMS}, or a number of seconds")
        seconds = sum(float(amount) * _UNITS[unit] for amount, unit in _PART.findall(text))
    if seconds < 0:
        raise ValueError(f"{value!r} is negative: a duration must be 0 or more")
    return seconds


def parse_duration_s(text: str, *, what: str, low_s: int = 1, high_s: int = 366 * 86_400) -> int:
    """Whole seconds from the text of an option; out-of-range or malformed values name `what`."""
    try:
        seconds = parse_duration(str(text))
    except ValueError:
        raise QueryError(f"{what} {text!r} is not a duration: write {FORMS}") from None
    if not low_s <= seconds <= high_s:
        raise QueryError(
            f"{what} {text!r} is out of range: between {format_duration(low_s)} and {format_duration(high_s)}"
        )
    if abs(seconds - round(seconds)) > 1e-6:
        raise QueryError(f"{what} {text!r} is not a whole number of seconds")
    return round(seconds)


def format_duration(seconds: float) -> str:
    """The short form people write, exact to the millisecond: 90 -> `1m30s`, 86400 -> `1d`,
    0.5 -> `500ms` (parses back with `parse_duration`)."""
    rest = round(seconds * 1000)
    parts: list[str] = []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        amount, rest = divmod(rest, size)
        if amount:
            parts.append(f"{amount}{unit}")
    return "".join(parts) or "0s"


def iso(seconds: float | None) -> str | None:
    """Unix seconds as ISO 8601 UTC with milliseconds (`2026-11-26T19:00:00.000Z`); None stays None."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
