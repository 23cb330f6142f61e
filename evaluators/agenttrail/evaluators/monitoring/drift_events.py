"""The `drift_events` table: each drift check's results, which alert rules and the report read.

This module owns the table: its DDL and row type are the ones the alerts migration, the
report and the tests use. The column set is a contract with the alerts module: change it only
together.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from agenttrail.collector.schema import Migration
from agenttrail.evaluators.monitoring.display import CHANGE_THRESHOLD_UNITS, format_alarm, json_object

if TYPE_CHECKING:
    from agenttrail.collector.store import Store
    from agenttrail.evaluators.monitoring.drift import DriftResult

DRIFT_EVENTS = """
CREATE TABLE IF NOT EXISTS drift_events (
    DetectedAt DateTime64(3),
    Agent LowCardinality(String),
    Task String,
    Metric LowCardinality(String),
    Test LowCardinality(String),
    Drifted UInt8,
    PValue Nullable(Float64),
    EffectSize Nullable(Float64),
    BaselineN UInt32,
    RecentN UInt32,
    BaselineValue Nullable(Float64),
    RecentValue Nullable(Float64),
    WindowStart DateTime64(3),
    WindowEnd DateTime64(3),
    Detail String
) ENGINE = MergeTree
ORDER BY (Agent, Metric, DetectedAt)
TTL toDateTime(DetectedAt) + INTERVAL 90 DAY
"""

MONITORING_MIGRATIONS: tuple[Migration, ...] = (Migration(120, "drift events", (DRIFT_EVENTS,)),)


class DriftEventRow(NamedTuple):
    """A `drift_events` row: one drift check of one (agent, task, metric, test)."""

    DetectedAt: str  # `seconds.fraction` text
    Agent: str
    Task: str
    Metric: str
    Test: str
    Drifted: int
    PValue: float | None
    EffectSize: float | None
    BaselineN: int
    RecentN: int
    BaselineValue: float | None
    RecentValue: float | None
    WindowStart: str
    WindowEnd: str
    Detail: str  # JSON object (event_detail)


def event_detail(result: DriftResult) -> str:
    """Detail: the status, why, and what the columns do not hold (adjusted p, effect name, baseline)."""
    return json.dumps(
        {
            "status": result.status,
            "p_adjusted": result.p_adjusted,
            "effect": result.effect,
            "baseline": result.baseline,
            "note": result.detail,
        },
        ensure_ascii=False,
    )


def event_detail_text(detail: str, test: str = "") -> str:
    """Detail as a person reads it in an alert's summary: the adjusted p, how the effect size is
    measured, the baseline and the note (a change detector's alarm in words: `test` names it; the
    status is the row's Drifted); any other text as is."""
    document = json_object(detail)
    if document is None:
        return detail
    parts = []
    p_adjusted = document.get("p_adjusted")
    if isinstance(p_adjusted, int | float):
        parts.append(f"adjusted p={p_adjusted:.2g}")
    if document.get("effect"):
        parts.append(f"effect size as {document['effect']}")
    if document.get("baseline"):
        parts.append(f"baseline {document['baseline']}")
    note = document.get("note")
    found = json_object(note) if test in CHANGE_THRESHOLD_UNITS else None
    if found is not None:  # a change detector's alarm, in words
        parts.append(format_alarm(test, found))
    elif note:
        parts.append(str(note))
    return ", ".join(parts)


def write_drift_events(store: Store, results: Sequence[DriftResult], detected_at: float | None = None) -> int:
    """Append one row per result, all stamped with the same detection time; returns the count."""
    stamp = f"{detected_at if detected_at is not None else time.time():.3f}"
    rows = [
        DriftEventRow(
            stamp,
            r.agent,
            r.task,
            r.metric,
            r.test,
            int(r.drifted),
            r.p_value,
            r.effect_size,
            r.baseline_n,
            r.recent_n,
            r.baseline_value,
            r.recent_value,
            f"{r.window_start.timestamp():.3f}",
            f"{r.window_end.timestamp():.3f}",
            event_detail(r),
        )
        for r in results
    ]
    store.insert("drift_events", rows)
    return len(rows)
