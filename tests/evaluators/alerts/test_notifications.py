"""End to end: rules over real chDB data, the evaluator, and a real webhook server on loopback."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest

from agenttrail.evaluators.monitoring.alerts.config import AlertsConfig
from agenttrail.evaluators.monitoring.alerts.evaluator import AlertEvaluator
from agenttrail.evaluators.monitoring.alerts.history import AlertFilter, query_alerts, query_history

from .data import Clock, insert_runs
from .webhook_server import WebhookServer

DELIVERY_LOGGER = "agenttrail.evaluators.monitoring.alerts.delivery"

SPIKE = {
    "name": "checkout-failures",
    "kind": "failure_rate_spike",
    "params": {"window": "15m", "baseline": "24h", "floor": 0.1, "min_runs": 20},
    "severity": "critical",
    "labels": {"team": "payments"},
    "summary": "{agent} failing at {value:.0%}",
    "repeat_interval": "1h",
}


def channel(webhook: WebhookServer, kind: str, path: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "url": webhook.url(path), "backoff": "50ms", "max_attempts": 3, **extra}


Evaluators = Callable[..., tuple[AlertEvaluator, Clock]]


@pytest.fixture
def evaluators(alert_store: Any) -> Iterator[Evaluators]:
    """Evaluators over the test's store, with their channel threads running and a test-driven clock."""
    started: list[AlertEvaluator] = []

    def make(
        channels: dict[str, Any], rules: list[dict[str, Any]], clock: Clock | None = None
    ) -> tuple[AlertEvaluator, Clock]:
        config = AlertsConfig.from_mapping({"channels": channels, "rules": rules}, "test")
        clock = clock or Clock()
        evaluator = AlertEvaluator(alert_store.clone, config, clock=clock)
        evaluator.dispatcher.start()  # evaluation itself is driven by the test (run_once)
        started.append(evaluator)
        return evaluator, clock

    yield make
    for evaluator in started:
        evaluator.stop()


def history(store: Any, rule: str) -> list[dict[str, Any]]:
    return list(reversed(query_history(store, AlertFilter(all=True, rule=rule, limit=1000))))


