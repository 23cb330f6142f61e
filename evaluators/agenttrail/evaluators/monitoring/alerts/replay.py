"""`agenttrail alerts test RULE`: what a rule would have done over past data.

The rule's condition is evaluated at each step from `since` to `until`, with the same query the
live evaluator runs, and the same state machine (with `for` and `repeat_interval`) advances on
the step's time. Nothing is stored and nobody is notified.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agenttrail.collector.queries import QueryError, parse_time
from agenttrail.collector.store import Store
from agenttrail.evaluators.monitoring.alerts.config import AlertRule, AlertsConfig
from agenttrail.evaluators.monitoring.alerts.machine import AlertBook
from agenttrail.evaluators.monitoring.timespec import iso, parse_duration

MAX_STEPS = 10_000


@dataclass(frozen=True, slots=True)
class ReplayWindow:
    since: float
    until: float
    step_s: float

    def __post_init__(self) -> None:
        if self.step_s <= 0:
            raise QueryError("step must be longer than 0s")
        if self.until <= self.since:
            raise QueryError("since must be before until")
        steps = math.floor((self.until - self.since) / self.step_s) + 1
        if steps > MAX_STEPS:
            raise QueryError(
                f"{steps} steps is too many (at most {MAX_STEPS}): use a larger --step or a shorter --since"
            )

    def instants(self) -> list[float]:
        count = math.floor((self.until - self.since) / self.step_s + 1e-9) + 1
        return [self.since + i * self.step_s for i in range(count)]

    @classmethod
    def from_params(cls, params: Mapping[str, str], now: float) -> ReplayWindow:
        try:
            step = parse_duration(params.get("step", "1m"))
        except ValueError as exc:
            raise QueryError(f"step: {exc}") from exc
        since = parse_time(params.get("since", "24h")).timestamp()
        until = parse_time(params["until"]).timestamp() if params.get("until") else now
        return cls(since, until, step)


def replay(store: Store, rule: AlertRule, window: ReplayWindow) -> list[dict[str, Any]]:
    """The transitions and notifications the rule would have produced, oldest first."""
    book = AlertBook()
    events: list[dict[str, Any]] = []
    for at in window.instants():
        for change in book.apply(rule, rule.condition.observe(store, rule.scope, at), at):
            alert = change.alert
            base = {
                "at": iso(at),
                "rule": rule.name,
                "fingerprint": alert.fingerprint,
                "labels": alert.group,
                "value": alert.value,
                "threshold": alert.threshold,
                "detail": alert.detail,
            }
            notify = change.notify or ""
            for before, after in change.transitions:
                lands = notify and after.value in ("firing", "resolved")
                events.append(
                    {**base, "from": before.value, "to": after.value, "notify": notify if lands else ""}
                )
            if notify == "repeat":
                events.append({**base, "from": "firing", "to": "firing", "notify": "repeat"})
    return events


def replay_route(
    store: Store, config: AlertsConfig, params: Mapping[str, str], now: float
) -> list[dict[str, Any]]:
    """`GET /api/v1/alerts/test?rule=...&since=...&step=...` (the sidecar's own rules)."""
    params = dict(params)
    name = params.pop("rule", "")
    unknown = set(params) - {"since", "until", "step"}
    if unknown:
        raise QueryError(f"unknown parameter(s) {sorted(unknown)}; use rule, since, until, step")
    return replay(store, config.rule(name), ReplayWindow.from_params(params, now))
