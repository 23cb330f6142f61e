"""Value parsers shared by the alert config and the rule kinds: windows, rates, counts.

Each parser takes the raw YAML value and returns the typed value or raises ValueError with a
phrase that completes "<key>: ..." (the config loader adds the file, rule and key). Durations
are `monitoring.timespec`'s, the grammar of every duration in agenttrail.
"""

from __future__ import annotations

import re
from typing import Any

from agenttrail.evaluators.monitoring.timespec import parse_duration


def parse_window(value: Any) -> float:
    """A duration that must be positive (a window of 0s has no data)."""
    seconds = parse_duration(value)
    if seconds <= 0:
        raise ValueError(f"{value!r} must be longer than 0s")
    return seconds


def parse_rate(value: Any) -> float:
    """A proportion between 0 and 1 (0.05 = 5%)."""
    number = _number(value)
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{value!r} must be a proportion between 0 and 1 (0.05 is 5%)")
    return number


def parse_positive(value: Any) -> float:
    number = _number(value)
    if number <= 0:
        raise ValueError(f"{value!r} must be greater than 0")
    return number


def parse_number(value: Any) -> float:
    return _number(value)


def parse_count(value: Any) -> int:
    """A whole number of at least 1 (minimum sample sizes)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{value!r} must be a whole number of at least 1")
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{value!r} must be a whole number of at least 1") from None
    if number < 1:
        raise ValueError(f"{value!r} must be a whole number of at least 1")
    return number


def parse_text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{value!r} must be a non-empty string")
    return value.strip()


def parse_bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{value!r} must be true or false")
    return value


def parse_percentile(value: Any) -> float:
    """`p50`, `p95`, `p99`, `p99.9` -> the quantile in (0, 1)."""
    match = re.fullmatch(r"p(\d{1,2}(?:\.\d+)?)", str(value).strip())
    if not match or not 0 < float(match.group(1)) < 100:
        raise ValueError(f"{value!r} is not a percentile: write p50, p90, p95, p99 or p99.9")
    return float(match.group(1)) / 100


def _number(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{value!r} must be a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{value!r} must be a number") from None
