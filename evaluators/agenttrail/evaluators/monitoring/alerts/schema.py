"""The alert tables (migration 130; alerts own versions 130-134).

`alert_state` holds the latest state of each alert (one row per fingerprint after merges,
read with FINAL); `alert_history` is append-only: every transition, every notification and
every delivery attempt with its outcome. `drift_events` is written by the drift monitor; it is
created here too, with the identical statement, so drift rules work whichever is installed.
"""

from __future__ import annotations

from agenttrail.collector.schema import Migration

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
) ENGINE = MergeTree ORDER BY (Agent, Metric, DetectedAt)
"""

ALERT_MIGRATIONS: tuple[Migration, ...] = (
    Migration(130, "alert state, alert history, drift events", (ALERT_STATE, ALERT_HISTORY, DRIFT_EVENTS)),
)
