"""The alert state machine, per (rule, group): pure, with the clock passed in.

    inactive --condition true--> pending --true for `for`--> firing --condition false--> resolved
       ^                            |                           |  (notify firing; again
       +------condition false-------+  (no notification)        |   every repeat_interval)
                                                                +--> notify resolved if send_resolved

A resolved alert whose condition holds again starts a new episode at pending. The book keeps
only pending and firing alerts in memory; the rest live in the state table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from agenttrail.evaluators.monitoring.alerts.conditions import Observation
from agenttrail.evaluators.monitoring.alerts.config import AlertRule, fingerprint


class State(StrEnum):
    INACTIVE = "inactive"
    PENDING = "pending"
    FIRING = "firing"
    RESOLVED = "resolved"


ACTIVE = (State.PENDING, State.FIRING)


@dataclass(slots=True)
class AlertInstance:
    """One alert: a rule applied to one group, and where it stands."""

    fingerprint: str
    rule: str
    group: dict[str, str]
    severity: str = "warning"
    state: State = State.INACTIVE
    active_since: float | None = None  # the condition has held since (start of pending)
    fired_at: float | None = None
    resolved_at: float | None = None
    last_notified_at: float | None = None
    value: float | None = None
    threshold: float | None = None
    detail: str = ""
    annotations: dict[str, str] = field(default_factory=dict)
    updated_at: float = 0.0


@dataclass(frozen=True, slots=True)
class Change:
    """What one evaluation did to one alert: transitions, at most one notification, the new state."""

    alert: AlertInstance  # a copy, after the evaluation
    transitions: tuple[tuple[State, State], ...]
    notify: str | None  # "firing" | "repeat" | "resolved"
    at: float


def advance(
    alert: AlertInstance,
    active: bool,
    now: float,
    *,
    for_s: float,
    repeat_interval_s: float,
    send_resolved: bool,
) -> tuple[list[tuple[State, State]], str | None]:
    """Move one alert given whether its condition holds at `now`; returns transitions and notification."""
    transitions: list[tuple[State, State]] = []
    notify: str | None = None
    before = alert.state

    def move(to: State) -> None:
        transitions.append((alert.state, to))
        alert.state = to

    if active:
        if alert.state in (State.INACTIVE, State.RESOLVED):
            move(State.PENDING)
            alert.active_since, alert.fired_at, alert.resolved_at = now, None, None
            alert.last_notified_at = None
        if alert.state is State.PENDING and now - (alert.active_since or now) >= for_s:
            move(State.FIRING)
            alert.fired_at = now
            notify = "firing"
        elif before is State.FIRING and now - (alert.last_notified_at or 0.0) >= repeat_interval_s:
            notify = "repeat"
    elif alert.state is State.PENDING:
        move(State.INACTIVE)
        alert.active_since = None
    elif alert.state is State.FIRING:
        move(State.RESOLVED)
        alert.resolved_at = now
        notify = "resolved" if send_resolved else None
    if notify in ("firing", "repeat"):
        alert.last_notified_at = now
    alert.updated_at = now
    return transitions, notify


def _resolved_for_lack_of_data(alert: AlertInstance, fired_on: str) -> None:
    """A firing alert about to resolve because its window holds too few samples (or none): no
    value (the last one, above the threshold, beside "resolved" read as if the condition still
    held) and a summary that says why it resolved and what it fired on, not the rule's template
    rendered over numbers that do not count."""
    alert.value = None
    _resolved_saying(alert, f"Resolved for lack of data ({alert.detail})", fired_on)


def _resolved_saying(alert: AlertInstance, why: str, fired_on: str) -> None:
    alert.annotations = {
        **alert.annotations,
        "summary": why + (f"; it fired on: {fired_on}" if fired_on else ""),
    }


class AlertBook:
    """The pending and firing alerts of every rule, advanced one evaluation at a time."""

    def __init__(self, alerts: Iterable[AlertInstance] = ()) -> None:
        self.active: dict[str, AlertInstance] = {
            alert.fingerprint: alert for alert in alerts if alert.state in ACTIVE
        }

    def apply(self, rule: AlertRule, observations: Iterable[Observation], now: float) -> list[Change]:
        """One evaluation of `rule`: every observed group and every active alert of the rule.

        An active alert whose group was not observed (no data in the window) has a false condition.
        """
        changes: list[Change] = []
        seen: set[str] = set()
        for observation in observations:
            key = fingerprint(rule.name, observation.labels)
            seen.add(key)
            alert = self.active.get(key)
            if alert is None:
                if not observation.active:
                    continue  # inactive and staying so: nothing to record
                alert = AlertInstance(key, rule.name, dict(observation.labels), rule.severity)
            alert.value, alert.threshold, alert.detail = (
                observation.value,
                observation.threshold,
                observation.detail,
            )
            fired_on = alert.annotations.get("summary", "")
            alert.annotations = rule.render_annotations(observation)
            if observation.too_few and alert.state is State.FIRING:
                _resolved_for_lack_of_data(alert, fired_on)
            changes.append(self._advance(rule, alert, observation.active, now))
        for key, alert in list(self.active.items()):
            if alert.rule == rule.name and key not in seen:
                alert.detail = rule.condition.ABSENT
                if alert.state is State.FIRING:
                    fired_on = alert.annotations.get("summary", "")
                    if rule.condition.ABSENT_IS_NO_DATA:
                        _resolved_for_lack_of_data(alert, fired_on)
                    else:  # the kind's condition stopped holding: say that, not "no data"
                        _resolved_saying(alert, f"Resolved: {alert.detail}", fired_on)
                alert.value = None
                changes.append(self._advance(rule, alert, False, now))
        return changes

    def _advance(self, rule: AlertRule, alert: AlertInstance, active: bool, now: float) -> Change:
        alert.severity = rule.severity
        transitions, notify = advance(
            alert,
            active,
            now,
            for_s=rule.for_s,
            repeat_interval_s=rule.repeat_interval_s,
            send_resolved=rule.send_resolved,
        )
        if alert.state in ACTIVE:
            self.active[alert.fingerprint] = alert
        else:
            self.active.pop(alert.fingerprint, None)
        return Change(dataclasses.replace(alert, group=dict(alert.group)), tuple(transitions), notify, now)

    def retire(self, rules: Mapping[str, AlertRule], now: float) -> list[Change]:
        """Resolve, without notifying, active alerts whose rule is no longer configured."""
        changes = []
        for key, alert in list(self.active.items()):
            if alert.rule not in rules:
                before = alert.state
                alert.state, alert.resolved_at, alert.updated_at = State.RESOLVED, now, now
                alert.detail = "the rule was removed from the configuration"
                del self.active[key]
                changes.append(Change(dataclasses.replace(alert), ((before, State.RESOLVED),), None, now))
        return changes
