"""Alerts in the sidecar: their read routes, the evaluator, and the section's reload (SIGHUP,
or `POST /api/v1/admin/alerts/reload`, which `agenttrail alerts reload` sends).

The section in force lives in one `LiveAlerts`, which the evaluator, the `/api/v1/alerts/test`
route and the console's rule pages read; a reload reads the file again (`reread`), and a section
that does not parse is refused (a ConfigError naming file, rule and key, logged by
`Sidecar.reload` or answered by the admin route) with the rules in force still evaluated.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenttrail.collector.errors import ConfigError
from agenttrail.collector.sidecar import Sidecar
from agenttrail.evaluators.monitoring.alerts.config import AlertsConfig
from agenttrail.evaluators.monitoring.alerts.evaluator import AlertEvaluator
from agenttrail.evaluators.monitoring.alerts.history import AlertFilter, query_alerts, query_history
from agenttrail.evaluators.monitoring.alerts.replay import replay_route
from agenttrail.evaluators.reloads import NamedChanges


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


@dataclass(frozen=True, slots=True)
class AlertsReload:
    """What a reload of the alerts section changed: rules and channels by name, settings by key."""

    config_file: str
    rules: NamedChanges
    channels: NamedChanges
    settings: list[str]

    def describe(self) -> str:
        """As logged: `rules added a; channels changed b; settings changed: queue_size` ("" if none)."""
        return "; ".join(
            part
            for part in (
                self.rules and f"rules {self.rules.describe()}",
                self.channels and f"channels {self.channels.describe()}",
                self.settings and f"settings changed: {', '.join(self.settings)}",
            )
            if part
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "config_file": self.config_file,
            "rules": self.rules.to_json(),
            "channels": self.channels.to_json(),
            "settings": self.settings,
            "summary": self.describe() or "nothing changed",
        }


class LiveAlerts:
    """The alerts section in force in a running sidecar, and the reload that replaces it."""

    def __init__(
        self,
        config: AlertsConfig,
        evaluator: AlertEvaluator | None,
        reread: Callable[[], AlertsConfig] | None,
        config_file: str | None = None,
    ) -> None:
        self.config = config
        self.evaluator = evaluator
        self._reread = reread  # None: serve has no config file, so nothing to read again
        self.config_file = str(Path(config_file).resolve()) if config_file else ""
        self._lock = threading.Lock()  # SIGHUP (main thread) and the admin route (a worker thread)

    def reload(self) -> AlertsReload:
        """Read the section again and hand it to the evaluator; what changed, as logged. Raises
        ConfigError (the section in force stays) when the new one does not parse, or when serve
        has no config file to read again."""
        if self._reread is None:
            raise ConfigError(
                "serve was started without --config, so it has no alerts section to reload; "
                "restart it with --config FILE"
            )
        with self._lock:
            fresh = self._reread()
            before = self.config
            summary = AlertsReload(
                self.config_file,
                rules=NamedChanges.between(
                    {r.name: r for r in before.rules}, {r.name: r for r in fresh.rules}
                ),
                channels=NamedChanges.between(before.channels, fresh.channels),
                settings=[key for key in _SETTINGS if getattr(before, key) != getattr(fresh, key)],
            )
            if fresh == before:
                return summary
            if self.evaluator is not None:
                self.evaluator.reconfigure(fresh)
            self.config = fresh
        log.info("alerts section reloaded: %s", summary.describe())
        return summary


def install_alerts(
    sidecar: Sidecar,
    config: AlertsConfig,
    reread: Callable[[], AlertsConfig] | None = None,
    config_file: str | None = None,
) -> LiveAlerts:
    """Add `/api/v1/alerts[/history|/test]` and the evaluator, and SIGHUP's reload of the section
    (`reread`: how it reads `config_file`'s section again; None without a config file). Without
    `reread` the evaluator runs only if `config` has rules; with it always (idle, reading nothing,
    until a reload gives it rules). The admin route's reload is install_admin's."""
    store = sidecar.lazy_store()
    live = LiveAlerts(config, None, reread, config_file)

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
