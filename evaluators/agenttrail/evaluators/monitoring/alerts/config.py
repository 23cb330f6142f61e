"""The `alerts:` section of the config file: rules, channels and evaluation settings.

Every key is checked. An unknown key, kind or channel, a bad duration or a template naming a
field that does not exist raises ConfigError naming the file, the rule (or channel) and the
key: a typo must never silently disable an alert.

    alerts:
      evaluation_interval: 30s
      external_url: https://agenttrail.example.com   # base of generatorURL links (default: the
                                                     # sidecar's own --http address)
      channels:
        oncall: {type: slack, url: https://hooks.slack.com/services/...}
      rules:
        - name: checkout-failure-spike
          kind: failure_rate_spike
          params: {window: 15m, baseline: 24h, factor: 3, floor: 0.05, min_runs: 30}
          for: 5m
          severity: critical
          filter: {agent: checkout}
          channels: [oncall]
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from agenttrail.collector.config import read_config_document
from agenttrail.collector.errors import ConfigError
from agenttrail.evaluators.monitoring.alerts.channels import CHANNEL_TYPES
from agenttrail.evaluators.monitoring.alerts.conditions import (
    GROUP_COLUMNS,
    KINDS,
    Condition,
    Observation,
    ParamError,
    Scope,
)
from agenttrail.evaluators.monitoring.alerts.parsing import parse_bool, parse_count, parse_text
from agenttrail.evaluators.monitoring.timespec import format_duration, parse_duration

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
LOG_LEVELS = ("info", "warning", "error", "critical")
_RULE_KEYS = (
    "name",
    "kind",
    "params",
    "for",
    "severity",
    "labels",
    "annotations",
    "summary",
    "filter",
    "group_by",
    "channels",
    "repeat_interval",
    "send_resolved",
)
_SETTINGS_KEYS = ("rules", "channels", "evaluation_interval", "external_url", "queue_size")
_COMMON_CHANNEL_KEYS = ("type", "timeout", "max_attempts", "backoff", "max_backoff")


@dataclass(frozen=True, slots=True)
class ChannelConfig:
    """Where notifications go, and how hard to try."""

    name: str
    type: str  # a key of channels.CHANNEL_TYPES
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 5.0  # per attempt
    max_attempts: int = 4
    backoff_s: float = 1.0  # before the 2nd attempt; doubles after each failure
    max_backoff_s: float = 60.0
    # Alertmanager forgets an alert it has not heard of for resolve_timeout (5m by default):
    # firing alerts are posted again this often, with endsAt four intervals ahead (as Prometheus does).
    resend_interval_s: float = 60.0
    level: str = "warning"  # log channel


LOG_CHANNEL = ChannelConfig("log", "log")


@dataclass(frozen=True, slots=True)
class AlertRule:
    name: str
    condition: Condition
    scope: Scope = field(default_factory=Scope)
    for_s: float = 0.0
    severity: str = "warning"
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)  # templates; `summary` always set
    channels: tuple[str, ...] = ("log",)
    repeat_interval_s: float = 4 * 3600.0
    send_resolved: bool = True

    @property
    def kind(self) -> str:
        return self.condition.KIND

    def alert_labels(self, group: Mapping[str, str]) -> dict[str, str]:
        """An alert's identifying labels: `alertname` (as Alertmanager wants), severity, rule's, group's."""
        return {"alertname": self.name, "severity": self.severity, **self.labels, **group}

    def render_annotations(self, observation: Observation) -> dict[str, str]:
        values = self._template_values(observation.labels, observation.value, observation.threshold)
        values["detail"] = observation.detail
        rendered = {key: _render(template, values) for key, template in self.annotations.items()}
        rendered.setdefault("description", observation.detail)
        return rendered

    def _template_values(
        self, group: Mapping[str, str], value: float | None, threshold: float | None
    ) -> dict[str, Any]:
        nan = float("nan")
        return {
            **self.condition.template_fields(),
            **self.labels,
            **group,
            "rule": self.name,
            "severity": self.severity,
            "value": nan if value is None else value,
            "threshold": nan if threshold is None else threshold,
            "group": ", ".join(f"{key}={val}" for key, val in group.items()) or "all runs",
            "detail": "",
        }


