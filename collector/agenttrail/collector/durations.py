"""Durations for people: one formatter every table, report and message uses.

A value is shown in the unit that fits it (us, ms, s, min) with three significant digits, so a
12 ms tool call reads "12 ms", not "0.01 s". Machine-readable output (JSON) keeps plain numbers
in a unit its field name states (`latency_s`, `latency_ms`).
"""

from __future__ import annotations

import math

# (unit, seconds per unit, amount from which the next unit takes over), smallest first.
_UNITS = (("us", 1e-6, 1000.0), ("ms", 1e-3, 1000.0), ("s", 1.0, 60.0), ("min", 60.0, math.inf))


def format_duration(seconds: float | None) -> str:
    """`seconds` as text with a fitting unit: 0.0000123 -> "12.3 us", 0.0123 -> "12.3 ms",
    1.5 -> "1.5 s", 90 -> "1.5 min"; None or not finite (not known) -> "-"."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    if seconds == 0:
        return "0 s"
    sign = "-" if seconds < 0 else ""
    for unit, scale, next_at in _UNITS:
        text = _significant(abs(seconds) / scale)
        if float(text) < next_at:  # after rounding: 999.96 ms is "1 s", not "1000 ms"
            return f"{sign}{text} {unit}"
    raise AssertionError("unreachable: minutes have no upper bound")


def _significant(amount: float) -> str:
    """Three significant digits, never in exponent form: 12.34 -> "12.3", 1234 -> "1234"."""
    if amount >= 99.95:
        return f"{amount:.0f}"
    if amount >= 9.995:
        return f"{amount:.1f}".rstrip("0").rstrip(".")
    return f"{amount:.2f}".rstrip("0").rstrip(".")
