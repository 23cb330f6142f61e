"""The config file sections the evaluators own, as tables the collector's loader reads, and
their one reading for the sidecar (`load`).

Each section lists its settings (type, default, help: collector/settings.py) and names its own
parser, which `serve` and `config show` run over the file (the parser judges what a table cannot:
rules, lists of judges, values that depend on each other). The composition root hands these to
the CLI's group (`Wiring.config_sections`); nothing registers itself by being imported. Plain
data at import: the parsers load inside `check`, so `agenttrail --help` does not import them.

Every scalar setting resolves env > file > default: its environment variable is
AGENTTRAIL_<SECTION>_<KEY> (`AGENTTRAIL_DRIFT_INTERVAL_S`, `AGENTTRAIL_JUDGE_DEFAULTS_MODEL`), and
`config show` prints its source. Lists, mappings and rules (metrics, rules, channels, budgets,
headers, the `judges:` list) come from the file only: they have no one-line form. A bad value is
a ConfigError naming the variable (or the file), the key and what is accepted.
`tests/evaluators/test_config_sections.py` holds each table's defaults equal to its parser's.

`load` is the one reading of these sections for a sidecar: the file once, the environment over
it, each section's parser run, the typed results handed to the install functions by the
composition root (a judges reload reads the file again through `load_judges`). The CLI commands
outside `serve` read the section they need the same way (`load_evaluators`, `load_judges`,
`load_drift`, `load_alerts`) and hand the parsed section to their wing's service.

Where to add a setting of one of these sections: its parser first (the dataclass field and the
key it reads), then a row here.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from agenttrail.collector.config import (
    check_section,
    read_config_document,
    resolve_section,
    section_of,
    with_sections,
)
from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.settings import (
    BOOL,
    COUNT,
    FRACTION,
    LIST,
    MAPPING,
    NAMES,
    NUMBER,
    OPTIONAL_TEXT,
    POSITIVE_INT,
    POSITIVE_SECONDS,
    SECONDS,
    TEXT,
    Kind,
    Section,
    Setting,
    choice,
)

if TYPE_CHECKING:
    from agenttrail.evaluators.judges.config import JudgeConfigs
    from agenttrail.evaluators.monitoring.alerts.config import AlertsConfig
    from agenttrail.evaluators.monitoring.drift_monitor import DriftConfig
    from agenttrail.evaluators.monitoring.export_config import MetricsExportConfig
    from agenttrail.evaluators.scoring.worker import EvaluatorConfig


def _duration(value: Any) -> Any:
    from agenttrail.evaluators.monitoring.timespec import parse_duration

    parse_duration(value)  # checked here; the section's parser reads the text as it always has
    return value


DURATION = Kind("a duration: 500ms, 30s, 5m, 1h30m, 7d", str, _duration)


def _rows(section: str, *rows: tuple[str, Kind, Any, str]) -> tuple[Setting, ...]:
    """Rows (name, kind, default, help) of a section: scalars get AGENTTRAIL_<SECTION>_<KEY>,
    lists and mappings (no one-line form) are read from the file only."""
    return tuple(
        Setting(
            name,
            kind,
            default,
            help,
            secret=name in ("otlp_headers", "api_key"),
            env_var=kind.python not in (list, dict),
            env_prefix=f"AGENTTRAIL_{section.upper()}_",
        )
        for name, kind, default, help in rows
    )


def _check_evaluators(document: Mapping[str, Any], source: str) -> EvaluatorConfig:
    from agenttrail.evaluators.scoring.worker import EvaluatorConfig

    return EvaluatorConfig.from_mapping(section_of(document, "evaluators", _path(source)), source)


def _check_drift(document: Mapping[str, Any], source: str) -> DriftConfig:
    from agenttrail.evaluators.monitoring.drift_monitor import DriftConfig

    return DriftConfig.from_mapping(section_of(document, "drift", _path(source)), source)


def _check_metrics_export(document: Mapping[str, Any], source: str) -> MetricsExportConfig:
    from agenttrail.evaluators.monitoring.export_config import MetricsExportConfig

    return MetricsExportConfig.from_mapping(section_of(document, "metrics_export", _path(source)), source)


def _check_alerts(document: Mapping[str, Any], source: str) -> AlertsConfig:
    from agenttrail.evaluators.monitoring.alerts.config import AlertsConfig

    if document.get("alerts") is None:
        return AlertsConfig()
    return AlertsConfig.from_mapping(document["alerts"], source)


def _check_judges(document: Mapping[str, Any], source: str) -> JudgeConfigs:
    """As the judge worker and the evaluation API read them (judges/config.py JudgeConfigs)."""
    from agenttrail.evaluators.judges.config import JudgeConfigs

    return JudgeConfigs.from_document(document, source)


def _path(source: str) -> str:
    return source.removeprefix("config file ")


EVALUATORS = Section(
    "evaluators",
    "the online scoring of runs against reference trajectories (scoring/worker.py)",
    _rows(
        "evaluators",
        (
            "metrics",
            NAMES,
            (
                "trajectory_exact_match",
                "trajectory_in_order_match",
                "trajectory_any_order_match",
                "trajectory_precision",
                "trajectory_recall",
            ),
            "metrics scored on each run (metrics/registry.py)",
        ),
        ("sample_rate", FRACTION, 1.0, "share of runs scored (by trace id, shared with the judges)"),
        ("rules", LIST, (), "per agent/task sample rates: [{rate, agent, task}], the first match wins"),
        ("always_sample_failures", BOOL, True, "failed runs are always scored"),
        ("poll_interval_s", SECONDS, 0.5, "seconds between looks for new runs"),
        ("lookback_s", POSITIVE_INT, 86_400, "seconds back the worker looks for unscored runs"),
        ("batch_size", POSITIVE_INT, 2000, "runs scored per query of the queue"),
        (
            "full_scan_interval_s",
            SECONDS,
            60.0,
            "seconds between queue queries over the whole lookback (between them, only runs "
            "assembled since the queue was last empty)",
        ),
        (
            "processes",
            COUNT,
            0,
            "worker processes that compute the metrics, off the receivers' interpreter (0: in "
            "serve's own; each costs about 25 MiB)",
        ),
    ),
    check=_check_evaluators,
)

JUDGE_DEFAULTS = Section(
    "judge_defaults",
    "model settings every judge inherits (its own keys win); also the evaluation API's inline judges",
    _rows(
        "judge_defaults",
        ("model", OPTIONAL_TEXT, None, "model name, e.g. gpt-4o-mini"),
        ("base_url", OPTIONAL_TEXT, None, "OpenAI-compatible endpoint (none: api.openai.com)"),
        ("api_key", OPTIONAL_TEXT, None, "API key (prefer api_key_env)"),
        ("api_key_env", TEXT, "OPENAI_API_KEY", "environment variable holding the API key"),
        ("timeout_s", SECONDS, 60.0, "seconds per model call"),
        ("temperature", NUMBER, 0.0, "sampling temperature"),
        ("max_tokens", POSITIVE_INT, 1024, "answer token limit"),
        ("max_retries", COUNT, 3, "retries of a failed call"),
        ("concurrency", POSITIVE_INT, 4, "calls in flight per client"),
        (
            "response_format",
            choice("auto", "json_schema", "json_object", "none"),
            "auto",
            "auto, json_schema, json_object or none",
        ),
        ("prompt_price_per_1m", NUMBER, 0.0, "currency per 1M prompt tokens"),
        ("completion_price_per_1m", NUMBER, 0.0, "currency per 1M completion tokens"),
        ("budget", MAPPING, {}, "tokens_per_hour/day, cost_per_hour/day: judging pauses when spent"),
        ("backoff_base_s", SECONDS, 0.5, "first retry wait, doubled each retry"),
        ("backoff_max_s", SECONDS, 30.0, "longest retry wait"),
        ("retry_after_max_s", SECONDS, 120.0, "longest Retry-After the client honours"),
    ),
    check=_check_judges,
    open=True,  # a judge type and its options may be inherited too; the judges' parser checks them
)

JUDGES = Section(
    "judges",
    "the LLM judges run online: [{name, type, sample_rate, agents, tasks, failure, ...}] (file only)",
    check=_check_judges,
    is_list=True,
)

ALERTS = Section(
    "alerts",
    "alert rules over stored runs and scores, and where notifications go (channels, rules: file only)",
    _rows(
        "alerts",
        ("evaluation_interval", DURATION, "30s", "how often the rules are evaluated"),
        ("external_url", OPTIONAL_TEXT, None, "base of the links notifications carry (none: --http)"),
        ("queue_size", POSITIVE_INT, 1000, "notifications waiting per channel before new ones are dropped"),
        ("channels", MAPPING, {}, "named channels: {name: {type: slack|webhook|alertmanager, url, ...}}"),
        ("rules", LIST, (), "rules: [{name, kind, params, for, severity, filter, channels, ...}]"),
    ),
    check=_check_alerts,
)

DRIFT = Section(
    "drift",
    "the continuous drift check: recent window against a baseline, into drift_events",
    _rows(
        "drift",
        ("enabled", BOOL, True, "run the drift check in serve"),
        ("interval_s", POSITIVE_SECONDS, 300.0, "seconds between checks"),
        ("metrics", NAMES, (), "only these metrics (empty: all)"),
        ("agent", OPTIONAL_TEXT, None, "only this agent"),
        ("task", OPTIONAL_TEXT, None, "only this task"),
        ("recent", DURATION, "1h", "the recent window"),
        ("baseline", DURATION, "24h", "a rolling baseline just before the recent window"),
        ("baseline_from", OPTIONAL_TEXT, None, "or a fixed baseline period: its start (ISO 8601)"),
        ("baseline_to", OPTIONAL_TEXT, None, "and its end"),
        ("baseline_version", OPTIONAL_TEXT, None, "or a pinned agent version"),
        ("min_samples", POSITIVE_INT, 30, "fewer values in a window: insufficient data, never drift"),
        ("alpha", FRACTION, 0.01, "significance after the Benjamini-Hochberg adjustment"),
        (
            "min_effect",
            MAPPING,
            {"cohens_h": 0.2, "cliffs_delta": 0.147, "ks_d": 0.1, "cramers_v": 0.1},
            "least effect size per test that counts as drift",
        ),
        ("change_delta", NUMBER, 0.5, "Page-Hinkley tolerance, in baseline sd"),
        ("change_threshold", NUMBER, 12.0, "Page-Hinkley alarm threshold"),
        ("rate_change_threshold", NUMBER, 10.0, "Bernoulli CUSUM alarm threshold (log-likelihood ratio)"),
        ("max_samples", POSITIVE_INT, 20_000, "larger windows are sampled to this many runs"),
    ),
    check=_check_drift,
)

METRICS_EXPORT = Section(
    "metrics_export",
    "run, tool-call and score metrics for Prometheus (/metrics) and OTLP",
    _rows(
        "metrics_export",
        ("prometheus", BOOL, True, "serve /metrics on the HTTP port"),
        ("otlp_endpoint", OPTIONAL_TEXT, None, "push OTLP metrics and evaluation events here (none: off)"),
        ("otlp_protocol", choice("grpc", "http"), "grpc", "grpc or http"),
        # {} as the other mappings: the parser's () (pairs, so the config hashes) showed as `[]`
        ("otlp_headers", MAPPING, {}, "headers sent with OTLP pushes (e.g. an API key)"),
        ("evaluation_events", BOOL, True, "gen_ai.evaluation.result log events, when otlp_endpoint is set"),
        ("interval_s", POSITIVE_SECONDS, 10.0, "how often new runs and scores are read and pushed"),
        ("settle_s", SECONDS, 5.0, "rows younger than this are read next time"),
        ("max_label_values", POSITIVE_INT, 100, "distinct values kept per label"),
    ),
    check=_check_metrics_export,
)

CONFIG_SECTIONS: Final[tuple[Section, ...]] = (
    EVALUATORS,
    JUDGE_DEFAULTS,
    JUDGES,
    ALERTS,
    DRIFT,
    METRICS_EXPORT,
)


@dataclass(frozen=True, slots=True)
class EvaluatorSettings:
    """Every evaluator section, resolved (env > file > default) and parsed: what the composition
    root hands each part of the sidecar."""

    evaluators: EvaluatorConfig
    drift: DriftConfig
    metrics_export: MetricsExportConfig
    alerts: AlertsConfig
    judges: JudgeConfigs  # `judges:` with `judge_defaults:` merged in, and the inline judges' model
    config_file: str | None = None


def load(config_file: str | None, environ: Mapping[str, str] | None = None) -> EvaluatorSettings:
    """The evaluators' sections of `config_file` (read once) with the environment's values over
    them, each checked by its table and built by its parser; ConfigError names the variable or
    the file, the section and the key."""
    parsed = _parse(_document(config_file), config_file, os.environ if environ is None else environ)
    return EvaluatorSettings(
        evaluators=parsed["evaluators"],
        drift=parsed["drift"],
        metrics_export=parsed["metrics_export"],
        alerts=parsed["alerts"],
        judges=parsed["judges"],
        config_file=config_file,
    )


def load_judges(config_file: str | None, environ: Mapping[str, str] | None = None) -> JudgeConfigs:
    """The judges' sections alone, as `load` reads them: what a judges reload reads again."""
    judges: JudgeConfigs = _load_one(config_file, environ, (JUDGE_DEFAULTS, JUDGES), "judges")
    return judges