def fingerprint(rule: str, group: Mapping[str, str]) -> str:
    """The de-duplication key of one alert: its rule and group labels, nothing that changes."""
    canonical = json.dumps([rule, sorted(group.items())], ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _render(template: str, values: Mapping[str, Any]) -> str:
    try:
        return template.format_map(values)
    except (KeyError, ValueError, IndexError, AttributeError, TypeError):
        return template  # validated at load; a surprise value must not cost the notification


@dataclass(frozen=True, slots=True)
class AlertsConfig:
    rules: tuple[AlertRule, ...] = ()
    channels: Mapping[str, ChannelConfig] = field(default_factory=lambda: {"log": LOG_CHANNEL})
    evaluation_interval_s: float = 30.0
    external_url: str | None = None  # None: the sidecar's own HTTP address (see generator_url)
    queue_size: int = 1000  # notifications waiting per channel before new ones are dropped

    def rule(self, name: str) -> AlertRule:
        for rule in self.rules:
            if rule.name == name:
                return rule
        known = ", ".join(rule.name for rule in self.rules) or "none are configured"
        raise ConfigError(f"no alert rule named {name!r} (rules: {known})")

    def generator_url(self, served_at: str, rule: str, fingerprint: str) -> str:
        """The link notifications carry: the web console's page for the rule, under `external_url`
        (for a sidecar behind a proxy) or else `served_at`, the sidecar's own HTTP base URL."""
        base = (self.external_url or served_at).rstrip("/")
        return f"{base}/console/alerts/{quote(rule, safe='')}?fingerprint={fingerprint}"

    @classmethod
    def from_file(cls, path: str | Path | None) -> AlertsConfig:
        if not path:
            return cls()
        section = read_config_document(path, "alerts").get("alerts")
        if section is None:
            return cls()
        return cls.from_mapping(section, f"config file {path}")

    @classmethod
    def from_mapping(cls, section: Any, source: str = "config") -> AlertsConfig:
        where = _Where(source, "alerts")
        section = where.mapping(section, _SETTINGS_KEYS)
        channels = {"log": LOG_CHANNEL}
        for name, spec in where.mapping(section.get("channels") or {}, None).items():
            channels[str(name)] = _channel(str(name), spec, where.child(f"channels.{name}"))
        rules: list[AlertRule] = []
        raw_rules = section.get("rules") or []
        if not isinstance(raw_rules, list):
            raise where.error("rules", "must be a list of rules")
        for index, spec in enumerate(raw_rules):
            rule = _rule(spec, index, channels, where)
            if any(existing.name == rule.name for existing in rules):
                raise where.error(f"rules[{index}].name", f"{rule.name!r} is used by another rule")
            rules.append(rule)
        values: dict[str, Any] = {}
        if "evaluation_interval" in section:
            values["evaluation_interval_s"] = where.parse(
                section, "evaluation_interval", parse_duration, positive=True
            )
        if "external_url" in section:
            values["external_url"] = where.parse(section, "external_url", parse_text)
        if "queue_size" in section:
            values["queue_size"] = where.parse(section, "queue_size", parse_count)
        return cls(rules=tuple(rules), channels=channels, **values)


class _Where:
    """Where in the file a value sits, for error messages: `config file x.yaml: alerts.rules[name].for`."""

    def __init__(self, source: str, path: str) -> None:
        self.source = source
        self.path = path

    def child(self, path: str) -> _Where:
        return _Where(self.source, f"{self.path}.{path}")

    def error(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"{self.source}: {self.path}.{key}: {message}")

    def mapping(self, value: Any, known: tuple[str, ...] | None) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ConfigError(f"{self.source}: {self.path} must be a mapping, got {type(value).__name__}")
        if known is not None:
            unknown = sorted(str(key) for key in value if key not in known)
            if unknown:
                raise self.error(unknown[0], f"unknown key; known keys: {', '.join(known)}")
        return value

    def parse(
        self, section: Mapping[str, Any], key: str, parse: Callable[[Any], Any], *, positive: bool = False
    ) -> Any:
        try:
            value = parse(section[key])
        except ValueError as exc:
            raise self.error(key, str(exc)) from exc
        if positive and not value > 0:
            raise self.error(key, f"{section[key]!r} must be greater than 0")
        return value


def _strings(where: _Where, key: str, value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) and item for item in items):
        raise where.error(key, f"{value!r} must be a string or a list of strings")
    return tuple(items)


