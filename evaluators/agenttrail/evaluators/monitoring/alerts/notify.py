"""What a notification says, in each channel's format. Pure functions: no I/O here.

Generic webhook (POST, application/json), one object per notification:

    {"version": "1", "status": "firing" | "resolved", "kind": "firing" | "repeat" | "resolved",
     "rule": "checkout-failures", "severity": "critical",
     "labels": {"alertname": "checkout-failures", "severity": "critical", "agent": "checkout", ...},
     "group": {"agent": "checkout"}, "annotations": {"summary": "...", "description": "..."},
     "value": 0.31, "threshold": 0.1, "startsAt": "2026-11-21T10:00:00.000Z",
     "endsAt": null | "2026-11-21T10:30:00.000Z", "fingerprint": "3f2a...",
     "generatorURL": "http://127.0.0.1:4318/console/alerts/checkout-failures?fingerprint=3f2a..."}

Slack incoming webhook: `text` (the fallback shown in notifications) and `blocks`.
Prometheus Alertmanager API v2: POST /api/v2/alerts with a list of
`{labels, annotations, startsAt, endsAt, generatorURL}`; labels identify (and de-duplicate) an
alert there, annotations are informational; every value is a string.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agenttrail.evaluators.monitoring.timespec import iso


@dataclass(frozen=True, slots=True)
class Notification:
    kind: str  # firing | repeat | resolved | refresh (Alertmanager keep-alive)
    rule: str
    fingerprint: str
    severity: str
    labels: Mapping[str, str]  # alertname, severity, the rule's labels, the group's
    group: Mapping[str, str]
    annotations: Mapping[str, str]
    value: float | None
    threshold: float | None
    starts_at: float
    ends_at: float | None  # resolved alerts only
    generator_url: str
    at: float  # when it was decided

    @property
    def status(self) -> str:
        return "resolved" if self.kind == "resolved" else "firing"

    def headline(self) -> str:
        group = ", ".join(f"{key}={value}" for key, value in self.group.items()) or "all runs"
        return f"[{self.status.upper()}] {self.rule} ({self.severity}) {group}"


def webhook_payload(notification: Notification) -> dict[str, Any]:
    return {
        "version": "1",
        "status": notification.status,
        "kind": notification.kind,
        "rule": notification.rule,
        "severity": notification.severity,
        "labels": dict(notification.labels),
        "group": dict(notification.group),
        "annotations": dict(notification.annotations),
        "value": notification.value,
        "threshold": notification.threshold,
        "startsAt": iso(notification.starts_at),
        "endsAt": iso(notification.ends_at),
        "fingerprint": notification.fingerprint,
        "generatorURL": notification.generator_url,
    }


_SLACK_ICON = {"firing": ":rotating_light:", "resolved": ":white_check_mark:"}


def slack_payload(notification: Notification) -> dict[str, Any]:
    status = notification.status
    summary = notification.annotations.get("summary", "")
    wording = {
        "firing": "is firing",
        "repeat": "is still firing",
        "refresh": "is still firing",
        "resolved": "is resolved",
    }[notification.kind]
    text = f"{_SLACK_ICON[status]} {notification.headline()} {wording}: {summary}"
    fields = [f"*Severity:* {notification.severity}"]
    fields += [f"*{key}:* {value}" for key, value in notification.group.items()]
    if notification.value is not None:
        fields.append(f"*Value:* {notification.value:.4g}")
    if notification.threshold is not None:
        fields.append(f"*Threshold:* {notification.threshold:.4g}")
    since = f"since {iso(notification.starts_at)}"
    if notification.ends_at is not None:
        since += f", resolved {iso(notification.ends_at)}"
    description = notification.annotations.get("description", "")
    return {
        "text": text,
        "blocks": [
            {
                "type": "header",
                "text": {"type": "plain_text", "text": f"[{status.upper()}] {notification.rule}"[:150]},
            },
            {"type": "section", "text": {"type": "mrkdwn", "text": f"{summary}\n{description}".strip()}},
            {"type": "section", "fields": [{"type": "mrkdwn", "text": field} for field in fields[:10]]},
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": f"{since} · <{notification.generator_url}|details>"}],
            },
        ],
    }


def alertmanager_payload(notification: Notification, resend_interval_s: float) -> list[dict[str, Any]]:
    """Alertmanager's postable alert. A firing alert's endsAt lies four resend intervals ahead (as
    Prometheus sets it), so Alertmanager resolves it by itself if agenttrail stops sending."""
    ends_at = notification.ends_at
    if notification.status == "firing":
        ends_at = notification.at + 4 * resend_interval_s
    annotations = {key: str(value) for key, value in notification.annotations.items()}
    if notification.value is not None:
        annotations["value"] = f"{notification.value:g}"
    if notification.threshold is not None:
        annotations["threshold"] = f"{notification.threshold:g}"
    return [
        {
            "labels": {key: str(value) for key, value in notification.labels.items()},
            "annotations": annotations,
            "startsAt": iso(notification.starts_at),
            "endsAt": iso(ends_at),
            "generatorURL": notification.generator_url,
        }
    ]


def log_line(notification: Notification) -> str:
    summary = notification.annotations.get("summary", "")
    return f"alert {notification.kind}: {notification.headline()}: {summary} [{notification.fingerprint}]"