def load_evaluators(config_file: str | None, environ: Mapping[str, str] | None = None) -> EvaluatorConfig:
    """The `evaluators:` section alone, as `load` reads it: what `agenttrail worker` scores with."""
    evaluator: EvaluatorConfig = _load_one(config_file, environ, (EVALUATORS,), "evaluators")
    return evaluator


def load_drift(config_file: str | None, environ: Mapping[str, str] | None = None) -> DriftConfig:
    """The `drift:` section alone, as `load` reads it: what `agenttrail drift` computes with."""
    drift: DriftConfig = _load_one(config_file, environ, (DRIFT,), "drift")
    return drift


def load_alerts(config_file: str | None, environ: Mapping[str, str] | None = None) -> AlertsConfig:
    """The `alerts:` section alone, as `load` reads it: what `agenttrail alerts test` replays."""
    alerts: AlertsConfig = _load_one(config_file, environ, (ALERTS,), "alerts")
    return alerts


def _load_one(
    config_file: str | None, environ: Mapping[str, str] | None, sections: tuple[Section, ...], name: str
) -> Any:
    """Section `name` parsed from `sections` of the file, the environment over it (as `load`)."""
    environ = os.environ if environ is None else environ
    return _parse(_document(config_file), config_file, environ, sections)[name]


