"""Writes a user makes while `serve` holds the embedded store, through the sidecar's HTTP port.

chDB admits one process per store directory, so `agenttrail references load` and `agenttrail
backfill` cannot open the store while the sidecar runs, and only the sidecar can change the
judges it runs; the CLI finds the sidecar through the store's lock file, as read commands do,
and sends the same command here. Mounted at `/api/v1/admin` under the same bearer token as the
read API (every route answers 401 without it):

    POST /api/v1/admin/references   {"source": "refs.yaml", "entries": [<entry>, ...], "rescore": bool}
        -> 200 {"added": [...], "updated": [...], "unchanged": [...],
                "rescored": [{"task", "runs", "lookback_s"}, ...]}   (runs put back in the queue)
        -> 409 {"message": ...} rescore asked of a sidecar without the online evaluator
        -> 400 {"message": ...} when the entries are not a valid reference set
    POST /api/v1/admin/judges/reload   {}   (the same as SIGHUP to serve)
        -> 200 {"config_file", "added", "changed", "removed", "unchanged", "judges": [...]}
        -> 422 {"message": ...} when the edited judges section is refused (the old stays in force)
    POST /api/v1/admin/alerts/reload   {}   (the same as SIGHUP to serve, for the alerts section)
        -> 200 {"config_file", "rules": {"added", "changed", "removed", "unchanged"},
                "channels": {...the same}, "settings": [key, ...], "summary": "rules added x; ..."}
        -> 422 {"message": ...} when the edited alerts section is refused (file, rule and key
                named; the rules in force keep being evaluated), or serve has no --config
        -> 404 {"message": ...} a sidecar built without alerts (an embedder's)
    POST /api/v1/admin/backfill   {"judge": name, "fingerprint": spec hash or null,
                                   "runs": {since, until, agent, task, limit}, "dry_run": bool}
        -> 202 {"id", "judge", "version", "state": "running", "error", "report"}
        -> 409 {"message": ...} no such judge in force, the CLI's file differs, or one is running
        -> 400 {"message": ...} a bad filter
    GET  /api/v1/admin/backfill/{id}          -> 200 the job (state running|done|failed|cancelled)
    POST /api/v1/admin/backfill/{id}/cancel   -> 200 the job (it stops between batches)

and, as Prometheus and Alertmanager have it, `POST /-/reload` (same token): exactly what SIGHUP
does (every section that reloads: judges, alerts), 200 {"reloaded": true}, or 422 {"message"}
with what each refused section said (those keep their settings, the others took theirs).

and read routes: `GET /api/v1/references` (every task's current reference, as `agenttrail
references list --format json` prints it) and `GET /api/v1/judges` (the judges in force, as
`agenttrail judges list --format json`).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agenttrail.collector.auth import bearer_ok
from agenttrail.collector.errors import AgentTrailError, ConfigError
from agenttrail.collector.queries import QueryError, TrajectoryFilter
from agenttrail.evaluators.admin.backfill_jobs import BackfillBusy, BackfillJob, BackfillJobs
from agenttrail.evaluators.routes import ADMIN_PREFIX, REFERENCES_ROUTE
from agenttrail.evaluators.scoring.reference_store import reference_rows, store_reference_set
from agenttrail.evaluators.scoring.references import ReferenceSetError, parse_reference_set
from agenttrail.evaluators.scoring.rescore import rescore_tasks

if TYPE_CHECKING:
    from agenttrail.collector.sidecar import Sidecar
    from agenttrail.collector.store import Store
    from agenttrail.evaluators.judges.setup import LiveJudges
    from agenttrail.evaluators.monitoring.alerts.install import LiveAlerts
    from agenttrail.evaluators.scoring.worker import EvaluatorWorker


log = logging.getLogger(__name__)


def _message(text: str, status_code: int) -> JSONResponse:
    return JSONResponse({"message": text}, status_code=status_code)


async def _body(request: Request) -> dict[str, Any]:
    document = json.loads(await request.body() or b"{}")  # JSONDecodeError is a ValueError
    if not isinstance(document, dict):
        raise ValueError("expected a JSON object")
    return document


def admin_app(
    sidecar: Sidecar,
    judges: LiveJudges | None = None,
    jobs: BackfillJobs | None = None,
    scoring: EvaluatorWorker | None = None,
    alerts: LiveAlerts | None = None,
) -> Starlette:
    """The write endpoints, each on a store of its own opened for the request (or the job)."""

    def authorized(request: Request) -> bool:
        return bearer_ok(request.headers.get("authorization"), sidecar.config.bearer_token)

    def load(document: dict[str, Any]) -> dict[str, Any]:
        reference_set = parse_reference_set(document.get("entries"), source=str(document.get("source")))
        store = sidecar.new_store()
        try:
            result = store_reference_set(store, reference_set, source=str(document.get("source", "api")))
            rescored = []
            if document.get("rescore") and scoring is not None:
                rescored = rescore_tasks(
                    store,
                    reference_set.entries,
                    evaluator_version=scoring.version,
                    lookback_s=scoring.config.lookback_s,
                )
                scoring.rescan()  # the runs went back behind its cursor
        finally:
            store.close()
        return {
            "added": result.added,
            "updated": result.updated,
            "unchanged": result.unchanged,
            "rescored": [item.to_json() for item in rescored],
        }

    async def references(request: Request) -> JSONResponse:
        if not authorized(request):
            return _message("missing or wrong bearer token", 401)
        try:
            document = await _body(request)
            if document.get("rescore") and scoring is None:
                return _message("this sidecar runs no online evaluator to re-score with", 409)
            return JSONResponse(await run_in_threadpool(load, document))
        except (ValueError, ReferenceSetError) as exc:
            return _message(str(exc), 400)

    async def reloaded(request: Request, live: LiveJudges | LiveAlerts | None, what: str) -> JSONResponse:
        """A section's reload, as SIGHUP's: what changed, or why it was refused (logged too)."""
        if not authorized(request):
            return _message("missing or wrong bearer token", 401)
        if live is None:
            return _message(f"this sidecar runs no {what}", 404)
        try:
            summary: Any = await run_in_threadpool(live.reload)  # ReloadSummary or AlertsReload
        except AgentTrailError as exc:
            log.error("%s reload refused, the %s in force stay as they were: %s", what, what, exc)
            return _message(f"{exc}; the {what} in force are unchanged", 422)
        except Exception as exc:  # a bug, not the user's file: say so, keep serving
            log.exception("%s reload failed unexpectedly", what)
            return _message(f"reload failed: {exc!r}; the {what} in force are unchanged", 500)
        return JSONResponse(summary.to_json())

    async def reload_judges(request: Request) -> JSONResponse:
        return await reloaded(request, judges, "judges")

    async def reload_alerts(request: Request) -> JSONResponse:
        return await reloaded(request, alerts, "alert rules")

    async def start_backfill(request: Request) -> JSONResponse:
        if not authorized(request):
            return _message("missing or wrong bearer token", 401)
        if judges is None or jobs is None:
            return _message("this sidecar runs no judges", 404)
        try:
            document = await _body(request)
            runs = TrajectoryFilter.from_params({k: str(v) for k, v in (document.get("runs") or {}).items()})
            fingerprint = document.get("fingerprint")
            online = await run_in_threadpool(
                judges.for_backfill, str(document.get("judge")), str(fingerprint) if fingerprint else None
            )
            job = jobs.submit(online, runs, dry_run=bool(document.get("dry_run")))
        except (ValueError, QueryError) as exc:
            return _message(str(exc), 400)
        except (ConfigError, BackfillBusy) as exc:
            return _message(str(exc), 409)
        return JSONResponse(job.to_json(), status_code=202)

    def find_job(request: Request) -> BackfillJob | JSONResponse:
        if not authorized(request):
            return _message("missing or wrong bearer token", 401)
        job_id = request.path_params["job"]
        job = jobs.get(job_id) if jobs is not None else None
        return job or _message(f"no backfill job {job_id!r} (finished jobs are kept a while)", 404)

    async def backfill_job(request: Request) -> JSONResponse:
        found = find_job(request)
        return found if isinstance(found, JSONResponse) else JSONResponse(found.to_json())

    async def cancel_backfill(request: Request) -> JSONResponse:
        found = find_job(request)
        if isinstance(found, JSONResponse):
            return found
        found.cancel.set()
        return JSONResponse(found.to_json())

    return Starlette(
        routes=[
            Route("/references", references, methods=["POST"]),
            Route("/judges/reload", reload_judges, methods=["POST"]),
            Route("/alerts/reload", reload_alerts, methods=["POST"]),
            Route("/backfill", start_backfill, methods=["POST"]),
            Route("/backfill/{job}", backfill_job, methods=["GET"]),
            Route("/backfill/{job}/cancel", cancel_backfill, methods=["POST"]),
        ]
    )


def lifecycle_app(sidecar: Sidecar) -> Starlette:
    """`POST /-/reload`: SIGHUP over HTTP, for a serve its operator cannot signal."""

    async def reload(request: Request) -> JSONResponse:
        if not bearer_ok(request.headers.get("authorization"), sidecar.config.bearer_token):
            return _message("missing or wrong bearer token", 401)
        problems = await run_in_threadpool(sidecar.reload_problems)
        if problems:
            return _message("; ".join(problems) + "; the sections refused keep their settings", 422)
        return JSONResponse({"reloaded": True})

    return Starlette(routes=[Route("/reload", reload, methods=["POST"])])


def install_admin(
    sidecar: Sidecar,
    judges: LiveJudges | None = None,
    scoring: EvaluatorWorker | None = None,
    alerts: LiveAlerts | None = None,
) -> None:
    """Mount the write endpoints (with the backfill jobs, a sidecar worker) and the references
    route; `scoring` is the evaluator that re-scores when a references load asks for it, `alerts`
    the section the alerts reload replaces."""
    jobs = BackfillJobs(sidecar.new_store) if judges is not None else None
    if jobs is not None:
        sidecar.add_worker(jobs)
    sidecar.mount_app(ADMIN_PREFIX, admin_app(sidecar, judges, jobs, scoring, alerts))
    sidecar.mount_app("/-", lifecycle_app(sidecar))
    opened: list[Store] = []

    def route(params: dict[str, str]) -> list[dict[str, Any]]:
        if not opened:
            opened.append(sidecar.new_store())
        return reference_rows(opened[0])

    sidecar.add_read_route(REFERENCES_ROUTE, route)
