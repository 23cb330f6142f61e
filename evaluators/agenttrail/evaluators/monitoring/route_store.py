"""The store client the monitoring read routes (stats, drift, alerts, report) share per part."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agenttrail.collector.sidecar import Sidecar
    from agenttrail.collector.store import Store


def lazy_store(sidecar: Sidecar) -> Callable[[], Store]:
    """A store client of the routes' own, opened on first use (the sidecar has started by then)."""
    opened: list[Store] = []

    def get() -> Store:
        if not opened:
            opened.append(sidecar.new_store())
        return opened[0]

    return get
