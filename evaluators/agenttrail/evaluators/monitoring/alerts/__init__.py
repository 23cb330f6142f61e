"""Alerting: rules over runs and scores, a pending/firing/resolved state machine persisted in
ClickHouse, and notifications to webhooks, Slack, Alertmanager and the log."""

from agenttrail.evaluators.monitoring.alerts.config import AlertRule, AlertsConfig, ChannelConfig, fingerprint
from agenttrail.evaluators.monitoring.alerts.evaluator import AlertEvaluator
from agenttrail.evaluators.monitoring.alerts.install import install_alerts
from agenttrail.evaluators.monitoring.alerts.machine import AlertBook, AlertInstance, State
from agenttrail.evaluators.monitoring.alerts.schema import ALERT_MIGRATIONS

__all__ = [
    "ALERT_MIGRATIONS",
    "AlertBook",
    "AlertEvaluator",
    "AlertInstance",
    "AlertRule",
    "AlertsConfig",
    "ChannelConfig",
    "State",
    "fingerprint",
    "install_alerts",
]
