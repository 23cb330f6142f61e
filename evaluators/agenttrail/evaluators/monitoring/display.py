"""How drift results read in tables and the report: p-values, effect sizes, metric values.

Shared by `agenttrail drift` and the HTML report so both say the same thing the same way.
Stdlib only: the CLI imports it before it knows whether scipy is needed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from agenttrail.collector.durations import format_duration

P_FLOOR = 1e-4  # below this a p-value reads "< 1e-4": more digits only suggest false precision

EFFECT_NAMES = {
    "cohens_h": "Cohen's h",
    "cliffs_delta": "Cliff's delta",
    "ks_d": "KS D",
    "cramers_v": "Cramér's V",
    "mean_shift_sd": "shift (sd)",
}

# The effect size each test reports (drift.py), for stored events that keep only the test.
TEST_EFFECTS = {
    "two_proportion_z": "cohens_h",
    "bernoulli_cusum": "cohens_h",
    "mann_whitney_u": "cliffs_delta",
    "kolmogorov_smirnov": "ks_d",
    "chi_square": "cramers_v",
    "page_hinkley": "mean_shift_sd",
}

STATUS_MARKS = {"drift": "DRIFT", "no_drift": "ok", "insufficient_data": "too few"}


def format_p(value: float | None) -> str:
    """A p-value: "-" when the test has none, "< 1e-4" when tiny, else two significant digits."""
    if value is None:
        return "-"
    if value < P_FLOOR:
        return "< 1e-4"
    return format(value, ".2g")


def format_effect(effect: str, size: float | None) -> str:
    """An effect size with its name: "Cliff's delta +0.42"."""
    name = EFFECT_NAMES.get(effect, effect)
    return name if size is None else f"{name} {size:+.2f}"


# The change detectors (no p-value): what their threshold is measured in.
CHANGE_THRESHOLD_UNITS = {"page_hinkley": "sd", "bernoulli_cusum": "log LR"}


def format_evidence(row: Mapping[str, Any]) -> str:
    """What a test's call rests on: its p-value and the adjusted one ("p 0.0031, adj 0.012"), or
    for a change detector, which has none, where it alarmed and past which threshold
    ("alarm at run 38 of 150, up; threshold 12 sd"). "-" when the test could not run."""
    found = _detail(row.get("detail"))
    stored = found.pop("stored", {})  # a drift_events row: the result's own detail is its note
    unit = CHANGE_THRESHOLD_UNITS.get(row["test"])
    if unit is None:
        if row["p_value"] is None:
            return "-"
        adjusted = row["p_adjusted"] if "p_adjusted" in row else stored.get("p_adjusted")
        return f"p {format_p(row['p_value'])}, adj {format_p(adjusted)}"
    if row.get("status", stored.get("status")) == "insufficient_data":
        return "-"
    return format_alarm(row["test"], found, row["recent_n"])


def format_alarm(test: str, found: Mapping[str, Any], recent_n: int | None = None) -> str:
    """A change detector's finding (its result's detail): "alarm at run 38 of 150, up; threshold
    12 sd", or "no alarm (threshold 12 sd)"."""
    unit = CHANGE_THRESHOLD_UNITS.get(test, "")
    threshold = found.get("threshold")
    past = f"threshold {threshold:g} {unit}".rstrip() if isinstance(threshold, int | float) else ""
    at = found.get("change_at_run")
    if not isinstance(at, int):
        return f"no alarm ({past})" if past else "no alarm"
    alarm = f"alarm at run {at + 1}" + (f" of {recent_n}" if recent_n else "")
    alarm += f", {found.get('direction', '?')}"
    return f"{alarm}; {past}" if past else alarm


def json_object(text: object) -> dict[str, Any] | None:
    """A JSON detail column (a drift event's detail, its note) as the object it holds; None when
    the text is empty, not JSON or not an object, so each caller shows its own fallback (nothing,
    or the text as it is)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _detail(text: object) -> dict[str, Any]:
    """A result's detail as a mapping; a stored drift event's (drift_events.event_detail: the
    status and adjusted p, the result's own detail as its note) is its note's, with the rest
    under ``stored``."""
    found = json_object(text)
    if found is None:
        return {}
    if "note" in found and "status" in found:
        return {**_detail(found["note"]), "stored": found}
    return found


def format_value(metric: str, value: float | None) -> str:
    """A window's value of a metric: latency as a duration, failure rate in percent."""
    if value is None:
        return "-"
    if metric == "latency":
        return format_duration(value)
    if metric == "failure_rate":
        return f"{value:.1%}"
    return f"{value:.3g}"


def drift_summary(rows: Sequence[dict[str, Any]], asked: Mapping[str, str | None] | None = None) -> str:
    """One line over every test: how many found drift, in which agents, how many did not. With
    no test, which options (`asked`: option name -> value) may have left nothing to compare; when
    every test had no baseline run, says so (a --baseline-version no run carries, say)."""
    if not rows:
        given = " ".join(f"--{name} {value}" for name, value in (asked or {}).items() if value)
        return "no runs in either window" + (f" match {given}" if given else "")
    counts = {status: sum(1 for row in rows if row["status"] == status) for status in STATUS_MARKS}
    drifted = sorted({row["agent"] for row in rows if row["status"] == "drift"})
    agents = len({row["agent"] for row in rows})
    head = (
        f"DRIFT in {counts['drift']} of {len(rows)} tests ({', '.join(drifted)})"
        if drifted
        else f"no drift in {len(rows)} tests"
    )
    empty_baseline = (
        f"; the baseline ({rows[0]['baseline']}) has no runs"
        if all(not row["baseline_n"] for row in rows)
        else ""
    )
    return (
        f"{head} over {agents} agent(s): {counts['no_drift']} ok, "
        f"{counts['insufficient_data']} with too few samples{empty_baseline}"
    )
