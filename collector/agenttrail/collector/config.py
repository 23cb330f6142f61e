"""The collector's settings table (`collector:` in the config file) and the loader of the file.

Each setting is one row of SETTINGS (settings.py: its type, default, help, env var); the
loader resolves every one as flag > environment variable > config file (YAML) > default, and
keeps where each value came from. The evaluators' sections are handed to the loader by the
composition root (`sections`): `resolve_section` resolves each of their scalars env
(AGENTTRAIL_<SECTION>_<KEY>) > file > default and checks keys and values with their tables,
`check_section` runs their parsers; the loader refuses a top-level section nobody owns. A bad
value raises ConfigError naming the key, the section, where it came from (flag, env var, file)
and what is accepted.

Where to add a setting: a row in SETTINGS and a field in SidecarConfig (the module refuses to
import if they differ); `serve` gets the flag, `config show` the row, with nothing else to do.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

from agenttrail.collector.errors import ConfigError
from agenttrail.collector.settings import (
    ADDRESS,
    BOOL,
    COUNT,
    DAYS,
    DIRECTORY,
    FILE,
    NUMBER,
    OPTIONAL_TEXT,
    POSITIVE_INT,
    POSITIVE_SECONDS,
    SECONDS,
    TEXT,
    Resolved,
    Section,
    Setting,
    did_you_mean,
    parse_value,
    unknown_keys_error,
)

DEFAULT_STORE = "./agenttrail-data"

SETTINGS: tuple[Setting, ...] = (
    Setting("store", TEXT, DEFAULT_STORE, "embedded store directory, or http(s)://user:pass@host:8123/db"),
    Setting("database", TEXT, "agenttrail", "ClickHouse database"),
    Setting(
        "store_startup_timeout_s",
        SECONDS,
        0.0,
        "seconds serve waits for a ClickHouse server it cannot reach at start, spooling meanwhile, "
        "before it exits (0: for ever; an embedded store is never waited for)",
    ),
    Setting("grpc", ADDRESS, "127.0.0.1:4317", "OTLP/gRPC listen address"),
    Setting("http", ADDRESS, "127.0.0.1:4318", "OTLP/HTTP and read-API listen address"),
    Setting("spool_dir", DIRECTORY, None, "spool directory (default: <store>/spool, or ./agenttrail-spool)"),
    Setting("spool_fsync", BOOL, False, "fsync each accepted request (survives power loss, slower)"),
    Setting("quiet_period_s", SECONDS, 2.0, "seconds of silence after the agent span before assembly"),
    Setting(
        "idle_timeout_s", SECONDS, 30.0, "seconds of silence before assembling traces with no agent span"
    ),
    Setting("max_body_bytes", POSITIVE_INT, 64 * 1024 * 1024, "request body limit after decompression"),
    Setting("max_queue_spans", POSITIVE_INT, 200_000, "spans queued for storage before refusing (429/503)"),
    Setting("batch_max_spans", POSITIVE_INT, 50_000, "spans per ClickHouse insert (at most)"),
    Setting(
        "insert_block_spans",
        POSITIVE_INT,
        8192,
        "spans ClickHouse writes as one part of an insert (an insert's memory grows with it)",
    ),
    Setting(
        "assembly_max_memory_bytes",
        POSITIVE_INT,
        256 * 1024 * 1024,
        "ClickHouse memory one assembly query may use; a chunk refused for it is assembled in halves",
    ),
    Setting(
        "assembly_max_traces",
        POSITIVE_INT,
        2000,
        "traces one assembly query assembles at most when behind (memory grows with it)",
    ),
    Setting(
        "assembly_max_pending_traces",
        POSITIVE_INT,
        20_000,
        "traces waiting for assembly held in memory (~300 bytes each); while assembly is behind, "
        "the rest are read back from trace_arrivals as room frees",
    ),
    Setting(
        "engine_dirty_decay_ms",
        COUNT,
        1000,
        "ms the embedded engine's allocator keeps freed memory before returning it "
        "(at 5000, as chDB is built, 100-300 MiB more under overload; JE_MALLOC_CONF, if set, wins)",
    ),
    Setting(
        "engine_oversize_threshold_bytes",
        COUNT,
        2 * 1024 * 1024,
        "the embedded engine's allocator returns freed blocks this large at once, not after "
        "engine_dirty_decay_ms (0: chDB's 64 MiB; 262144 peaks ~0.2x idle lower under overload "
        "but costs ingest ~23% more CPU a span; JE_MALLOC_CONF, if set, wins)",
    ),
    Setting(
        "malloc_arena_max",
        COUNT,
        0,
        "glibc malloc arenas serve's threads share (Python, grpc, protobuf; 0: glibc's 8 per core, "
        "each keeping its own freed memory; 2 keeps ~25 MiB less but slows acks by ~1 ms; "
        "MALLOC_ARENA_MAX, if set, wins)",
    ),
    Setting(
        "malloc_mmap_threshold_bytes",
        COUNT,
        0,
        "serve's glibc malloc maps blocks this large apart and unmaps them when freed (request bodies; "
        "0: glibc's threshold, which grows to the largest block freed; 131072 with malloc_arena_max 2 "
        "keeps ~25 MiB less but slows acks by ~1 ms; MALLOC_MMAP_THRESHOLD_, if set, wins)",
    ),
    Setting("flush_interval_s", SECONDS, 0.2, "longest wait before a partial batch is inserted"),
    Setting(
        "ingest_max_wait_s",
        SECONDS,
        0.5,
        "longest a received request waits to be checked and spooled before it is refused (429 / UNAVAILABLE)",
    ),
    Setting(
        "bearer_token",
        OPTIONAL_TEXT,
        None,
        "require 'Authorization: Bearer <token>' on OTLP and API; 'new,old' accepts either while "
        "clients move to a new token (this machine's CLI sends the first)",
        secret=True,
    ),
    Setting("tls_cert", FILE, None, "PEM certificate file for TLS on both receivers"),
    Setting("tls_key", FILE, None, "PEM private key file for TLS on both receivers"),
    Setting("retention_spans_days", DAYS, 0, "days to keep raw spans (otel_traces); 0 keeps them for ever"),
    Setting("retention_trajectories_days", DAYS, 0, "days to keep trajectories; 0 keeps them for ever"),
    Setting("retention_scores_days", DAYS, 0, "days to keep scores and decisions; 0 keeps them for ever"),
    Setting("health_auth", BOOL, False, "require the bearer token on /livez, /readyz and /healthz too"),
    Setting(
        "metrics_auth",
        BOOL,
        True,
        "require the bearer token on /metrics; false serves it to any scraper that reaches the HTTP "
        "port (Prometheus discovering pods by annotation cannot send one); the rest still needs it",
    ),
    Setting(
        "max_inflight_bytes",
        POSITIVE_INT,
        16 * 1024 * 1024,
        "request bytes both receivers hold at once before refusing (429 / UNAVAILABLE)",
    ),
    Setting(
        "gil_switch_interval_s",
        POSITIVE_SECONDS,
        0.001,
        "serve's Python thread switch interval: how long a receiver may wait for the GIL (Python's 0.005)",
    ),
    Setting(
        "background_nice",
        COUNT,
        0,
        "serve's background threads (writer, assembler, evaluator, metrics, monitoring) run this much "
        "lower in the OS's priority than the receivers (Linux; 0: the same; 10 may lower ack latency)",
    ),
    Setting(
        "engine_nice",
        COUNT,
        5,
        "the embedded engine's threads (inserts, merges, assembly, scoring and monitoring queries) run "
        "this much lower in the OS's priority than the receivers (Linux with CAP_SYS_NICE, up to 19; 0: "
        "the same): acks wait less for a core",
    ),
    Setting(
        "grpc_process",
        BOOL,
        False,
        "receive OTLP/gRPC in a process of its own: acks do not wait for serve's Python",
    ),
    Setting("http_max_connections", POSITIVE_INT, 1024, "open HTTP connections before refusing (503)"),
    Setting("http_header_timeout_s", SECONDS, 10.0, "seconds a client has to send a request head"),
    Setting("http_body_timeout_s", SECONDS, 30.0, "seconds a client has to send a request body"),
    Setting("http_keepalive_timeout_s", SECONDS, 30.0, "seconds an idle keep-alive connection stays"),
    Setting(
        "span_max_age_days",
        NUMBER,
        3650.0,
        "spans that started longer ago than this are rejected (partial_success names them)",
    ),
    Setting(
        "span_max_future_s",
        SECONDS,
        86_400.0,
        "spans that start further ahead of the collector's clock are rejected",
    ),
)
COLLECTOR = Section("collector", "the sidecar: receivers, spool, storage, assembly, limits", SETTINGS)
_BY_NAME = {setting.name: setting for setting in SETTINGS}


@dataclass(frozen=True, slots=True)
class SidecarConfig:
    store: str = DEFAULT_STORE
    database: str = "agenttrail"
    store_startup_timeout_s: float = 0.0  # wait for ever: /readyz shows the wait
    grpc: str = "127.0.0.1:4317"
    http: str = "127.0.0.1:4318"
    spool_dir: str | None = None
    spool_fsync: bool = False
    quiet_period_s: float = 2.0
    idle_timeout_s: float = 30.0
    max_body_bytes: int = 64 * 1024 * 1024
    max_queue_spans: int = 200_000
    batch_max_spans: int = 50_000  # ingest.BATCH_MAX_SPANS
    insert_block_spans: int = 8192
    assembly_max_memory_bytes: int = 256 * 1024 * 1024
    assembly_max_traces: int = 2000  # assembler.MAX_TRACES_PER_QUERY
    assembly_max_pending_traces: int = 20_000  # assembler.MAX_PENDING_TRACES
    engine_dirty_decay_ms: int = 1000
    engine_oversize_threshold_bytes: int = 2 * 1024 * 1024
    malloc_arena_max: int = 0  # off: ~1 ms more ack p50 for ~25 MiB (docs/performance.md, rss19)
    malloc_mmap_threshold_bytes: int = 0
    flush_interval_s: float = 0.2
    ingest_max_wait_s: float = 0.5
    bearer_token: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    retention_spans_days: int = 0
    retention_trajectories_days: int = 0
    retention_scores_days: int = 0
    health_auth: bool = False
    metrics_auth: bool = True
    max_inflight_bytes: int = 16 * 1024 * 1024
    gil_switch_interval_s: float = 0.001
    background_nice: int = 0
    engine_nice: int = 5
    grpc_process: bool = False
    http_max_connections: int = 1024
    http_header_timeout_s: float = 10.0
    http_body_timeout_s: float = 30.0
    http_keepalive_timeout_s: float = 30.0
    span_max_age_days: float = 3650.0
    span_max_future_s: float = 86_400.0

    def __post_init__(self) -> None:
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ConfigError("tls_cert and tls_key go together: set both or neither")


assert {f.name: f.default for f in fields(SidecarConfig)} == {s.name: s.default for s in SETTINGS}, (
    "the settings table and SidecarConfig differ in names or defaults"
)
assert MISSING not in {f.default for f in fields(SidecarConfig)}


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
    return section_of(read_config_document(path, name), name, path)


def section_of(document: Mapping[str, Any], name: str, path: str | Path) -> dict[str, Any]:
    """The `name:` section of a file's `document`, {} where it has none (as read_section)."""
    section = document.get(name, {})
    if not isinstance(section, dict):
        raise ConfigError(
            f"config file {path}: '{name}' must be a mapping of settings, got {type(section).__name__}"
        )
    return section


