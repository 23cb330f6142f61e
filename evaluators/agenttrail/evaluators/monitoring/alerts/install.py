"""Alerts in the sidecar: their tables, read routes and (when rules are configured) the evaluator."""

from __future__ import annotations

import time
from typing import Any

from agenttrail.collector.sidecar import Sidecar
from agenttrail.evaluators.monitoring.alerts.config import AlertsConfig
from agenttrail.evaluators.monitoring.alerts.evaluator import AlertEvaluator
from agenttrail.evaluators.monitoring.alerts.history import AlertFilter, query_alerts, query_history
from agenttrail.evaluators.monitoring.alerts.replay import replay_route
from agenttrail.evaluators.monitoring.alerts.schema import ALERT_MIGRATIONS
from agenttrail.evaluators.monitoring.route_store import lazy_store


def install_alerts(sidecar: Sidecar, config_file: str | None) -> AlertEvaluator | None:
    """Add the alert tables and `/api/v1/alerts[/history|/test]`; start the evaluator if rules exist."""
    config = AlertsConfig.from_file(config_file)
    sidecar.migrations.extend(ALERT_MIGRATIONS)
    store = lazy_store(sidecar)

    def alerts_route(params: dict[str, str]) -> list[dict[str, Any]]:
        return query_alerts(store(), AlertFilter.from_params(params))

    def history_route(params: dict[str, str]) -> list[dict[str, Any]]:
        return query_history(store(), AlertFilter.from_params(params))

    def test_route(params: dict[str, str]) -> list[dict[str, Any]]:
        return replay_route(store(), config, params, time.time())

    sidecar.add_read_route("/api/v1/alerts", alerts_route)
    sidecar.add_read_route("/api/v1/alerts/history", history_route)
    sidecar.add_read_route("/api/v1/alerts/test", test_route)
    if not config.rules:
        return None
    evaluator = AlertEvaluator(sidecar.new_store, config)
    sidecar.add_worker(evaluator)
    return evaluator
