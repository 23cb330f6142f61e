"""The config file sections the evaluators own, as tables the collector's loader reads.

Each section lists its settings (type, default, help: collector/settings.py) and names its own
parser, which `serve` and `config show` run over the file (the parser judges what a table cannot:
rules, lists of judges, values that depend on each other). The composition root hands these to
the CLI's group (`Wiring.config_sections`); nothing registers itself by being imported. Plain
data at import: the parsers load inside `check`, so `agenttrail --help` does not import them.
These settings come from the file or their default (no env var, no flag).
`tests/evaluators/test_config_sections.py` holds each table's defaults equal to its parser's.

Where to add a setting of one of these sections: its parser first (the dataclass field and the
key it reads), then a row here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from agenttrail.collector.config import section_of
from agenttrail.collector.settings import (
    BOOL,
    COUNT,
    DURATION,
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
    Section,
    Setting,
)


def _file(*rows: tuple[str, Any, Any, str]) -> tuple[Setting, ...]:
    """Rows (name, kind, default, help) of a section read from the file only."""
    return tuple(
        Setting(name, kind, default, help, secret=name in ("otlp_headers", "api_key"), env_var=False)
        for name, kind, default, help in rows
    )


def _check_evaluators(document: Mapping[str, Any], source: str) -> None:
    from agenttrail.evaluators.scoring.worker import EvaluatorConfig

    EvaluatorConfig.from_mapping(section_of(document, "evaluators", _path(source)), source)


def _check_drift(document: Mapping[str, Any], source: str) -> None:
    from agenttrail.evaluators.monitoring.drift_monitor import DriftConfig

    DriftConfig.from_mapping(section_of(document, "drift", _path(source)), source)


def _check_metrics_export(document: Mapping[str, Any], source: str) -> None:
    from agenttrail.evaluators.monitoring.export_config import MetricsExportConfig

    MetricsExportConfig.from_mapping(section_of(document, "metrics_export", _path(source)), source)


def _check_alerts(document: Mapping[str, Any], source: str) -> None:
    from agenttrail.evaluators.monitoring.alerts.config import AlertsConfig

    if document.get("alerts") is not None:
        AlertsConfig.from_mapping(document["alerts"], source)


def _check_judges(document: Mapping[str, Any], source: str) -> None:
    """As the judge worker and the evaluation API read them (judges/config.py, api/judges.py)."""
    from agenttrail.evaluators.judges.client import JudgeSettings
    from agenttrail.evaluators.judges.config import JudgesConfig

    JudgesConfig.from_document(document, source)
    defaults = document.get("judge_defaults")
    if isinstance(defaults, dict) and defaults.get("model"):
        JudgeSettings.from_mapping(defaults, f"{source}: judge_defaults")


def _path(source: str) -> str:
    return source.removeprefix("config file ")


EVALUATORS = Section(
    "evaluators",
    "the online scoring of runs against reference trajectories (scoring/worker.py)",
    _file(
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
    ),
    check=_check_evaluators,
)

JUDGE_DEFAULTS = Section(
    "judge_defaults",
    "model settings every judge inherits (its own keys win); also the evaluation API's inline judges",
    _file(
        ("model", OPTIONAL_TEXT, None, "model name, e.g. gpt-4o-mini"),
        ("base_url", OPTIONAL_TEXT, None, "OpenAI-compatible endpoint (none: api.openai.com)"),
        ("api_key", OPTIONAL_TEXT, None, "API key (prefer api_key_env)"),
        ("api_key_env", TEXT, "OPENAI_API_KEY", "environment variable holding the API key"),
        ("timeout_s", SECONDS, 60.0, "seconds per model call"),
        ("temperature", NUMBER, 0.0, "sampling temperature"),
        ("max_tokens", POSITIVE_INT, 1024, "answer token limit"),
        ("max_retries", COUNT, 3, "retries of a failed call"),
        ("concurrency", POSITIVE_INT, 4, "calls in flight per client"),
        ("response_format", TEXT, "auto", "auto, json_schema, json_object or none"),
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
    "the LLM judges run online: [{name, type, sample_rate, agents, tasks, failure, ...}]",
    check=_check_judges,
    is_list=True,
)

ALERTS = Section(
    "alerts",
    "alert rules over stored runs and scores, and where notifications go",
    _file(
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
    _file(
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
    _file(
        ("prometheus", BOOL, True, "serve /metrics on the HTTP port"),
        ("otlp_endpoint", OPTIONAL_TEXT, None, "push OTLP metrics and evaluation events here (none: off)"),
        ("otlp_protocol", TEXT, "grpc", "grpc or http"),
        ("otlp_headers", MAPPING, (), "headers sent with OTLP pushes (e.g. an API key)"),
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
