"""One read as the read commands' services describe it, for the CLI to make wherever the data is.

A `ReadRequest` is what a service function (stats, drift, alerts, audit...) returns after
checking the user's values: the sidecar route and parameters to ask while `serve` holds the
store, and the same answer computed on a store (`local`). The CLI picks the source
(`collector.cli.read_rows`); tests call `local` on a store directly, or the route on a sidecar.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agenttrail.collector.queries import parse_time

if TYPE_CHECKING:
    from agenttrail.collector.store import Store


@dataclass(frozen=True, slots=True)
class ReadRequest:
    """Rows from the sidecar's `route` with `params`, or `local(store)` on the store itself."""

    route: str
    params: dict[str, str] = field(default_factory=dict)
    local: Callable[[Store], list[dict[str, Any]]] = lambda store: []


def time_range(since: str, until: str | None, now: datetime | None = None) -> tuple[datetime, datetime]:
    """--since/--until (ISO 8601 or a duration back), both against the same now; until defaults
    to now. QueryError names what cannot be read."""
    now = now or datetime.now(UTC)
    return parse_time(since, now=now), parse_time(until, now=now) if until else now