def wait_history(store: Any, rule: str, done: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        rows = history(store, rule)
        if done(rows):
            return rows
        time.sleep(0.05)
    raise AssertionError(f"history never matched: {rows}")


def marker_delivered(
    store: Any, webhook: WebhookServer, evaluator: AlertEvaluator, clock: Clock, path: str
) -> list[Any]:
    """Everything `path` received up to a marker: a later firing (a new group of 30 runs, half of
    them failed, for every rule of `evaluator`) that the channel delivers after anything queued
    before it. A test that expects nothing more checks what came before the marker instead of
    sleeping and hoping a late notification would have arrived."""
    before = len(webhook.bodies(path))
    insert_runs(store, agent="marker", at=clock.now, count=30, failed=15)
    evaluator.run_once()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        bodies = webhook.bodies(path)
        markers = [i for i, body in enumerate(bodies) if body["group"] == {"agent": "marker"}]
        if markers:
            assert markers[0] >= before
            assert bodies[markers[0]]["kind"] == "firing"
            return bodies[: markers[0] + 1]
        time.sleep(0.02)
    raise AssertionError(f"{path}: the marker never arrived; got {webhook.bodies(path)}")


def parse_iso(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_webhook_firing_then_resolved(
    alert_store: Any, webhook: WebhookServer, evaluators: Evaluators
) -> None:
    """A spike fires one documented JSON payload, and a resolve payload once the window is clean."""
    evaluator, clock = evaluators({"hook": channel(webhook, "webhook", "/hook")}, [SPIKE])
    insert_runs(alert_store, agent="checkout", at=clock.now, count=30, failed=15)
    insert_runs(alert_store, agent="search", at=clock.now, count=30, failed=0)
    evaluator.run_once()
    (firing,) = webhook.wait_for("/hook", 1)
    assert set(firing) == {
        "version",
        "status",
        "kind",
        "rule",
        "severity",
        "labels",
        "group",
        "annotations",
        "value",
        "threshold",
        "startsAt",
        "endsAt",
        "fingerprint",
        "generatorURL",
    }
    assert (firing["status"], firing["kind"], firing["rule"], firing["severity"]) == (
        "firing",
        "firing",
        "checkout-failures",
        "critical",
    )
    assert firing["labels"] == {
        "alertname": "checkout-failures",
        "severity": "critical",
        "team": "payments",
        "agent": "checkout",
    }
    assert firing["annotations"]["summary"] == "checkout failing at 50%"
    assert "15/30 runs failed" in firing["annotations"]["description"]
    assert (firing["value"], firing["threshold"], firing["endsAt"]) == (0.5, 0.1, None)
    assert abs(parse_iso(firing["startsAt"]) - clock.now) < 0.01
    assert firing["generatorURL"].endswith(
        f"/console/alerts/checkout-failures?fingerprint={firing['fingerprint']}"
    )
    (listed,) = query_alerts(alert_store, AlertFilter())
    assert (listed["state"], listed["labels"], listed["value"]) == ("firing", {"agent": "checkout"}, 0.5)

    clock.advance(16 * 60)  # the failures leave the window
    evaluator.run_once()
    resolved = webhook.wait_for("/hook", 2)[1]
    assert (resolved["status"], resolved["kind"], resolved["fingerprint"]) == (
        "resolved",
        "resolved",
        firing["fingerprint"],
    )
    assert abs(parse_iso(resolved["endsAt"]) - clock.now) < 0.01
    assert query_alerts(alert_store, AlertFilter()) == []
    (past,) = query_alerts(alert_store, AlertFilter(all=True))
    assert past["state"] == "resolved"
    rows = wait_history(alert_store, "checkout-failures", lambda rows: len(rows) >= 7)
    assert [(r["event"], r["from"], r["to"], r["notification"], r["delivery"]) for r in rows] == [
        ("transition", "inactive", "pending", "", ""),
        ("transition", "pending", "firing", "", ""),
        ("notification", "", "", "firing", "queued"),
        ("delivery", "", "", "firing", "delivered"),
        ("transition", "firing", "resolved", "", ""),
        ("notification", "", "", "resolved", "queued"),
        ("delivery", "", "", "resolved", "delivered"),
    ]


def test_slack_format(alert_store: Any, webhook: WebhookServer, evaluators: Evaluators) -> None:
    """Slack gets text plus blocks, worded for firing and for resolved."""
    evaluator, clock = evaluators({"slack": channel(webhook, "slack", "/slack")}, [SPIKE])
    insert_runs(alert_store, agent="checkout", at=clock.now, count=30, failed=15)
    evaluator.run_once()
    clock.advance(16 * 60)
    evaluator.run_once()
    firing, resolved = webhook.wait_for("/slack", 2)
    assert set(firing) == {"text", "blocks"}
    assert firing["text"].startswith(":rotating_light: [FIRING] checkout-failures (critical) agent=checkout")
    assert "is firing: checkout failing at 50%" in firing["text"]
    assert [block["type"] for block in firing["blocks"]] == ["header", "section", "section", "context"]
    assert firing["blocks"][0]["text"] == {"type": "plain_text", "text": "[FIRING] checkout-failures"}
    assert {"type": "mrkdwn", "text": "*agent:* checkout"} in firing["blocks"][2]["fields"]
    assert resolved["text"].startswith(":white_check_mark: [RESOLVED] checkout-failures")
    assert "is resolved" in resolved["text"]


def test_alertmanager_v2_format(alert_store: Any, webhook: WebhookServer, evaluators: Evaluators) -> None:
    """POST /api/v2/alerts with Alertmanager's postable alerts; re-posted while firing; endsAt on resolve."""
    am = channel(webhook, "alertmanager", "", resend_interval="1m")
    evaluator, clock = evaluators({"am": am}, [SPIKE])
    insert_runs(alert_store, agent="checkout", at=clock.now, count=30, failed=15)
    fired_at = clock.now
    evaluator.run_once()
    (posted,) = webhook.wait_for("/api/v2/alerts", 1)
    assert isinstance(posted, list)
    (alert,) = posted
    assert set(alert) == {"labels", "annotations", "startsAt", "endsAt", "generatorURL"}
    assert alert["labels"] == {
        "alertname": "checkout-failures",
        "severity": "critical",
        "team": "payments",
        "agent": "checkout",
    }
    assert all(
        isinstance(value, str) for value in (*alert["labels"].values(), *alert["annotations"].values())
    )
    assert alert["annotations"]["summary"] == "checkout failing at 50%"
    assert abs(parse_iso(alert["startsAt"]) - fired_at) < 0.01
    assert abs(parse_iso(alert["endsAt"]) - (fired_at + 240)) < 0.01  # 4 x resend_interval ahead

    clock.advance(30)
    evaluator.run_once()  # still firing, within the resend interval: nothing posted
    clock.advance(40)
    evaluator.run_once()  # resend interval passed: a keep-alive with the same labels
    refreshed = webhook.wait_for("/api/v2/alerts", 2)[1][0]
    assert refreshed["labels"] == alert["labels"]
    assert refreshed["startsAt"] == alert["startsAt"]
    clock.advance(16 * 60)
    evaluator.run_once()
    resolved = webhook.wait_for("/api/v2/alerts", 3)[2][0]
    assert abs(parse_iso(resolved["endsAt"]) - clock.now) < 0.01
    notifications = [
        r["notification"] for r in history(alert_store, "checkout-failures") if r["event"] != "transition"
    ]
    assert "refresh" not in notifications  # keep-alives that succeed are not history


def test_one_notification_per_group_then_repeat(
    alert_store: Any, webhook: WebhookServer, evaluators: Evaluators
) -> None:
    """While firing, each group is notified once, again after repeat_interval, never per evaluation."""
    long_window = {**SPIKE, "params": {**SPIKE["params"], "window": "2h"}}
    evaluator, clock = evaluators({"hook": channel(webhook, "webhook", "/hook")}, [long_window])
    insert_runs(alert_store, agent="checkout", at=clock.now, count=30, failed=15)
    insert_runs(alert_store, agent="billing", at=clock.now, count=30, failed=20)
    for _ in range(5):
        evaluator.run_once()
        clock.advance(10)
    bodies = webhook.wait_for("/hook", 2)
    assert sorted((body["group"]["agent"], body["kind"]) for body in bodies) == [
        ("billing", "firing"),
        ("checkout", "firing"),
    ]
    clock.advance(1800)
    evaluator.run_once()  # half the repeat interval: still quiet
    clock.advance(1800)
    evaluator.run_once()
    repeats = webhook.wait_for("/hook", 4)[2:]
    assert sorted((body["group"]["agent"], body["kind"]) for body in repeats) == [
        ("billing", "repeat"),
        ("checkout", "repeat"),
    ]
    assert {body["fingerprint"] for body in repeats} == {body["fingerprint"] for body in bodies}
    *earlier, _ = marker_delivered(alert_store, webhook, evaluator, clock, "/hook")
    assert len(earlier) == 4  # nothing between the repeats and the marker, which came after


def test_failing_webhook_is_retried_recorded_and_isolated(
    alert_store: Any, webhook: WebhookServer, evaluators: Evaluators
) -> None:
    """A webhook answering 500 is tried max_attempts times and recorded as failed; the other channel
    and the next evaluations go on."""
    webhook.failing["/broken"] = 500
    channels = {
        "broken": channel(webhook, "webhook", "/broken"),
        "good": channel(webhook, "webhook", "/good"),
    }
    latency = {
        "name": "slow-runs",
        "kind": "latency_above",
        "params": {"threshold_s": 5, "min_runs": 10},
        "channels": ["good"],
    }
    evaluator, clock = evaluators(channels, [{**SPIKE, "channels": ["broken", "good"]}, latency])
    insert_runs(alert_store, agent="checkout", at=clock.now, count=30, failed=15)
    evaluator.run_once()
    webhook.wait_for("/good", 1)
    rows = wait_history(
        alert_store, "checkout-failures", lambda rows: any(r["delivery"] == "failed" for r in rows)
    )
    attempts = [
        (r["attempt"], r["delivery"]) for r in rows if r["event"] == "delivery" and r["channel"] == "broken"
    ]
    assert attempts == [(1, "retrying"), (2, "retrying"), (3, "failed")]
    failed = next(r for r in rows if r["delivery"] == "failed")
    assert failed["error"].startswith("HTTP 500 from http://127.0.0.1")
    assert webhook.attempts["/broken"] == 3
    assert evaluator.dispatcher.senders["broken"].counters.failed == 1
    # Evaluation carries on: a second rule fires later through the good channel.
    clock.advance(60)
    insert_runs(alert_store, agent="checkout", at=clock.now, count=20, latency_s=9.0)
    evaluator.run_once()
    second = webhook.wait_for("/good", 2)[1]
    assert second["rule"] == "slow-runs"
    assert evaluator.counters.errors == 0
    assert evaluator.alive() is False  # never started as a thread here; the senders are alive
    assert evaluator.dispatcher.dead() == []


def test_slow_channel_does_not_block_evaluation(
    alert_store: Any, webhook: WebhookServer, evaluators: Evaluators
) -> None:
    """While one channel's request hangs, evaluation returns and the other channel delivers."""
    webhook.held["/slow"] = hold = threading.Event()
    channels = {
        "slow": channel(webhook, "webhook", "/slow", timeout="20s"),
        "fast": channel(webhook, "webhook", "/fast"),
    }
    evaluator, clock = evaluators(channels, [{**SPIKE, "channels": ["slow", "fast"]}])
    insert_runs(alert_store, agent="checkout", at=clock.now, count=30, failed=15)
    evaluator.run_once()
    webhook.wait_for("/fast", 1)
    assert webhook.bodies("/slow") == []
    evaluator.run_once()  # evaluation is not stuck behind the held request either
    hold.set()
    webhook.wait_for("/slow", 1)


def test_min_runs_guards_against_a_handful_of_runs(
    alert_store: Any, webhook: WebhookServer, evaluators: Evaluators
) -> None:
    """Three failed runs out of three do not page anyone."""
    evaluator, clock = evaluators({"hook": channel(webhook, "webhook", "/hook")}, [SPIKE])
    insert_runs(alert_store, agent="checkout", at=clock.now, count=3, failed=3)
    assert evaluator.run_once() == []
    assert query_alerts(alert_store, AlertFilter(all=True)) == []
    *earlier, _ = marker_delivered(alert_store, webhook, evaluator, clock, "/hook")
    assert earlier == []


def test_state_survives_a_restart(alert_store: Any, webhook: WebhookServer, evaluators: Evaluators) -> None:
    """A new evaluator on the same store neither re-announces a firing alert nor forgets to resolve it."""
    channels = {"hook": channel(webhook, "webhook", "/hook")}
    first, clock = evaluators(channels, [{**SPIKE, "for": "1m"}])
    insert_runs(alert_store, agent="checkout", at=clock.now, count=30, failed=15)
    first.run_once()
    clock.advance(60)
    first.run_once()
    webhook.wait_for("/hook", 1)
    first.stop()
    second, _ = evaluators(channels, [{**SPIKE, "for": "1m"}], clock)
    clock.advance(30)
    change = second.run_once()[0]
    assert change.alert.state.value == "firing"
    assert change.alert.active_since == pytest.approx(clock.now - 90, abs=0.01)
    assert change.notify is None
    clock.advance(16 * 60)
    second.run_once()
    bodies = webhook.wait_for("/hook", 2)
    assert [body["kind"] for body in bodies] == ["firing", "resolved"]


def test_removed_rule_resolves_silently_on_start(
    alert_store: Any, webhook: WebhookServer, evaluators: Evaluators
) -> None:
    """A firing alert whose rule was removed from the config is resolved at start, without paging."""
    channels = {"hook": channel(webhook, "webhook", "/hook")}
    first, clock = evaluators(channels, [SPIKE])
    insert_runs(alert_store, agent="checkout", at=clock.now, count=30, failed=15)
    first.run_once()
    webhook.wait_for("/hook", 1)
    first.stop()
    second, _ = evaluators(channels, [{**SPIKE, "name": "marker", "filter": {"agent": ["marker"]}}], clock)
    second.run_once()
    (alert,) = query_alerts(alert_store, AlertFilter(all=True, rule="checkout-failures"))
    assert (alert["state"], alert["detail"]) == ("resolved", "the rule was removed from the configuration")
    first_firing, _ = marker_delivered(alert_store, webhook, second, clock, "/hook")
    assert first_firing["rule"] == "checkout-failures"
    assert first_firing["kind"] == "firing"


def wait_logged(caplog: pytest.LogCaptureFixture, count: int) -> list[logging.LogRecord]:
    """The first `count` records of the log channel's logger, waiting for its thread to write them."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        records = [r for r in caplog.records if r.name == DELIVERY_LOGGER]
        if len(records) >= count:
            return records
        time.sleep(0.02)
    raise AssertionError(f"expected {count} log notification(s), got {caplog.records}")


def test_log_channel_says_what_fired_and_what_resolved(
    alert_store: Any, evaluators: Evaluators, caplog: pytest.LogCaptureFixture
) -> None:
    """The `log` channel writes one line per notification, at its configured level while firing
    and at INFO once resolved, naming the rule, severity, group and summary, and records delivery."""
    caplog.set_level(logging.INFO, logger=DELIVERY_LOGGER)
    evaluator, clock = evaluators({"ops-log": {"type": "log", "level": "error"}}, [SPIKE])
    insert_runs(alert_store, agent="checkout", at=clock.now, count=30, failed=15)
    evaluator.run_once()
    (firing,) = wait_logged(caplog, 1)
    (alert,) = query_alerts(alert_store, AlertFilter())
    assert firing.levelno == logging.ERROR
    assert firing.getMessage() == (
        "alert firing: [FIRING] checkout-failures (critical) agent=checkout: checkout failing at 50% "
        f"[{alert['fingerprint']}]"
    )
    clock.advance(16 * 60)
    evaluator.run_once()
    resolved = wait_logged(caplog, 2)[1]
    assert resolved.levelno == logging.INFO
    assert resolved.getMessage().startswith("alert resolved: [RESOLVED] checkout-failures (critical)")
    rows = wait_history(alert_store, "checkout-failures", lambda rows: len(rows) >= 7)
    assert [(r["channel"], r["notification"]) for r in rows if r["delivery"] == "delivered"] == [
        ("ops-log", "firing"),
        ("ops-log", "resolved"),
    ]


def test_a_reloaded_section_retargets_kept_channels_and_resolves_removed_rules_silently(
    alert_store: Any, webhook: WebhookServer, evaluators: Evaluators
) -> None:
    """`reconfigure` (SIGHUP's reload): the kept rule's firing alert stays firing and is not
    posted again, its edited channel's next notification goes to the new URL, a removed rule's
    alert resolves with no notification (its history says why), and a removed channel's thread
    stops."""
    kept = {**SPIKE, "filter": {"agent": ["checkout", "marker"]}, "channels": ["hook"]}
    other = {**SPIKE, "name": "search-failures", "filter": {"agent": "search"}, "channels": ["hook"]}
    channels = {"hook": channel(webhook, "webhook", "/old"), "spare": channel(webhook, "webhook", "/spare")}
    evaluator, clock = evaluators(channels, [kept, other])
    insert_runs(alert_store, agent="checkout", at=clock.now, count=30, failed=15)
    insert_runs(alert_store, agent="search", at=clock.now, count=30, failed=15)
    evaluator.run_once()
    assert {body["rule"] for body in webhook.wait_for("/old", 2)} == {"checkout-failures", "search-failures"}
    spare = evaluator.dispatcher.senders["spare"]

    edited = {"hook": channel(webhook, "webhook", "/new")}
    config = AlertsConfig.from_mapping({"channels": edited, "rules": [kept]}, "test")
    evaluator.reconfigure(config)
    clock.advance(60)
    changes = evaluator.run_once()
    assert evaluator.config is config
    assert [change.notify for change in changes] == [None]  # still firing: not announced again
    assert not spare.alive()
    assert set(evaluator.dispatcher.senders) == {"log", "hook"}
    removed = wait_history(alert_store, "search-failures", lambda rows: rows[-1]["to"] == "resolved")
    assert "removed from the configuration" in removed[-1]["detail"]
    assert [r for r in removed if r["notification"] == "resolved"] == []
    assert [a["rule"] for a in query_alerts(alert_store, AlertFilter())] == ["checkout-failures"]

    delivered = marker_delivered(alert_store, webhook, evaluator, clock, "/new")
    assert [body["group"] for body in delivered] == [{"agent": "marker"}]
    assert len(webhook.bodies("/old")) == 2  # nothing more went to the old URL
