"""Sidecar settings as a table: each has an env var, a default and a type.

Precedence: command-line argument > environment variable > config file (YAML) > default.
A bad value raises ConfigError naming the setting, where it came from and what is accepted.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from agenttrail.collector.errors import ConfigError

DEFAULT_STORE = "./agenttrail-data"


def _positive_float(value: Any) -> float:
    number = float(value)
    if number < 0:
        raise ValueError("must not be negative")
    return number


def _positive_int(value: Any) -> int:
    number = int(value)
    if number <= 0:
        raise ValueError("must be a positive whole number")
    return number


def _days(value: Any) -> int:
    number = int(value)
    if number < 0:
        raise ValueError("must be a whole number of days, 0 to keep for ever")
    return number


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("must be true or false")


def _address(value: Any) -> str:
    text = str(value).strip()
    _, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError("must be host:port, e.g. 127.0.0.1:4317")
    return text


def _optional_str(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    default: Any
    parse: Callable[[Any], Any]
    help: str

    @property
    def env(self) -> str:
        return "AGENTTRAIL_" + self.name.upper()


SETTINGS: tuple[Setting, ...] = (
    Setting("store", DEFAULT_STORE, str, "embedded store directory, or http(s)://user:pass@host:8123/db"),
    Setting("database", "agenttrail", str, "ClickHouse database"),
    Setting("grpc", "127.0.0.1:4317", _address, "OTLP/gRPC listen address"),
    Setting("http", "127.0.0.1:4318", _address, "OTLP/HTTP and read-API listen address"),
    Setting(
        "spool_dir", None, _optional_str, "spool directory (default: <store>/spool, or ./agenttrail-spool)"
    ),
    Setting("spool_fsync", False, _bool, "fsync each accepted request (survives power loss, slower)"),
    Setting(
        "quiet_period_s", 2.0, _positive_float, "seconds of silence after the agent span before assembly"
    ),
    Setting(
        "idle_timeout_s",
        30.0,
        _positive_float,
        "seconds of silence before assembling traces with no agent span",
    ),
    Setting("max_body_bytes", 64 * 1024 * 1024, _positive_int, "request body limit after decompression"),
    Setting("max_queue_spans", 200_000, _positive_int, "spans queued for storage before refusing (429/503)"),
    Setting("batch_max_spans", 20_000, _positive_int, "spans per ClickHouse insert"),
    Setting(
        "insert_block_spans",
        8192,
        _positive_int,
        "spans ClickHouse writes as one part of an insert (an insert's memory grows with it)",
    ),
    Setting(
        "assembly_max_memory_bytes",
        256 * 1024 * 1024,
        _positive_int,
        "ClickHouse memory one assembly query may use; a chunk refused for it is assembled in halves",
    ),
    Setting("flush_interval_s", 0.2, _positive_float, "longest wait before a partial batch is inserted"),
    Setting("bearer_token", None, _optional_str, "require 'Authorization: Bearer <token>' on OTLP and API"),
    Setting("tls_cert", None, _optional_str, "PEM certificate file for TLS on both receivers"),
    Setting("tls_key", None, _optional_str, "PEM private key file for TLS on both receivers"),
    Setting("retention_spans_days", 0, _days, "days to keep raw spans (otel_traces); 0 keeps them for ever"),
    Setting("retention_trajectories_days", 0, _days, "days to keep trajectories; 0 keeps them for ever"),
    Setting("retention_scores_days", 0, _days, "days to keep scores and decisions; 0 keeps them for ever"),
    Setting("health_auth", False, _bool, "require the bearer token on /livez, /readyz and /healthz too"),
    Setting(
        "max_inflight_bytes",
        16 * 1024 * 1024,
        _positive_int,
        "request bytes both receivers hold at once before refusing (429 / UNAVAILABLE)",
    ),
    Setting("http_max_connections", 1024, _positive_int, "open HTTP connections before refusing (503)"),
    Setting("http_header_timeout_s", 10.0, _positive_float, "seconds a client has to send a request head"),
    Setting("http_body_timeout_s", 30.0, _positive_float, "seconds a client has to send a request body"),
    Setting("http_keepalive_timeout_s", 30.0, _positive_float, "seconds an idle keep-alive connection stays"),
    Setting(
        "span_max_age_days",
        3650.0,
        _positive_float,
        "spans that started longer ago than this are rejected (partial_success names them)",
    ),
    Setting(
        "span_max_future_s",
        86_400.0,
        _positive_float,
        "spans that start further ahead of the collector's clock are rejected",
    ),
)
_BY_NAME = {setting.name: setting for setting in SETTINGS}


@dataclass(frozen=True, slots=True)
class SidecarConfig:
    store: str = DEFAULT_STORE
    database: str = "agenttrail"
    grpc: str = "127.0.0.1:4317"
    http: str = "127.0.0.1:4318"
    spool_dir: str | None = None
    spool_fsync: bool = False
    quiet_period_s: float = 2.0
    idle_timeout_s: float = 30.0
    max_body_bytes: int = 64 * 1024 * 1024
    max_queue_spans: int = 200_000
    batch_max_spans: int = 20_000
    insert_block_spans: int = 8192
    assembly_max_memory_bytes: int = 256 * 1024 * 1024
    flush_interval_s: float = 0.2
    bearer_token: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    retention_spans_days: int = 0
    retention_trajectories_days: int = 0
    retention_scores_days: int = 0
    health_auth: bool = False
    max_inflight_bytes: int = 16 * 1024 * 1024
    http_max_connections: int = 1024
    http_header_timeout_s: float = 10.0
    http_body_timeout_s: float = 30.0
    http_keepalive_timeout_s: float = 30.0
    span_max_age_days: float = 3650.0
    span_max_future_s: float = 86_400.0

    def __post_init__(self) -> None:
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ConfigError("tls_cert and tls_key go together: set both or neither")


assert {f.name for f in fields(SidecarConfig)} == set(_BY_NAME), "settings table and config class differ"


def read_config_document(path: str | Path, wanted: str | None = None) -> dict[str, Any]:
    """A YAML config file's top level (an empty file is {}); ConfigError naming the file, and the
    section the caller `wanted` from it, when it cannot be read, is not YAML or is not a mapping."""
    file = Path(path)
    reading = f" (reading its {wanted!r} section)" if wanted else ""
    import yaml  # only when a config file is given: the CLI starts without it

    try:
        document = yaml.safe_load(file.read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read config file {file}{reading}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {file}{reading} is not valid YAML: {exc}") from exc
    if not isinstance(document, dict):
        raise ConfigError(
            f"config file {file}{reading} must be a mapping of sections (collector:, evaluators:, ...), "
            f"got {type(document).__name__}"
        )
    return document


def read_section(path: str | Path, name: str) -> dict[str, Any]:
    """The `name:` section of a YAML config file, {} where the file has none; ConfigError naming
    the file and the section if the file is unreadable or the section is not a mapping."""
    section = read_config_document(path, name).get(name, {})
    if not isinstance(section, dict):
        raise ConfigError(
            f"config file {path}: '{name}' must be a mapping of settings, got {type(section).__name__}"
        )
    return section


def read_config_file(path: str | Path, other_sections: Collection[str] = ()) -> dict[str, Any]:
    """The `collector:` section of a YAML config file. A file without one holds the collector's
    settings at its top level, beside `other_sections` (the evaluators' `judges:`, `alerts:`...),
    which are skipped."""
    document = read_config_document(path)
    section = document.get("collector", document)
    if not isinstance(section, dict):
        raise ConfigError(f"config file {path}: 'collector' must be a mapping of settings")
    return {key: value for key, value in section.items() if key not in other_sections}


def load_config(
    arguments: Mapping[str, Any] | None = None,
    *,
    config_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    other_sections: Collection[str] = (),
) -> SidecarConfig:
    environ = os.environ if environ is None else environ
    file_values = read_config_file(config_file, other_sections) if config_file else {}
    unknown = set(file_values) - set(_BY_NAME)
    if unknown:
        raise ConfigError(
            f"config file {config_file}: unknown setting(s) {sorted(unknown)}; known: {sorted(_BY_NAME)}"
        )
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        given = (arguments or {}).get(setting.name)
        if given is not None:
            raw, source = given, f"option --{setting.name.replace('_', '-')}"
        elif setting.env in environ:
            raw, source = environ[setting.env], f"environment variable {setting.env}"
        elif setting.name in file_values:
            raw, source = file_values[setting.name], f"config file {config_file} key {setting.name!r}"
        else:
            continue
        try:
            values[setting.name] = setting.parse(raw)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{source}: bad value {raw!r} ({exc}); {setting.help}") from exc
    return SidecarConfig(**values)
