"""Writes a user makes while `serve` holds the embedded store, through the sidecar's HTTP port.

chDB admits one process per store directory, so `agenttrail references load` cannot open the
store while the sidecar runs; it posts the validated reference set here instead (the CLI finds
the sidecar through the store's lock file, as read commands do). Mounted at `/api/v1/admin`
under the same bearer token as the read API:

    POST /api/v1/admin/references   {"source": "refs.yaml", "entries": [<entry>, ...]}
        -> 200 {"added": [...], "updated": [...], "unchanged": [...]}
        -> 400 {"message": ...} when the entries are not a valid reference set
        -> 401 without the bearer token

and `GET /api/v1/references` (a read route) lists the current reference of every task, as
`agenttrail references list --format json` prints it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agenttrail.collector.auth import bearer_ok
from agenttrail.evaluators.reference_store import latest_references, store_reference_set
from agenttrail.evaluators.references import ReferenceSetError, parse_reference_set

if TYPE_CHECKING:
    from agenttrail.collector.sidecar import Sidecar
    from agenttrail.collector.store import Store

ADMIN_PREFIX = "/api/v1/admin"
REFERENCES_ROUTE = "/api/v1/references"


def reference_rows(store: Store) -> list[dict[str, Any]]:
    """Every task's current reference with its version: `references list --format json`."""
    return [
        {
            "task": task,
            "version": stored.version,
            "content_hash": stored.content_hash,
            "source": stored.source,
            **stored.entry.to_json(),
        }
        for task, stored in latest_references(store).items()
    ]


def admin_app(sidecar: Sidecar) -> Starlette:
    """The write endpoints, each on a store of its own opened for the request."""

    def load(document: dict[str, Any]) -> dict[str, Any]:
        reference_set = parse_reference_set(document.get("entries"), source=str(document.get("source")))
        store = sidecar.new_store()
        try:
            result = store_reference_set(store, reference_set, source=str(document.get("source", "api")))
        finally:
            store.close()
        return {"added": result.added, "updated": result.updated, "unchanged": result.unchanged}

    async def references(request: Request) -> JSONResponse:
        if not bearer_ok(request.headers.get("authorization"), sidecar.config.bearer_token):
            return JSONResponse({"message": "missing or wrong bearer token"}, status_code=401)
        try:
            document = json.loads(await request.body())
            if not isinstance(document, dict):
                raise ValueError("expected an object with 'source' and 'entries'")
            return JSONResponse(await run_in_threadpool(load, document))
        except (ValueError, ReferenceSetError) as exc:  # JSONDecodeError is a ValueError
            return JSONResponse({"message": str(exc)}, status_code=400)

    return Starlette(routes=[Route("/references", references, methods=["POST"])])


def install_admin(sidecar: Sidecar) -> None:
    """Mount the write endpoints and add the references read route."""
    sidecar.mount_app(ADMIN_PREFIX, admin_app(sidecar))
    opened: list[Store] = []

    def route(params: dict[str, str]) -> list[dict[str, Any]]:
        if not opened:
            opened.append(sidecar.new_store())
        return reference_rows(opened[0])

    sidecar.add_read_route(REFERENCES_ROUTE, route)
