"""Alerts in the sidecar: their read routes and (when rules are configured) the evaluator."""

from __future__ import annotations

import socket
import time
from typing import Any

from agenttrail.collector.sidecar import Sidecar
from agenttrail.evaluators.monitoring.alerts.config import AlertsConfig
from agenttrail.evaluators.monitoring.alerts.evaluator import AlertEvaluator
from agenttrail.evaluators.monitoring.alerts.history import AlertFilter, query_alerts, query_history
from agenttrail.evaluators.monitoring.alerts.replay import replay_route


def served_at(sidecar: Sidecar) -> str:
    """The sidecar's HTTP base URL as a browser elsewhere reaches it: the bound address (the real
    port, not the configured 0), with this host's name when it listens on every interface."""
    address = sidecar.http.address if sidecar.http is not None else sidecar.config.http
    host, _, port = address.rpartition(":")
    if host.strip("[]") in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    scheme = "https" if sidecar.config.tls_cert else "http"
    return f"{scheme}://{host}:{port}"


def install_alerts(sidecar: Sidecar, config: AlertsConfig) -> AlertEvaluator | None:
    """Add `/api/v1/alerts[/history|/test]`; start the evaluator if `config` has rules."""
    store = sidecar.lazy_store()

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
    evaluator = AlertEvaluator(sidecar.new_store, config, served_at=lambda: served_at(sidecar))
    sidecar.add_worker(evaluator)
    return evaluator
