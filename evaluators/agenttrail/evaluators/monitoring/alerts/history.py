"""Alert state and history in ClickHouse: the rows the evaluator writes and the queries that read them.

The JSON shapes are the contract of `agenttrail alerts --format json` and `GET /api/v1/alerts`:
an alert is `fingerprint`, `rule`, `state`, `severity`, `labels` (the group), `value`,
`threshold`, `since` (when its current state began), `active_since`, `fired_at`,
`resolved_at`, `last_notified_at`, `detail`, `annotations`, `updated_at`; times are ISO 8601 UTC.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agenttrail.collector.errors import StoreError
from agenttrail.collector.queries import QueryError, parse_time
from agenttrail.collector.store import Store
from agenttrail.evaluators.monitoring.alerts.machine import AlertInstance, Change, State
from agenttrail.evaluators.monitoring.alerts.schema import AlertHistoryRow, AlertStateRow
from agenttrail.evaluators.monitoring.timespec import iso

log = logging.getLogger(__name__)


def _stamp(seconds: float | None) -> str | None:
    return None if seconds is None else f"{seconds:.3f}"


def _finite(value: float | None) -> float | None:
    """NaN and infinities do not survive JSON: store them as NULL."""
    return value if value is not None and abs(value) != float("inf") and value == value else None


def state_row(alert: AlertInstance) -> AlertStateRow:
    return AlertStateRow(
        alert.fingerprint,
        alert.rule,
        alert.group,
        alert.severity,
        alert.state.value,
        _stamp(alert.active_since),
        _stamp(alert.fired_at),
        _stamp(alert.resolved_at),
        _stamp(alert.last_notified_at),
        _finite(alert.value),
        _finite(alert.threshold),
        alert.detail,
        alert.annotations,
        f"{alert.updated_at:.3f}",
    )


@dataclass(frozen=True, slots=True)
class HistoryEvent:
    """One row of alert_history: a transition, a queued notification, or one delivery attempt."""

    at: float
    alert: AlertInstance
    event: str  # "transition" | "notification" | "delivery"
    from_state: str = ""
    to_state: str = ""
    notification: str = ""  # firing | repeat | resolved | refresh
    channel: str = ""
    delivery: str = ""  # queued | dropped | delivered | retrying | failed
    attempt: int = 0
    error: str = ""

    def row(self) -> AlertHistoryRow:
        alert = self.alert
        return AlertHistoryRow(
            f"{self.at:.3f}",
            alert.fingerprint,
            alert.rule,
            alert.group,
            self.event,
            self.from_state,
            self.to_state,
            self.notification,
            self.channel,
            self.delivery,
            self.attempt,
            self.error,
            _finite(alert.value),
            _finite(alert.threshold),
            alert.detail,
        )


def transition_events(change: Change) -> list[HistoryEvent]:
    return [
        HistoryEvent(change.at, change.alert, "transition", before.value, after.value)
        for before, after in change.transitions
    ]


class Recorder:
    """Appends history rows for several threads; rows that fail to store wait (bounded) for the next try."""

    def __init__(self, store_factory: Callable[[], Store], *, max_pending: int = 10_000) -> None:
        self._store_factory = store_factory
        self._store: Store | None = None
        self._lock = threading.Lock()
        self._pending: deque[AlertHistoryRow] = deque()
        self._max_pending = max_pending
        self.dropped = 0

    def record(self, events: Sequence[HistoryEvent]) -> None:
        with self._lock:
            for event in events:
                if len(self._pending) >= self._max_pending:
                    self._pending.popleft()
                    self.dropped += 1
                self._pending.append(event.row())
            self._flush()

    def flush(self) -> None:
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        try:
            if self._store is None:
                self._store = self._store_factory()
            self._store.insert("alert_history", list(self._pending))
            self._pending.clear()
        except StoreError as exc:
            log.warning("cannot record %d alert history row(s) yet: %s", len(self._pending), exc)


_LOAD = f"""
SELECT {", ".join(AlertStateRow._fields[:5])},
       toUnixTimestamp64Milli(ActiveSince), toUnixTimestamp64Milli(FiredAt),
       toUnixTimestamp64Milli(ResolvedAt), toUnixTimestamp64Milli(LastNotifiedAt),
       Value, Threshold, Detail, Annotations, toUnixTimestamp64Milli(UpdatedAt)
