"""The `metrics_export:` section of the config file: where run and score metrics go.

Prometheus `/metrics` on the sidecar's HTTP port is on by default (it is only read when scraped);
OTLP (metrics, plus `gen_ai.evaluation.result` events as OTel logs) is off until an endpoint is set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import urlparse

from agenttrail.collector.config import read_section
from agenttrail.collector.errors import ConfigError

PROTOCOLS = ("grpc", "http")


@dataclass(frozen=True, slots=True)
class MetricsExportConfig:
    """What `install_metrics_export` builds; every field is a key of `metrics_export:`."""

    prometheus: bool = True
    otlp_endpoint: str | None = None  # http(s)://host:4317 (grpc) or http(s)://host:4318 (http)
    otlp_protocol: str = "grpc"
    otlp_headers: tuple[tuple[str, str], ...] = ()  # e.g. an API key header for a vendor endpoint
    evaluation_events: bool = True  # gen_ai.evaluation.result log events, when otlp_endpoint is set
    interval_s: float = 10.0  # how often new runs/scores are read and OTLP metrics are pushed
    settle_s: float = 5.0  # rows younger than this are read next time (late-visible inserts)
    max_label_values: int = 100  # distinct values kept per label (agent, task, tool, metric, evaluator)

    def __post_init__(self) -> None:
        if self.otlp_protocol not in PROTOCOLS:
            raise ConfigError(
                f"metrics_export.otlp_protocol: {self.otlp_protocol!r} is not one of {', '.join(PROTOCOLS)}"
            )
        if self.otlp_endpoint is not None and urlparse(self.otlp_endpoint).scheme not in ("http", "https"):
            raise ConfigError(
                f"metrics_export.otlp_endpoint: {self.otlp_endpoint!r} must be an http(s):// URL, "
                "e.g. http://otel-collector:4317"
            )
        if self.interval_s <= 0 or self.settle_s < 0:
            raise ConfigError("metrics_export: interval_s must be positive and settle_s not negative")
        if self.max_label_values < 1:
            raise ConfigError("metrics_export.max_label_values must be at least 1")

    @property
    def enabled(self) -> bool:
        return self.prometheus or self.otlp_endpoint is not None

    @classmethod
    def from_mapping(cls, section: Mapping[str, Any], source: str = "config") -> MetricsExportConfig:
        known = {field.name for field in fields(cls)}
        unknown = set(section) - known
        if unknown:
            raise ConfigError(
                f"{source}: unknown metrics_export setting(s) {sorted(unknown)}; known: {sorted(known)}"
            )
        values: dict[str, Any] = dict(section)
        try:
            for key in ("prometheus", "evaluation_events"):
                if key in values and not isinstance(values[key], bool):
                    raise ValueError(f"{key} must be true or false, got {values[key]!r}")
            for key in ("interval_s", "settle_s"):
                if key in values:
                    values[key] = float(values[key])
            if "max_label_values" in values:
                values["max_label_values"] = int(values["max_label_values"])
            if "otlp_endpoint" in values:
                values["otlp_endpoint"] = str(values["otlp_endpoint"]) if values["otlp_endpoint"] else None
            if "otlp_headers" in values:
                headers = values["otlp_headers"] or {}
                if not isinstance(headers, dict):
                    raise ValueError("otlp_headers must be a mapping of header name to value")
                values["otlp_headers"] = tuple((str(k), str(v)) for k, v in headers.items())
            return cls(**values)
        except ConfigError as exc:  # from __post_init__, which does not know the file
            raise ConfigError(f"{source}: {exc}") from exc
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{source}: metrics_export section is invalid ({exc})") from exc

    @classmethod
    def from_file(cls, path: str | None) -> MetricsExportConfig:
        if not path:
            return cls()
        return cls.from_mapping(read_section(path, "metrics_export"), f"config file {path}")