log = logging.getLogger(__name__)

# The sections a reload (SIGHUP) takes (`agenttrail judges reload` the judges'); the others wait
# for a restart.
RELOADED_SECTIONS: Final = frozenset({"judges", "judge_defaults", "alerts"})


def restart_needed_check(config_file: str | None) -> Callable[[], list[str]]:
    """A reload hook that reads `config_file` again and warns, naming them, about the sections
    edited since now that a reload does not take (drift, collector...), so an edited drift
    setting followed by `systemctl reload` does not look applied; returns those sections.
    An unreadable file is left to the judges' reload to report."""
    started = _document(config_file)

    def check() -> list[str]:
        try:
            now = _document(config_file)
        except AgentTrailError:
            return []
        changed = sorted(
            name
            for name in set(started) | set(now)
            if name not in RELOADED_SECTIONS and started.get(name) != now.get(name)
        )
        if changed:
            log.warning(
                "%s: section(s) %s changed since serve started; a reload takes only %s, so they "
                "take effect at the next restart",
                config_file,
                ", ".join(changed),
                ", ".join(sorted(RELOADED_SECTIONS)),
            )
        return changed

    return check


def _document(config_file: str | None) -> dict[str, Any]:
    return read_config_document(config_file) if config_file else {}


def _parse(
    document: Mapping[str, Any],
    config_file: str | None,
    environ: Mapping[str, str],
    sections: tuple[Section, ...] | None = None,
) -> dict[str, Any]:
    """Each section's parser over the effective document. `judge_defaults` and `judges` share
    one parser (the judges' configs), run once with the variables of both."""
    values = {
        section.name: resolve_section(section, document, config_file, environ)
        for section in sections or CONFIG_SECTIONS
    }
    effective = with_sections(document, list(values.values()))
    source = f"config file {config_file}" if config_file else "configuration (no config file)"
    defaults = values.pop(JUDGE_DEFAULTS.name, None)
    if defaults is not None and JUDGES.name in values:
        values[JUDGES.name] = replace(values[JUDGES.name], from_env=defaults.from_env)
    return {name: check_section(section_values, effective, source) for name, section_values in values.items()}