@dataclass(frozen=True, slots=True)
class Settings:
    """Every effective setting of every known section, each with its source; `config` is the
    collector's as the sidecar takes them."""

    config: SidecarConfig
    resolved: tuple[Resolved, ...]
    config_file: str | None = None


def load_config(
    arguments: Mapping[str, Any] | None = None,
    *,
    config_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    other_sections: Collection[str] = (),
) -> SidecarConfig:
    """The collector's settings; the top-level sections named in `other_sections` are others'
    (skipped when the file has no `collector:` section and holds its settings at the top)."""
    return load_settings(
        arguments, config_file=config_file, environ=environ, skip_sections=other_sections
    ).config


def load_settings(
    arguments: Mapping[str, Any] | None = None,
    *,
    config_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    sections: Sequence[Section] | None = None,
    skip_sections: Collection[str] = (),
    check_sections: bool = False,
) -> Settings:
    """Every setting resolved: flag (`arguments`, None meaning unset) > `environ` > the file's
    key > default. `sections`: the other sections there are (None: unknown, so other top-level
    keys are not checked); each one is resolved env > file > default (resolve_section) and,
    with `check_sections`, has its own parser run over it where the file or the environment
    sets it (serve and `config show` do; read commands do not load the evaluators' parsers)."""
    environ = os.environ if environ is None else environ
    others = [section for section in sections or () if section.name != COLLECTOR.name]
    skipped = {section.name for section in others} | set(skip_sections)
    document = read_config_document(config_file) if config_file else {}
    source = f"config file {config_file}"
    if config_file and sections is not None and COLLECTOR.name in document:
        known = [COLLECTOR.name, *(section.name for section in others)]
        unknown = [str(key) for key in document if key not in known]
        if unknown:
            raise _unknown_sections(source, unknown, known)
    file_values = _collector_values(document, str(config_file), skipped) if config_file else {}
    unknown_settings = [str(key) for key in file_values if key not in _BY_NAME]
    if unknown_settings:
        error = unknown_keys_error(source, COLLECTOR.name, unknown_settings, list(_BY_NAME))
        if sections is not None and COLLECTOR.name not in document:  # maybe a misspelt section
            hint = did_you_mean(unknown_settings, [COLLECTOR.name, *(section.name for section in others)])
            if hint:  # `colector:` reads best as a misspelt section, before the collector's keys
                raise ConfigError(
                    f"{source}: unknown section(s) {sorted(unknown_settings)}{hint}; the file has no "
                    f"'collector:' section, so its top level is read as the collector's settings beside "
                    f"the sections {sorted(skipped)}, and these are neither"
                )
            raise ConfigError(
                f"{error} (the file has no 'collector:' section, so its top level holds the "
                f"collector's settings beside the sections {sorted(skipped)})"
            )
        raise error
    values: dict[str, Any] = {}
    resolved: list[Resolved] = []
    for setting in SETTINGS:
        given = (arguments or {}).get(setting.name)
        if given is not None:
            raw, where, shown = given, f"option {setting.flag}", f"flag {setting.flag}"
        elif setting.env in environ:
            raw, where, shown = (
                environ[setting.env],
                f"environment variable {setting.env}",
                f"env {setting.env}",
            )
        elif setting.name in file_values:
            raw, where, shown = file_values[setting.name], source, f"file {config_file}"
        else:
            resolved.append(Resolved(COLLECTOR.name, setting.name, setting.default, "default", setting))
            continue
        values[setting.name] = parse_value(setting, raw, where, COLLECTOR.name)
        resolved.append(Resolved(COLLECTOR.name, setting.name, values[setting.name], shown, setting))
    config = SidecarConfig(**values)
    others_values = [resolve_section(section, document, config_file, environ) for section in others]
    effective = with_sections(document, others_values)
    for section_values in others_values:
        resolved += section_values.rows
        if check_sections and section_values.present:
            check_section(section_values, effective, source if config_file else "environment")
    return Settings(config, tuple(resolved), None if config_file is None else str(config_file))


