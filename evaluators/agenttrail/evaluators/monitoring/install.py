"""Monitoring's part of `agenttrail serve`: the drift monitor, the hourly rollup job, and the
stats and drift read routes (what `agenttrail stats` and `agenttrail drift` read while serve holds the store).
scipy loads only where drift is computed."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agenttrail.collector.queries import QueryError
from agenttrail.evaluators.monitoring.stats import StatsQuery, query_stats

if TYPE_CHECKING:
    from agenttrail.collector.sidecar import Sidecar
    from agenttrail.evaluators.monitoring.drift import DriftSettings
    from agenttrail.evaluators.monitoring.drift_monitor import DriftConfig


def install_monitoring(sidecar: Sidecar, config: DriftConfig) -> None:
    """Add the drift monitor (unless `config` disables it), the hourly rollup job and the
    stats/drift routes."""
    from agenttrail.evaluators.monitoring.drift import DriftQuery, analyse_drift
    from agenttrail.evaluators.monitoring.drift_monitor import DriftMonitor
    from agenttrail.evaluators.monitoring.hourly import HourlyRollup

    if config.enabled:
        sidecar.add_worker(DriftMonitor(sidecar.new_store, config))
    sidecar.add_worker(HourlyRollup(sidecar.new_store))
    store = sidecar.lazy_store()
    sidecar.add_read_route(
        "/api/v1/stats", lambda params: query_stats(store(), StatsQuery.from_params(params))
    )

    def drift_route(params: dict[str, str]) -> list[dict[str, Any]]:
        params = dict(params)
        settings = with_overrides(config.settings, params.pop("min_samples", None), params.pop("alpha", None))
        return [r.to_json() for r in analyse_drift(store(), DriftQuery.from_params(params), settings)]

    sidecar.add_read_route("/api/v1/drift", drift_route)


def with_overrides(settings: DriftSettings, min_samples: Any, alpha: Any) -> DriftSettings:
    """The settings with a per-request minimum sample size or alpha (text or number) applied."""
    try:
        if min_samples not in (None, ""):
            settings = replace(settings, min_samples=int(min_samples))
        if alpha not in (None, ""):
            settings = replace(settings, alpha=float(alpha))
    except ValueError as exc:
        raise QueryError(f"min_samples must be a whole number and alpha a number: {exc}") from exc
    return settings
