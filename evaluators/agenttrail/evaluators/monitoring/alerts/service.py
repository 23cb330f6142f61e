"""What `agenttrail alerts`, `alerts history`, `alerts test RULE` and `alerts reload` do, as
functions tests and other callers use without click: check the user's values (QueryError names
the one that cannot be read), take the `alerts:` section parsed (the CLI reads it env over file,
as serve does), and describe each read (`ReadRequest`: the sidecar route with its parameters, and
the same rows computed on a store) for the caller to make wherever the data is. While a sidecar
holds the store, `alerts test` replays the rule as the sidecar has it configured; on the store,
as the given section does (`UnknownRule` if it has none). `alerts reload` asks the sidecar's
admin API, or checks the section when no sidecar runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from agenttrail.collector.errors import ConfigError
from agenttrail.collector.queries import QueryError, parse_time
from agenttrail.collector.reads import ReadRequest
from agenttrail.evaluators.monitoring.alerts.config import AlertsConfig
from agenttrail.evaluators.monitoring.alerts.history import AlertFilter, query_alerts, query_history
from agenttrail.evaluators.monitoring.alerts.replay import ReplayWindow, replay

if TYPE_CHECKING:
    from agenttrail.collector.cli import SidecarApi
    from agenttrail.collector.store import Store
    from agenttrail.evaluators.reloads import NamedChanges

ALERTS_ROUTE = "/api/v1/alerts"
HISTORY_ROUTE = "/api/v1/alerts/history"
TEST_ROUTE = "/api/v1/alerts/test"


class UnknownRule(QueryError):
    """`alerts test RULE` names no rule of the config file; the message lists the rules it has."""


def _filter(show_all: bool, since: str | None, rule: str | None, limit: int) -> AlertFilter:
    return AlertFilter(show_all, parse_time(since) if since else None, rule, None, limit)


def alerts_read(
    *, show_all: bool = False, since: str | None = None, rule: str | None = None, limit: int = 200
) -> ReadRequest:
    """Pending and firing alerts (`show_all`: resolved ones too), updated since `since`."""
    where = _filter(show_all, since, rule, limit)
    return ReadRequest(ALERTS_ROUTE, where.to_params(), lambda store: query_alerts(store, where))


def history_read(*, since: str | None = None, rule: str | None = None, limit: int = 200) -> ReadRequest:
    """Transitions, notifications and delivery attempts, newest first."""
    where = _filter(True, since, rule, limit)
    return ReadRequest(HISTORY_ROUTE, where.to_params(), lambda store: query_history(store, where))


def replay_read(
    rule: str,
    alerts_config: AlertsConfig,
    *,
    since: str = "24h",
    until: str | None = None,
    step: str = "1m",
    now: float | None = None,
) -> ReadRequest:
    """What `rule` would have done over the window, evaluated every `step` (nothing is sent):
    its transitions and notifications, oldest first."""
    params = {"rule": rule, "since": since, "step": step, **({"until": until} if until else {})}
    window = ReplayWindow.from_params(params, time.time() if now is None else now)

    def local(store: Store) -> list[dict[str, Any]]:
        try:
            chosen = alerts_config.rule(rule)
        except ConfigError as exc:
            raise UnknownRule(str(exc)) from exc
        return replay(store, chosen, window)

    return ReadRequest(TEST_ROUTE, params, local)


class ReplaySummary(NamedTuple):
    """How often a replay fired, and in how many alert groups."""

    fired: int
    groups: int


def summarise_replay(events: Sequence[dict[str, Any]]) -> ReplaySummary:
    """Times the rule went firing (from another state), and the distinct groups it touched."""
    fired = sum(1 for event in events if event["to"] == "firing" and event["from"] != "firing")
    return ReplaySummary(fired, len({event["fingerprint"] for event in events}))


class AlertsChecked(NamedTuple):
    """No sidecar to reload: the config file's alerts section, checked as serve checks it at start."""

    config_file: str
    rules: list[str]
    channels: list[str]


class AlertsReloaded(NamedTuple):
    """What the running sidecar's reload changed (its admin answer); `other_file` when the sidecar
    reads another config file than the one the caller gave."""

    config_file: str
    rules: NamedChanges
    channels: NamedChanges
    settings: list[str]
    summary: str
    other_file: bool


def reload_alerts(
    api: SidecarApi | None, config_file: str | None, read_alerts: Callable[[], AlertsConfig]
) -> AlertsReloaded | AlertsChecked:
    """Make the running sidecar (`api`) read its config file's alerts section again, as SIGHUP
    does (it reads its own file and environment; a refused section is a BadInput naming file,
    rule and key, and the rules in force stay); with no sidecar, check the section `read_alerts`
    reads from `config_file` as serve does when it starts."""
    if api is None:
        config = read_alerts()
        return AlertsChecked(str(config_file), [rule.name for rule in config.rules], list(config.channels))
    from agenttrail.evaluators.reloads import NamedChanges, reads_other_file
    from agenttrail.evaluators.routes import ADMIN_PREFIX

    answer = api.post_json(f"{ADMIN_PREFIX}/alerts/reload", {})
    other = reads_other_file(config_file, answer)
    return AlertsReloaded(
        answer["config_file"],
        NamedChanges.from_json(answer["rules"]),
        NamedChanges.from_json(answer["channels"]),
        list(answer["settings"]),
        answer["summary"],
        other_file=other,
    )
