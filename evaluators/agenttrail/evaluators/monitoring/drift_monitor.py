"""The continuous drift check: a sidecar worker that runs the drift analysis every `interval_s`
and appends the results to `drift_events`, configured by the `drift:` section of the YAML file.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agenttrail.collector.background import BackgroundLoop
from agenttrail.collector.config import read_section
from agenttrail.collector.errors import ConfigError
from agenttrail.collector.queries import QueryError
from agenttrail.collector.store import Store
from agenttrail.evaluators.monitoring.drift import DriftQuery, DriftSettings, analyse_drift
from agenttrail.evaluators.monitoring.drift_events import write_drift_events

log = logging.getLogger(__name__)

_SETTINGS = {
    "min_samples",
    "alpha",
    "min_effect",
    "change_delta",
    "change_threshold",
    "rate_change_threshold",
    "max_samples",
}
_WINDOWS = {"recent", "baseline", "baseline_from", "baseline_to", "baseline_version"}
_KNOWN = {"enabled", "interval_s", "metrics", "agent", "task", *_SETTINGS, *_WINDOWS}


@dataclass(frozen=True, slots=True)
class DriftConfig:
    """The `drift:` section: when and how the sidecar checks for drift."""

    enabled: bool = True
    interval_s: float = 300.0
    window: Mapping[str, str] = field(default_factory=lambda: {"recent": "1h", "baseline": "24h"})
    settings: DriftSettings = field(default_factory=DriftSettings)
    metrics: tuple[str, ...] = ()
    agent: str | None = None
    task: str | None = None

    def query(self, now: Any = None) -> DriftQuery:
        """The drift question for a check ending `now` (a datetime; default the current time)."""
        params = dict(self.window)
        if now is not None:
            params["now"] = now.isoformat()
        return DriftQuery.from_params(
            {
                **params,
                **({"metric": ",".join(self.metrics)} if self.metrics else {}),
                **({"agent": self.agent} if self.agent else {}),
                **({"task": self.task} if self.task else {}),
            }
        )

    @classmethod
    def from_mapping(cls, section: Mapping[str, Any], source: str = "config") -> DriftConfig:
        unknown = set(section) - _KNOWN
        if unknown:
            raise ConfigError(
                f"{source}: unknown drift setting(s) {sorted(unknown)}; known: {sorted(_KNOWN)}"
            )
        try:
            window = {key: str(section[key]) for key in _WINDOWS if key in section}
            if "recent" not in window:
                window["recent"] = "1h"
            if not set(window) - {"recent"}:
                window["baseline"] = "24h"
            values: dict[str, Any] = {
                key: _number(key, section[key]) for key in (_SETTINGS - {"min_effect"}) & set(section)
            }
            if "min_effect" in section:
                values["min_effect"] = {str(k): float(v) for k, v in dict(section["min_effect"]).items()}
            settings = DriftSettings(**values)
            metrics = section.get("metrics") or []
            if not isinstance(metrics, list):
                raise ValueError("metrics must be a list of metric names")
            config = cls(
                enabled=bool(section.get("enabled", True)),
                interval_s=float(section.get("interval_s", 300.0)),
                window=window,
                settings=settings,
                metrics=tuple(str(metric) for metric in metrics),
                agent=section.get("agent"),
                task=section.get("task"),
            )
            if config.interval_s <= 0:
                raise ValueError("interval_s must be positive")
            config.query()  # the windows must make sense now, not at the first check
            return config
        except (QueryError, TypeError, ValueError) as exc:
            raise ConfigError(f"{source}: drift section is invalid: {exc}") from exc

    @classmethod
    def from_file(cls, path: str | None) -> DriftConfig:
        if not path:
            return cls()
        return cls.from_mapping(read_section(path, "drift"), f"config file {path}")


def _number(key: str, value: Any) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} must be a number, got {value!r}")
    return int(value) if key in ("min_samples", "max_samples") else float(value)


@dataclass
class DriftCounters:
    checks: int = 0
    events_written: int = 0
    drifts_found: int = 0
    failures: int = 0
    last_error: str = ""


class DriftMonitor(BackgroundLoop):
    """Runs one drift check per interval; `check()` is one full cycle (tests call it directly)."""

    name = "drift"

    def __init__(self, store_factory: Callable[[], Store], config: DriftConfig) -> None:
        super().__init__(
            what="drift check", thread_name="agenttrail-drift", poll_interval_s=config.interval_s
        )
        self.config = config
        self._store_factory = store_factory
        self._store: Store | None = None
        self.counters = DriftCounters()

    def cycle(self) -> None:
        self.check()

    def count_failure(self, message: str) -> None:
        self.counters.failures += 1
        self.counters.last_error = message

    def check(self) -> int:
        """Analyse the configured windows ending now and store every result; returns rows written."""
        if self._store is None:
            self._store = self._store_factory()
        started = time.monotonic()
        results = analyse_drift(self._store, self.config.query(), self.config.settings)
        written = write_drift_events(self._store, results)
        drifted = [r for r in results if r.drifted]
        self.counters.checks += 1
        self.counters.events_written += written
        self.counters.drifts_found += len(drifted)
        for result in drifted:
            log.warning(
                "drift: agent %s metric %s (%s) p=%s effect %s=%.3f, baseline %s -> recent %s",
                result.agent,
                result.metric,
                result.test,
                "-" if result.p_value is None else f"{result.p_value:.2g}",
                result.effect,
                result.effect_size or 0.0,
                result.baseline_value,
                result.recent_value,
            )
        log.debug("drift check: %d results in %.2f s", written, time.monotonic() - started)
        return written
