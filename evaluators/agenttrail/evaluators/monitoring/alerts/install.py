"""Alerts in the sidecar: their read routes, the evaluator, and the section's reload (SIGHUP).

The section in force lives in one `LiveAlerts`, which the evaluator, the `/api/v1/alerts/test`
route and the console's rule pages read; a reload reads the file again (`reread`), and a section
that does not parse is refused (a ConfigError naming file, rule and key, logged by
`Sidecar.reload`) with the rules in force still evaluated.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Mapping
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


log = logging.getLogger(__name__)

_SETTINGS = ("evaluation_interval_s", "external_url", "queue_size")


def _changed(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """`added a, b; changed c; removed d` between two name -> definition mappings ("" if none)."""
    parts = [
        (what, sorted(names))
        for what, names in (
            ("added", after.keys() - before.keys()),
            ("changed", {name for name in before.keys() & after.keys() if before[name] != after[name]}),
            ("removed", before.keys() - after.keys()),
        )
    ]
    return "; ".join(f"{what} {', '.join(names)}" for what, names in parts if names)


class LiveAlerts:
    """The alerts section in force in a running sidecar, and the reload that replaces it."""

    def __init__(
        self,
        config: AlertsConfig,
        evaluator: AlertEvaluator | None,
        reread: Callable[[], AlertsConfig] | None,
    ) -> None:
        self.config = config
        self.evaluator = evaluator
        self._reread = reread  # None: serve has no config file, so nothing to read again

    def reload(self) -> str:
        """Read the section again and hand it to the evaluator; what changed, as logged. Raises
        ConfigError (the section in force stays) when the new one does not parse."""
        if self._reread is None:
            return ""
        fresh = self._reread()
        if fresh == self.config:
            return ""
        before = self.config
        rules = _changed({r.name: r for r in before.rules}, {r.name: r for r in fresh.rules})
        channels = _changed(before.channels, fresh.channels)
        settings = ", ".join(key for key in _SETTINGS if getattr(before, key) != getattr(fresh, key))
        summary = "; ".join(
            filter(
                None,
                (
                    rules and f"rules {rules}",
                    channels and f"channels {channels}",
                    settings and f"settings changed: {settings}",
                ),
            )
        )
        if self.evaluator is not None:
            self.evaluator.reconfigure(fresh)
        self.config = fresh
        log.info("alerts section reloaded: %s", summary)
        return summary


def install_alerts(
    sidecar: Sidecar, config: AlertsConfig, reread: Callable[[], AlertsConfig] | None = None
) -> LiveAlerts:
    """Add `/api/v1/alerts[/history|/test]` and the evaluator, and SIGHUP's reload of the section
    (`reread`: how it reads the section again; None without a config file). Without `reread`
    the evaluator runs only if `config` has rules; with it always (idle, reading nothing, until a
    reload gives it rules)."""
    store = sidecar.lazy_store()
    live = LiveAlerts(config, None, reread)

    def alerts_route(params: dict[str, str]) -> list[dict[str, Any]]:
        return query_alerts(store(), AlertFilter.from_params(params))

    def history_route(params: dict[str, str]) -> list[dict[str, Any]]:
        return query_history(store(), AlertFilter.from_params(params))

    def test_route(params: dict[str, str]) -> list[dict[str, Any]]:
        return replay_route(store(), live.config, params, time.time())

    sidecar.add_read_route("/api/v1/alerts", alerts_route)
    sidecar.add_read_route("/api/v1/alerts/history", history_route)
    sidecar.add_read_route("/api/v1/alerts/test", test_route)
    if reread is not None:
        sidecar.on_reload.append(live.reload)
    if config.rules or reread is not None:
        live.evaluator = AlertEvaluator(sidecar.new_store, config, served_at=lambda: served_at(sidecar))
        sidecar.add_worker(live.evaluator)
    return live