FROM alert_state FINAL
"""


def _seconds(millis: int | None) -> float | None:
    return None if millis is None else millis / 1000


def _instance(row: tuple[Any, ...]) -> AlertInstance:
    return AlertInstance(
        fingerprint=row[0],
        rule=row[1],
        group=dict(row[2]),
        severity=row[3],
        state=State(row[4]),
        active_since=_seconds(row[5]),
        fired_at=_seconds(row[6]),
        resolved_at=_seconds(row[7]),
        last_notified_at=_seconds(row[8]),
        value=row[9],
        threshold=row[10],
        detail=row[11],
        annotations=dict(row[12]),
        updated_at=row[13] / 1000,
    )


def load_active(store: Store) -> list[AlertInstance]:
    """The pending and firing alerts, as the last run left them."""
    return [_instance(row) for row in store.query(_LOAD + "WHERE State IN ('pending', 'firing')")]


@dataclass(frozen=True, slots=True)
class AlertFilter:
    """Which alerts to list: active ones, or (`all`) also resolved; optionally since a time."""

    all: bool = False
    since: datetime | None = None
    rule: str | None = None
    fingerprint: str | None = None
    limit: int = 200

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> AlertFilter:
        unknown = set(params) - {"all", "since", "rule", "fingerprint", "limit"}
        if unknown:
            raise QueryError(f"unknown filter(s) {sorted(unknown)}; use all, since, rule, fingerprint, limit")
        try:
            limit = int(params.get("limit", "200"))
        except ValueError as exc:
            raise QueryError(f"limit must be a whole number, got {params['limit']!r}") from exc
        return cls(
            all=params.get("all", "") in ("1", "true", "yes"),
            since=parse_time(params["since"]) if params.get("since") else None,
            rule=params.get("rule") or None,
            fingerprint=params.get("fingerprint") or None,
            limit=max(1, limit),
        )

    def to_params(self) -> dict[str, str]:
        params = {"limit": str(self.limit)}
        if self.all:
            params["all"] = "1"
        if self.since:
            params["since"] = self.since.isoformat()
        if self.rule:
            params["rule"] = self.rule
        if self.fingerprint:
            params["fingerprint"] = self.fingerprint
        return params

    def where(self, time_column: str) -> tuple[list[str], dict[str, Any]]:
        clauses: list[str] = []
        params: dict[str, Any] = {"limit": self.limit}
        if self.since:
            clauses.append(f"{time_column} >= {{since:DateTime64(3)}}")
            params["since"] = f"{self.since.timestamp():.3f}"
        if self.rule:
            clauses.append("Rule = {rule:String}")
            params["rule"] = self.rule
        if self.fingerprint:
            clauses.append("Fingerprint = {fingerprint:String}")
            params["fingerprint"] = self.fingerprint
        return clauses, params


def query_alerts(store: Store, where: AlertFilter) -> list[dict[str, Any]]:
    """Pending and firing alerts (and with `all`, resolved ones), firing first, newest first."""
    clauses, params = where.where("UpdatedAt")
    states = ["pending", "firing", "resolved"] if where.all else ["pending", "firing"]
    clauses.append("State IN {states:Array(String)}")
    params["states"] = states
    sql = (
        f"{_LOAD} WHERE {' AND '.join(clauses)} "
        "ORDER BY indexOf(['firing', 'pending', 'resolved'], State), UpdatedAt DESC LIMIT {limit:UInt32}"
    )
    return [alert_to_json(_instance(row)) for row in store.query(sql, params)]


def alert_to_json(alert: AlertInstance) -> dict[str, Any]:
    since = {
        State.PENDING: alert.active_since,
        State.FIRING: alert.fired_at,
        State.RESOLVED: alert.resolved_at,
    }.get(alert.state, alert.updated_at)
    return {
        "fingerprint": alert.fingerprint,
        "rule": alert.rule,
        "state": alert.state.value,
        "severity": alert.severity,
        "labels": alert.group,
        "value": alert.value,
        "threshold": alert.threshold,
        "since": iso(since),
        "active_since": iso(alert.active_since),
        "fired_at": iso(alert.fired_at),
        "resolved_at": iso(alert.resolved_at),
        "last_notified_at": iso(alert.last_notified_at),
        "detail": alert.detail,
        "annotations": alert.annotations,
        "updated_at": iso(alert.updated_at),
    }


_HISTORY = """
SELECT toUnixTimestamp64Milli(At), Fingerprint, Rule, GroupLabels, Event, FromState, ToState, Notification,
       Channel, Delivery, Attempt, Error, Value, Threshold, Detail
FROM alert_history
"""


# Rows of one evaluation share a time: transitions (in state order), then notifications, then attempts.
_HISTORY_ORDER = (
    "indexOf(['transition', 'notification', 'delivery'], Event) DESC, "
    "indexOf(['inactive', 'pending', 'firing', 'resolved'], ToState) DESC, Attempt DESC, Channel DESC"
)


def query_history(store: Store, where: AlertFilter) -> list[dict[str, Any]]:
    """Transitions, notifications and delivery attempts, newest first."""
    clauses, params = where.where("At")
    sql = (
        f"{_HISTORY} WHERE {' AND '.join(clauses) or '1'} ORDER BY At DESC, {_HISTORY_ORDER} "
        "LIMIT {limit:UInt32}"
    )
    keys = (
        "at",
        "fingerprint",
        "rule",
        "labels",
        "event",
        "from",
        "to",
        "notification",
        "channel",
        "delivery",
        "attempt",
        "error",
        "value",
        "threshold",
        "detail",
    )
    rows = []
    for row in store.query(sql, params):
        item = dict(zip(keys, row, strict=True))
        item["at"] = iso(row[0] / 1000)
        item["labels"] = dict(row[3])
        rows.append(item)
    return rows
