"""The alert tables (migration 130; alerts own versions 130-134).

`alert_state` holds the latest state of each alert (one row per fingerprint after merges,
read with FINAL); `alert_history` is append-only: every transition, every notification and
every delivery attempt with its outcome. `drift_events` belongs to the drift monitor
(monitoring/drift_events.py, migration 120); migration 130 runs the same statement (IF NOT
EXISTS) so that drift rules find the table in a store the alerts' migrations alone set up.
"""

from __future__ import annotations

from typing import NamedTuple

from agenttrail.collector.schema import Migration
from agenttrail.evaluators.monitoring.drift_events import DRIFT_EVENTS

ALERT_STATE = """
CREATE TABLE IF NOT EXISTS alert_state (
    Fingerprint String,
    Rule LowCardinality(String),
    GroupLabels Map(LowCardinality(String), String),
    Severity LowCardinality(String),
    State LowCardinality(String),
    ActiveSince Nullable(DateTime64(3)),
    FiredAt Nullable(DateTime64(3)),
    ResolvedAt Nullable(DateTime64(3)),
    LastNotifiedAt Nullable(DateTime64(3)),
    Value Nullable(Float64),
    Threshold Nullable(Float64),
    Detail String,
    Annotations Map(LowCardinality(String), String),
    UpdatedAt DateTime64(3)
) ENGINE = ReplacingMergeTree(UpdatedAt)
ORDER BY Fingerprint
"""

ALERT_HISTORY = """
CREATE TABLE IF NOT EXISTS alert_history (
    At DateTime64(3),
    Fingerprint String,
    Rule LowCardinality(String),
    GroupLabels Map(LowCardinality(String), String),
    Event LowCardinality(String),
    FromState LowCardinality(String),
    ToState LowCardinality(String),
    Notification LowCardinality(String),
    Channel LowCardinality(String),
    Delivery LowCardinality(String),
    Attempt UInt16,
    Error String,
    Value Nullable(Float64),
    Threshold Nullable(Float64),
    Detail String
) ENGINE = MergeTree
ORDER BY (Rule, Fingerprint, At)
TTL toDateTime(At) + INTERVAL 180 DAY
"""


class AlertStateRow(NamedTuple):
    """An `alert_state` row: the latest state of one alert (history.state_row). Times are
    `seconds.fraction` text, None where the alert has not reached that state."""

    Fingerprint: str
    Rule: str
    GroupLabels: dict[str, str]
    Severity: str
    State: str
    ActiveSince: str | None
    FiredAt: str | None
    ResolvedAt: str | None
    LastNotifiedAt: str | None
    Value: float | None
    Threshold: float | None
    Detail: str
    Annotations: dict[str, str]
    UpdatedAt: str


class AlertHistoryRow(NamedTuple):
    """An `alert_history` row: a transition, a queued notification or one delivery attempt
    (history.HistoryEvent)."""

    At: str  # `seconds.fraction` text
    Fingerprint: str
    Rule: str
    GroupLabels: dict[str, str]
    Event: str
    FromState: str
    ToState: str
    Notification: str
    Channel: str
    Delivery: str
    Attempt: int
    Error: str
    Value: float | None
    Threshold: float | None
    Detail: str


ALERT_MIGRATIONS: tuple[Migration, ...] = (
    Migration(130, "alert state, alert history, drift events", (ALERT_STATE, ALERT_HISTORY, DRIFT_EVENTS)),
)