def _string_map(where: _Where, key: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise where.error(key, "must be a mapping of names to strings")
    for name, item in value.items():
        if not isinstance(item, str | int | float) or isinstance(item, bool):
            raise where.error(f"{key}.{name}", f"{item!r} must be a string")
    return {str(name): str(item) for name, item in value.items()}


def _channel(name: str, spec: Any, where: _Where) -> ChannelConfig:
    if not isinstance(spec, dict):
        raise ConfigError(f"{where.source}: {where.path} must be a mapping with a `type`")
    kind = spec.get("type")
    channel_type = CHANNEL_TYPES.get(kind) if isinstance(kind, str) else None
    if channel_type is None:
        raise where.error("type", f"{kind!r} is not a channel type; use one of {', '.join(CHANNEL_TYPES)}")
    where.mapping(spec, _COMMON_CHANNEL_KEYS + channel_type.keys)
    values: dict[str, Any] = {}
    if channel_type.needs_url:
        if "url" not in spec:
            raise where.error("url", f"required for a {kind} channel")
        url = where.parse(spec, "url", parse_text)
        if not url.startswith(("http://", "https://")):
            raise where.error("url", f"{url!r} must be an http:// or https:// URL")
        values["url"] = url
    if "headers" in spec:
        values["headers"] = _string_map(where, "headers", spec["headers"])
    if "level" in spec:
        if spec["level"] not in LOG_LEVELS:
            raise where.error("level", f"{spec['level']!r} is not one of {', '.join(LOG_LEVELS)}")
        values["level"] = spec["level"]
    for key, attribute in (
        ("timeout", "timeout_s"),
        ("backoff", "backoff_s"),
        ("max_backoff", "max_backoff_s"),
        ("resend_interval", "resend_interval_s"),
    ):
        if key in spec:
            values[attribute] = where.parse(spec, key, parse_duration, positive=True)
    if "max_attempts" in spec:
        values["max_attempts"] = where.parse(spec, "max_attempts", parse_count)
    return ChannelConfig(name=name, type=channel_type.name, **values)


def _rule(spec: Any, index: int, channels: Mapping[str, ChannelConfig], parent: _Where) -> AlertRule:
    if not isinstance(spec, dict):
        raise parent.error(f"rules[{index}]", "must be a mapping with at least `name` and `kind`")
    name = spec.get("name")
    if not isinstance(name, str) or not name.strip():
        raise parent.error(f"rules[{index}].name", "every rule needs a name (a non-empty string)")
    where = parent.child(f"rules[{name}]")
    where.mapping(spec, _RULE_KEYS)
    kind = spec.get("kind")
    if kind not in KINDS:
        raise where.error("kind", f"{kind!r} is not a rule kind; use one of {', '.join(KINDS)}")
    params = spec.get("params") or {}
    if not isinstance(params, dict):
        raise where.error("params", "must be a mapping of parameters")
    try:
        condition = KINDS[kind].from_params(params)
    except ParamError as exc:
        raise where.error(f"params.{exc.key}", str(exc)) from exc
    values: dict[str, Any] = {}
    if "for" in spec:
        values["for_s"] = where.parse(spec, "for", parse_duration)
    if "repeat_interval" in spec:
        values["repeat_interval_s"] = where.parse(spec, "repeat_interval", parse_duration, positive=True)
    if "send_resolved" in spec:
        values["send_resolved"] = where.parse(spec, "send_resolved", parse_bool)
    if "severity" in spec:
        values["severity"] = where.parse(spec, "severity", parse_text)
    scope = _scope(spec, where)
    labels = _string_map(where, "labels", spec.get("labels") or {})
    reserved = {"alertname", "severity", *GROUP_COLUMNS, *condition.LABELS}
    for label in labels:
        if not _LABEL_NAME.match(label):
            raise where.error(
                f"labels.{label}", "a label name is letters, digits and _, not starting with a digit"
            )
        if label in reserved:
            raise where.error(f"labels.{label}", f"set by agenttrail; reserved names: {sorted(reserved)}")
    annotations = _string_map(where, "annotations", spec.get("annotations") or {})
    if "summary" in spec:
        annotations["summary"] = where.parse(spec, "summary", parse_text)
    annotations.setdefault("summary", condition.SUMMARY)
    if "channels" in spec:
        chosen = _strings(where, "channels", spec["channels"])
        for channel in chosen:
            if channel not in channels:
                raise where.error(
                    "channels", f"no channel named {channel!r}; channels: {', '.join(sorted(channels))}"
                )
        values["channels"] = chosen
    else:
        declared = tuple(name for name in channels if name != "log")
        values["channels"] = declared or ("log",)
    rule = AlertRule(
        name=name.strip(),
        condition=condition,
        scope=scope,
        labels=labels,
        annotations=annotations,
        **values,
    )
    sample = dict.fromkeys((*scope.group_by, *condition.LABELS), "x")
    for key, template in annotations.items():
        try:
            template.format_map(rule._template_values(sample, 0.5, 0.5))
        except KeyError as exc:
            fields = sorted(rule._template_values(sample, 0.5, 0.5))
            raise where.error(
                f"annotations.{key}", f"the template names {exc} which is not one of {fields}"
            ) from exc
        except (ValueError, IndexError, AttributeError, TypeError) as exc:
            raise where.error(f"annotations.{key}", f"bad template {template!r}: {exc}") from exc
    return rule


def _scope(spec: Mapping[str, Any], where: _Where) -> Scope:
    filters = where.child("filter").mapping(spec.get("filter") or {}, ("agent", "task"))
    agents = _strings(where, "filter.agent", filters["agent"]) if "agent" in filters else ()
    tasks = _strings(where, "filter.task", filters["task"]) if "task" in filters else ()
    group_by: tuple[str, ...] = ("agent",)
    if "group_by" in spec:
        group_by = _strings(where, "group_by", spec["group_by"]) if spec["group_by"] else ()
        for label in group_by:
            if label not in GROUP_COLUMNS:
                raise where.error(
                    "group_by", f"{label!r} is not a group label; use {', '.join(GROUP_COLUMNS)}"
                )
    return Scope(agents, tasks, group_by)


def describe_rule(rule: AlertRule) -> str:
    """One line per rule for logs: kind, for, filter."""
    scope = rule.scope
    parts = [rule.kind, f"for {format_duration(rule.for_s)}", f"severity {rule.severity}"]
    if scope.agents:
        parts.append(f"agent in {list(scope.agents)}")
    if scope.tasks:
        parts.append(f"task in {list(scope.tasks)}")
    return f"{rule.name} ({', '.join(parts)})"
