"""Criteria's part of `agenttrail serve`: `/api/v1/criteria-sets` (what `agenttrail criteria
list/show` read while serve holds the store); the table is in the one migration list
(`composition.ALL_MIGRATIONS`). Saved-set judges get the sidecar's store from the composition
root (`ClientPool(store_factory=sidecar.new_store)`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agenttrail.collector.store import Store
from agenttrail.evaluators.judges.criteria.sets import (
    StoredCriteriaSet,
    get_set,
    latest_sets,
    set_versions,
)

if TYPE_CHECKING:
    from agenttrail.collector.sidecar import Sidecar

SETS_ROUTE = "/api/v1/criteria-sets"


def stored_set_json(stored: StoredCriteriaSet) -> dict[str, Any]:
    return {
        "name": stored.criteria_set.name,
        "version": stored.version,
        "number": stored.number,
        "content_hash": stored.content_hash,
        "source": stored.source,
        "saved_at_ms": stored.saved_at_ms,
        "definition": stored.criteria_set.to_json(),
    }


def read_sets(store: Store, params: dict[str, str]) -> list[dict[str, Any]]:
    """Newest version of every set, or every version (newest first) of `name`, or one `version`."""
    name = params.get("name")
    if not name:
        return [stored_set_json(stored) for stored in latest_sets(store)]
    if params.get("version"):
        return [stored_set_json(get_set(store, name, int(params["version"])))]
    return [stored_set_json(stored) for stored in set_versions(store, name)]


def install_criteria(sidecar: Sidecar) -> None:
    """The criteria sets' read route (the table: composition.ALL_MIGRATIONS)."""
    read_store: list[Store] = []

    def route(params: dict[str, str]) -> list[dict[str, Any]]:
        if not read_store:
            read_store.append(sidecar.new_store())
        return read_sets(read_store[0], params)

    sidecar.add_read_route(SETS_ROUTE, route)