def _collector_values(document: Mapping[str, Any], path: str, skipped: Collection[str]) -> dict[str, Any]:
    section = document.get(COLLECTOR.name, document)
    if not isinstance(section, dict):
        raise ConfigError(f"config file {path}: 'collector' must be a mapping of settings")
    return {key: value for key, value in section.items() if key not in skipped}


def _unknown_sections(source: str, unknown: Sequence[str], known: Sequence[str]) -> ConfigError:
    return ConfigError(
        f"{source}: unknown section(s) {sorted(unknown)}{did_you_mean(unknown, known)}; "
        f"known sections: {list(known)}"
    )


@dataclass(frozen=True, slots=True)
class SectionValues:
    """One of the other sections resolved: `value` is what its parser reads (the file's section
    with the environment's values over it; None where neither has it), `rows` each setting's
    effective value and source, `from_env` the environment variables that set any."""

    section: Section
    value: Any
    rows: tuple[Resolved, ...]
    from_env: tuple[str, ...] = ()

    @property
    def present(self) -> bool:
        return self.value is not None


def resolve_section(
    section: Section,
    document: Mapping[str, Any],
    config_file: str | Path | None,
    environ: Mapping[str, str] | None = None,
) -> SectionValues:
    """One of the other sections, each setting env > file > default (env only for settings with
    `env_var`): its keys checked against its table and each value parsed as its type; a bad value
    is a ConfigError naming the environment variable or the file, the key and what is accepted."""
    environ = os.environ if environ is None else environ
    source = f"config file {config_file}"
    value = document.get(section.name)
    if section.is_list:
        if value is not None and not isinstance(value, list):
            raise ConfigError(f"{source}: '{section.name}' must be a list, got {type(value).__name__}")
        shown = f"file {config_file}" if section.name in document else "default"
        return SectionValues(section, value, (Resolved(section.name, "", value or [], shown),))
    if value is not None and not isinstance(value, dict):
        raise ConfigError(
            f"{source}: '{section.name}' must be a mapping of settings, got {type(value).__name__}"
        )
    file_values: dict[str, Any] = value or {}
    known = [setting.name for setting in section.settings]
    unknown = [str(key) for key in file_values if key not in known]
    if unknown and not section.open:
        raise unknown_keys_error(source, section.name, unknown, known)
    effective = dict(file_values)
    rows, from_env = [], []
    for setting in section.settings:
        if setting.env_var and setting.env in environ:
            raw = environ[setting.env]
            parsed = parse_value(setting, raw, f"environment variable {setting.env}", section.name)
            rows.append(Resolved(section.name, setting.name, parsed, f"env {setting.env}", setting))
            from_env.append(setting.env)
        elif setting.name in file_values:
            parsed = parse_value(setting, file_values[setting.name], source, section.name)
            rows.append(Resolved(section.name, setting.name, parsed, f"file {config_file}", setting))
        else:
            rows.append(Resolved(section.name, setting.name, setting.default, "default", setting))
            continue
        if parsed is None:  # empty text: none, which is the parser's own default
            effective.pop(setting.name, None)
        else:
            effective[setting.name] = parsed
    rows += [Resolved(section.name, key, file_values[key], f"file {config_file}") for key in unknown]
    present = value is not None or bool(from_env)
    return SectionValues(section, effective if present else None, tuple(rows), tuple(from_env))


def with_sections(document: Mapping[str, Any], resolved: Sequence[SectionValues]) -> dict[str, Any]:
    """The file's `document` with each resolved section's value (environment included) in place."""
    effective = dict(document)
    for values in resolved:
        if values.present:
            effective[values.section.name] = values.value
    return effective


def check_section(values: SectionValues, document: Mapping[str, Any], source: str) -> object:
    """Run the section's own parser over the effective `document` (with_sections) and return what
    it built; an error it raises over a value from the environment names the variables too."""
    if values.section.check is None:
        return None
    try:
        return values.section.check(document, source)
    except ConfigError as exc:
        if not values.from_env:
            raise
        raise ConfigError(f"{exc} (with {', '.join(values.from_env)} from the environment)") from exc
