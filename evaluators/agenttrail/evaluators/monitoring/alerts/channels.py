"""Alert channel types: the config keys each takes and how it sends one notification.

`CHANNEL_TYPES` is the one table of them, written out here (nothing registers itself): the
config parser checks a channel's keys against it, the dispatcher sends through it, and the
evaluator asks it which channels want firing alerts posted again. To add a channel: its payload
in notify.py, a `send` function here, a row in the table, and a test in tests/evaluators/alerts.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agenttrail.collector.errors import AgentTrailError
from agenttrail.evaluators.monitoring.alerts.notify import (
    Notification,
    alertmanager_payload,
    log_line,
    slack_payload,
    webhook_payload,
)

if TYPE_CHECKING:
    from agenttrail.evaluators.monitoring.alerts.config import ChannelConfig

# The `log` channel's logger keeps the name it had before this table existed: log
# configurations route alert lines by it.
_channel_log = logging.getLogger("agenttrail.evaluators.monitoring.alerts.delivery")


class DeliveryError(AgentTrailError):
    """One attempt failed; `retry` says whether another attempt can help (not for a 4xx)."""

    def __init__(self, message: str, *, retry: bool = True) -> None:
        super().__init__(message)
        self.retry = retry


@dataclass(frozen=True, slots=True)
class ChannelType:
    """One kind of channel: what its config holds and how it delivers."""

    name: str
    keys: tuple[str, ...]  # its own config keys, beside the common ones (type, timeout, ...)
    needs_url: bool
    send: Callable[[ChannelConfig, Notification], None]  # one attempt; raises DeliveryError
    # Post firing alerts again every resend_interval (Alertmanager forgets silent ones).
    resends_firing: bool = False


def post_json(url: str, payload: object, headers: Mapping[str, str], timeout_s: float) -> None:
    """POST JSON; a non-2xx answer or a network error raises DeliveryError."""
    request = urllib.request.Request(
        url,
        data=json.dumps(payload, ensure_ascii=False).encode(),
        headers={"Content-Type": "application/json", "User-Agent": "agenttrail-alerts", **headers},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        body = exc.read()[:200].decode(errors="replace")
        retry = exc.code >= 500 or exc.code in (408, 429)
        raise DeliveryError(f"HTTP {exc.code} from {url}: {body}".strip(), retry=retry) from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DeliveryError(f"cannot reach {url}: {reason}") from exc


def _send_webhook(channel: ChannelConfig, notification: Notification) -> None:
    post_json(channel.url, webhook_payload(notification), channel.headers, channel.timeout_s)


def _send_slack(channel: ChannelConfig, notification: Notification) -> None:
    post_json(channel.url, slack_payload(notification), {}, channel.timeout_s)


def _send_alertmanager(channel: ChannelConfig, notification: Notification) -> None:
    url = channel.url.rstrip("/")
    if not url.endswith("/api/v2/alerts"):
        url += "/api/v2/alerts"
    payload = alertmanager_payload(notification, channel.resend_interval_s)
    post_json(url, payload, channel.headers, channel.timeout_s)


def _send_log(channel: ChannelConfig, notification: Notification) -> None:
    level = logging.getLevelNamesMapping()[channel.level.upper()]
    if notification.status == "resolved":
        level = logging.INFO
    _channel_log.log(level, "%s", log_line(notification))


CHANNEL_TYPES: Mapping[str, ChannelType] = {
    channel.name: channel
    for channel in (
        ChannelType("webhook", ("url", "headers"), needs_url=True, send=_send_webhook),
        ChannelType("slack", ("url",), needs_url=True, send=_send_slack),
        ChannelType(
            "alertmanager",
            ("url", "headers", "resend_interval"),
            needs_url=True,
            send=_send_alertmanager,
            resends_firing=True,
        ),
        ChannelType("log", ("level",), needs_url=False, send=_send_log),
    )
}


def send(channel: ChannelConfig, notification: Notification) -> None:
    """One attempt to deliver `notification` on `channel`, in that channel's format."""
    CHANNEL_TYPES[channel.type].send(channel, notification)
