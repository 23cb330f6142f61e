"""The alert evaluator: every `evaluation_interval`, each rule's condition, the state machine, and
notifications handed to the channel threads.

State survives a restart: the first cycle loads pending and firing alerts from `alert_state`,
so a firing alert is not announced twice and `for` keeps counting from when it started. A rule
whose query fails is logged and counted; the other rules are still evaluated. Store writes that
fail (state rows, history rows) are kept, bounded, and retried next cycle.

A reload (SIGHUP) hands a new `AlertsConfig` to `reconfigure`; the evaluator's own thread takes
it at the start of its next cycle (woken at once), so rules, channels and the book never change
under an evaluation. Alerts are keyed by rule name and group, so a kept rule's pending and firing
alerts, and when they last notified, carry over (an edited rule's too, as Prometheus keeps an
edited rule's alerts); a removed rule's alerts are resolved without a notification, as at start.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from agenttrail.collector.background import BackgroundLoop
from agenttrail.collector.errors import StoreError
from agenttrail.collector.store import Store
from agenttrail.evaluators.monitoring.alerts.channels import CHANNEL_TYPES, send
from agenttrail.evaluators.monitoring.alerts.config import (
    AlertRule,
    AlertsConfig,
    ChannelConfig,
    describe_rule,
)
from agenttrail.evaluators.monitoring.alerts.delivery import Dispatcher
from agenttrail.evaluators.monitoring.alerts.history import (
    HistoryEvent,
    Recorder,
    load_active,
    state_row,
    transition_events,
)
from agenttrail.evaluators.monitoring.alerts.machine import AlertBook, AlertInstance, Change, State
from agenttrail.evaluators.monitoring.alerts.notify import Notification

log = logging.getLogger(__name__)

_MAX_UNSAVED = 10_000


@dataclass
class EvaluatorCounters:
    cycles: int = 0
    rule_errors: int = 0  # a rule's query failed (the cycle went on with the others)
    errors: int = 0  # a whole cycle failed
    notifications: int = 0
    last_error: str = ""


class AlertEvaluator(BackgroundLoop):
    """Evaluates the configured rules in a background thread; `run_once` is one evaluation (tests)."""

    name = "alerts"

    def __init__(
        self,
        store_factory: Callable[[], Store],
        config: AlertsConfig,
        *,
        clock: Callable[[], float] = time.time,
        sender: Callable[[ChannelConfig, Notification], None] = send,
        served_at: Callable[[], str] = lambda: "http://127.0.0.1:4318",
    ) -> None:
        super().__init__(
            what="alert evaluation",
            thread_name="agenttrail-alerts",
            poll_interval_s=config.evaluation_interval_s,
        )
        self.config = config
        self.clock = clock
        self.served_at = served_at  # the sidecar's HTTP base URL, known once it has bound its port
        self.counters = EvaluatorCounters()
        self._store_factory = store_factory
        self._store: Store | None = None
        self.recorder = Recorder(store_factory)
        self.dispatcher = Dispatcher(
            config.channels, self.recorder, queue_size=config.queue_size, sender=sender, clock=clock
        )
        self.book: AlertBook | None = None
        self._reloaded: AlertsConfig | None = None  # handed over by reconfigure, taken by run_once
        self._reload_lock = threading.Lock()  # reconfigure runs on serve's main thread (SIGHUP)
        self._unsaved: dict[str, AlertInstance] = {}
        self._refreshed: dict[tuple[str, str], float] = {}  # (fingerprint, channel) -> last keep-alive

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = self._store_factory()
        return self._store

    def start(self) -> None:
        rules = "; ".join(describe_rule(rule) for rule in self.config.rules)
        log.info("alert rules: %s", rules or "none configured (a reload may add some)")
        self.dispatcher.start()
        super().start()

    def reconfigure(self, config: AlertsConfig) -> None:
        """Evaluate `config` (a reloaded, checked section) from the next cycle, which runs now."""
        with self._reload_lock:
            self._reloaded = config
        self.wake()

    def _take_reloaded(self) -> None:
        with self._reload_lock:
            config, self._reloaded = self._reloaded, None
        if config is None:
            return
        if self.book is not None:
            retired = self.book.retire({rule.name: rule for rule in config.rules}, self.clock())
            self.recorder.record([event for change in retired for event in transition_events(change)])
            self._save(retired)
        self.dispatcher.reconfigure(config.channels, config.queue_size)
        self._refreshed = {key: at for key, at in self._refreshed.items() if key[1] in config.channels}
        self._poll_interval_s = config.evaluation_interval_s
        self.config = config

    def stop(self, timeout_s: float = 10.0) -> None:
        super().stop(timeout_s)
        self.dispatcher.stop(timeout_s)
        self.recorder.flush()

    def alive(self) -> bool:
        return super().alive() and not self.dispatcher.dead()

    def cycle(self) -> None:
        self.run_once()

    def count_failure(self, message: str) -> None:
        self.counters.errors += 1
        self.counters.last_error = message

    def load(self) -> AlertBook:
        """The alerts the last run left pending or firing; those of removed rules are resolved."""
        if self.book is None:
            book = AlertBook(load_active(self.store))
            rules = {rule.name: rule for rule in self.config.rules}
            retired = book.retire(rules, self.clock())
            self.book = book
            self._save(retired)
            log.info("alerts: %d pending or firing alert(s) restored", len(book.active))
        return self.book

    def run_once(self) -> list[Change]:
        """Evaluate every rule once at the clock's current time; returns what changed."""
        self._take_reloaded()
        if not self.config.rules and self.book is None:
            return []  # nothing configured yet, nothing restored to resolve: no store read
        book = self.load()
        now = self.clock()
        self.counters.cycles += 1
        changes: list[Change] = []
        for rule in self.config.rules:
            try:
                observations = rule.condition.observe(self.store, rule.scope, now)
            except StoreError as exc:
                self.counters.rule_errors += 1
                self.counters.last_error = f"rule {rule.name}: {exc}"
                log.error("alert rule %s could not be evaluated, will retry: %s", rule.name, exc)
                continue
            rule_changes = book.apply(rule, observations, now)
            self._notify(rule, rule_changes)
            changes.extend(rule_changes)
        self._refresh(book, now)
        self._save(changes)
        return changes

    def _notify(self, rule: AlertRule, changes: list[Change]) -> None:
        events: list[HistoryEvent] = []
        for change in changes:
            alert = change.alert
            events.extend(transition_events(change))
            for before, after in change.transitions:
                log.log(
                    logging.WARNING if after is State.FIRING else logging.INFO,
                    "alert %s %s: %s -> %s (%s)",
                    rule.name,
                    alert.group,
                    before.value,
                    after.value,
                    alert.detail,
                )
            if change.notify is None:
                continue
            notification = self.notification(rule, alert, change.notify, change.at)
            self.counters.notifications += 1
            events.extend(self.dispatcher.submit(notification, alert, rule.channels))
            for channel in rule.channels:
                self._refreshed[(alert.fingerprint, channel)] = change.at
        self.recorder.record(events)

    def notification(self, rule: AlertRule, alert: AlertInstance, kind: str, at: float) -> Notification:
        return Notification(
            kind=kind,
            rule=rule.name,
            fingerprint=alert.fingerprint,
            severity=rule.severity,
            labels=rule.alert_labels(alert.group),
            group=dict(alert.group),
            annotations=dict(alert.annotations),
            value=alert.value,
            threshold=alert.threshold,
            starts_at=alert.fired_at or alert.active_since or at,
            ends_at=alert.resolved_at if kind == "resolved" else None,
            generator_url=self.config.generator_url(self.served_at(), rule.name, alert.fingerprint),
            at=at,
        )

    def _refresh(self, book: AlertBook, now: float) -> None:
        """Re-post firing alerts to Alertmanager channels every resend interval (its keep-alive)."""
        rules = {rule.name: rule for rule in self.config.rules}
        for alert in book.active.values():
            rule = rules.get(alert.rule)
            if alert.state is not State.FIRING or rule is None:
                continue
            for name in rule.channels:
                channel = self.config.channels[name]
                key = (alert.fingerprint, name)
                if CHANNEL_TYPES[channel.type].resends_firing and now - self._refreshed.get(key, 0.0) >= (
                    channel.resend_interval_s
                ):
                    self._refreshed[key] = now
                    sender = self.dispatcher.senders[name]
                    sender.submit(self.notification(rule, alert, "refresh", now), alert)
        live = set(book.active)
        for key in [key for key in self._refreshed if key[0] not in live]:
            del self._refreshed[key]

    def _save(self, changes: list[Change]) -> None:
        for change in changes:
            self._unsaved[change.alert.fingerprint] = change.alert
        if not self._unsaved:
            return
        try:
            self.store.insert("alert_state", [state_row(alert) for alert in self._unsaved.values()])
            self._unsaved.clear()
        except StoreError as exc:
            log.error("cannot save %d alert state(s) yet, will retry: %s", len(self._unsaved), exc)
            while len(self._unsaved) > _MAX_UNSAVED:
                self._unsaved.pop(next(iter(self._unsaved)))
        self.recorder.flush()
