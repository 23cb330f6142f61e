"""The console's Starlette app: server-rendered pages over the store, behind the sidecar's token.

`create_app` returns an ASGI app whose routes start at its own root (`/runs`, `/runs/{id}`...);
the sidecar mounts it at `/console`, and every link is built from the request's root path, so
it works under any prefix. Store calls run in a worker thread, one at a time per app (a chDB
handle serialises calls anyway).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from agenttrail.collector.auth import token_ok
from agenttrail.collector.durations import format_duration
from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.queries import QueryError, parse_time
from agenttrail.collector.store import Store
from agenttrail.evaluators.console import charts
from agenttrail.evaluators.console.compare import compare_versions
from agenttrail.evaluators.console.drift_examples import example_runs
from agenttrail.evaluators.console.overview import agent_overview
from agenttrail.evaluators.console.references_page import (
    ReferenceFormError,
    entry_text,
    reference_list,
    save_reference,
    versions,
)
from agenttrail.evaluators.console.run_page import pretty_json, trace_page
from agenttrail.evaluators.console.runs import RunsFilter, filter_choices, list_runs, score_badges
from agenttrail.evaluators.monitoring.alerts.config import AlertRule, describe_rule
from agenttrail.evaluators.monitoring.alerts.history import AlertFilter, query_alerts, query_history
from agenttrail.evaluators.monitoring.display import CHANGE_THRESHOLD_UNITS, format_alarm, json_object
from agenttrail.evaluators.scoring.audit import AuditSubject
from agenttrail.evaluators.scoring.reference_store import latest_references
from agenttrail.evaluators.scoring.rescore import rescore_task
from agenttrail.evaluators.scoring.worker import EvaluatorConfig

HERE = Path(__file__).parent
COOKIE = "agenttrail_console"
T = TypeVar("T")


@dataclass
class ConsoleSettings:
    """What the console needs from the sidecar's configuration."""

    bearer_token: str | None = None
    evaluator: EvaluatorConfig = field(default_factory=EvaluatorConfig)
    judges: Callable[[], Sequence[AuditSubject]] = tuple  # the configured LLM judges' audit subjects, now
    alert_rules: Callable[[], Sequence[AlertRule]] = lambda: ()  # those in force (a reload changes them)
    on_references_changed: Callable[[], None] | None = None  # e.g. make the evaluator worker rescan its queue

    @property
    def audit_subjects(self) -> list[AuditSubject]:
        version = self.evaluator.version
        return [AuditSubject("trajectory", version, version), *self.judges()]


INTERVAL_KEYS = ("a_since", "a_until", "b_since", "b_until")  # the compare page's intervals


class _StoreAccess:
    """One store client for the app, opened on first use, used by one thread at a time."""

    def __init__(self, factory: Callable[[], Store]) -> None:
        self._factory = factory
        self._store: Store | None = None
        self._lock = threading.Lock()

    async def run(self, work: Callable[[Store], T]) -> T:
        def call() -> T:
            with self._lock:
                if self._store is None:
                    self._store = self._factory()
                return work(self._store)

        return await run_in_threadpool(call)


def _when(value: Any) -> str:
    """An ISO time or epoch seconds as `2026-11-25 10:00:03` (UTC)."""
    if value is None or value == "":
        return "–"
    moment = (
        datetime.fromtimestamp(float(value), UTC)
        if isinstance(value, int | float)
        else parse_time(str(value))
    )
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _iso(seconds: float) -> str:
    """Epoch seconds as the ISO form the runs filter takes (links to a window's runs)."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _duration(seconds: float | None) -> str:
    """In the unit that fits, as the CLI prints it (a 0.3 ms run is "300 us", not "0 ms")."""
    return "–" if seconds is None else format_duration(seconds)


def _duration_ms(milliseconds: float | None) -> str:
    return "–" if milliseconds is None else format_duration(milliseconds / 1000)


def _number(value: Any, spec: str = ".3g") -> str:
    if value is None:
        return "–"
    return format(value, spec)


class _TokenGate(BaseHTTPMiddleware):
    """The sidecar's bearer token, as the Authorization header or the login form's cookie."""

    def __init__(self, app: Any, token: str | None) -> None:
        super().__init__(app)
        self.token = token

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        path = request.url.path[len(request.scope.get("root_path", "")) :]
        if self.token is None or path == "/login" or path.startswith("/static/"):
            return await call_next(request)
        header = request.headers.get("authorization", "")
        given = header[7:] if header.lower().startswith("bearer ") else request.cookies.get(COOKIE, "")
        if given and token_ok(given, self.token):
            return await call_next(request)
        if path.startswith("/api/") or "text/html" not in request.headers.get("accept", ""):
            return JSONResponse(
                {"error": "missing or wrong bearer token: send Authorization: Bearer <token>"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        root = request.scope.get("root_path", "")
        asked = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        target = f"{root}/login?{urlencode({'next': asked})}"
        return RedirectResponse(target, status_code=303)


def create_app(store_factory: Callable[[], Store], settings: ConsoleSettings | None = None) -> Starlette:
    """The console as an ASGI app; `store_factory` opens the store client it reads and writes."""
    settings = settings or ConsoleSettings()
    store = _StoreAccess(store_factory)
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    templates = Jinja2Templates(env=environment)
    templates.env.filters.update(
        iso=_iso, when=_when, duration=_duration, duration_ms=_duration_ms, number=_number, pretty=pretty_json
    )
    templates.env.globals.update(chart=charts.render)

    def page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        root = request.scope.get("root_path", "")

        def url(path: str, **params: Any) -> str:
            query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
            return f"{root}{path}" + (f"?{query}" if query else "")

        return templates.TemplateResponse(
            request,
            template,
            {"url": url, "root": root, "nav": template.split(".")[0], "quote": quote, **context},
            status_code=status_code,
        )

    def problem(request: Request, message: str, status_code: int = 400) -> HTMLResponse:
        return page(request, "error.html", status_code=status_code, message=message)

    async def home(request: Request) -> Response:
        return RedirectResponse(f"{request.scope.get('root_path', '')}/runs", status_code=307)

    async def login_form(request: Request) -> Response:
        return page(request, "login.html", next=request.query_params.get("next", ""), failed=False)

    async def login(request: Request) -> Response:
        form = await _form(request)
        token = str(form.get("token", ""))
        root = request.scope.get("root_path", "")
        target = str(form.get("next") or "")
        if not target.startswith(f"{root}/") or target.startswith("//"):
            target = f"{root}/runs"
        if settings.bearer_token is not None and not token_ok(token, settings.bearer_token):
            return page(request, "login.html", status_code=401, next=target, failed=True)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            COOKIE,
            token,
            httponly=True,
            samesite="strict",
            path=f"{root}/",
            secure=request.url.scheme == "https",
        )
        return response

    async def runs(request: Request) -> Response:
        try:
            where = RunsFilter.from_params(dict(request.query_params))
        except QueryError as exc:
            return problem(request, str(exc))

        def work(s: Store) -> tuple[Any, ...]:
            found = list_runs(s, where)
            return found, score_badges(s, found.runs), filter_choices(s)

        found, badges, choices = await store.run(work)
        newest = (
            f"{found.runs[0]['start_us']}:{found.runs[0]['trace_id']}:{found.runs[0]['root_span_id']}"
            if found.runs
            else ""
        )
        return page(
            request,
            "runs.html",
            where=where,
            page=found,
            badges=badges,
            choices=choices,
            newest=newest,
            filters=where.to_params(),
        )

    async def runs_rows(request: Request) -> Response:
        """Rows newer than `after` (the page's live updates), as table rows."""
        try:
            where = RunsFilter.from_params(dict(request.query_params))
        except QueryError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)

        def work(s: Store) -> tuple[Any, ...]:
            found = list_runs(s, where)
            return found, score_badges(s, found.runs)

        found, badges = await store.run(work)
        response = page(request, "runs_rows.html", runs=found.runs, badges=badges, fresh=True)
        if found.runs:
            first = found.runs[0]
            response.headers["X-Newest"] = f"{first['start_us']}:{first['trace_id']}:{first['root_span_id']}"
        return response

    async def runs_json(request: Request) -> Response:
        try:
            where = RunsFilter.from_params(dict(request.query_params))
        except QueryError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        found = await store.run(lambda s: list_runs(s, where))
        return JSONResponse({"runs": found.runs, "next": found.next_cursor})

    async def run(request: Request) -> Response:
        trace_id = request.path_params["trace_id"]
        if len(trace_id) != 32 or any(c not in "0123456789abcdef" for c in trace_id):
            return problem(request, f"{trace_id!r} is not a trace id: 32 lowercase hex characters")
        found = await store.run(
            lambda s: trace_page(
                s,
                trace_id,
                audit_subjects=settings.audit_subjects,
                lookback_s=settings.evaluator.lookback_s,
                default_metrics=settings.evaluator.metrics,
            )
        )
        if found is None:
            return problem(request, f"no spans or runs stored for trace {trace_id}", 404)
        return page(request, "run.html", trace=found)

    async def agents(request: Request) -> Response:
        rows = await store.run(
            lambda s: s.query(
                "SELECT Agent, count(), sum(Failure), max(toUnixTimestamp64Micro(Start)) FROM trajectories "
                "WHERE IsDeleted = 0 AND Start >= now64(6) - toIntervalDay(7) GROUP BY Agent ORDER BY Agent"
            )
        )
        return page(request, "agents.html", agents=rows)

    async def agent(request: Request) -> Response:
        name = request.path_params["agent"]
        try:
            view = await store.run(
                lambda s: agent_overview(
                    s, name, request.query_params.get("since", ""), request.query_params.get("until", "")
                )
            )
        except QueryError as exc:
            return problem(request, str(exc))
        return page(request, "agent.html", view=view)

    async def drift(request: Request) -> Response:
        agent_name = request.query_params.get("agent", "")
        params: dict[str, Any] = {}
        clause = ""
        if agent_name:
            clause, params["agent"] = "WHERE Agent = {agent:String}", agent_name
        rows = await store.run(
            lambda s: s.query(
                "SELECT toUnixTimestamp64Milli(DetectedAt), Agent, Task, Metric, Test, Drifted, PValue, "
                "EffectSize, "
                "BaselineN, RecentN, BaselineValue, RecentValue, toUnixTimestamp64Milli(WindowStart), "
                "toUnixTimestamp64Milli(WindowEnd), Detail "
                f"FROM drift_events {clause} ORDER BY DetectedAt DESC, Drifted DESC, Metric "
                "LIMIT 1 BY Agent, Task, Metric, Test "
                "LIMIT 200",
                params,
            )
        )
        keys = (
            "at", "agent", "task", "metric", "test", "drifted", "p_value", "effect_size", "baseline_n",
            "recent_n", "baseline_value", "recent_value", "window_start", "window_end", "detail",
        )  # fmt: skip
        findings = [dict(zip(keys, row, strict=True)) for row in rows]
        for finding in findings:
            for key in ("at", "window_start", "window_end"):
                finding[key] = finding[key] / 1000
            finding["detail"] = _detail(finding["detail"])
            note = finding["detail"].get("note") if isinstance(finding["detail"], dict) else None
            if finding["test"] in CHANGE_THRESHOLD_UNITS and isinstance(note, dict):
                # A change detector's finding in words, as `agenttrail drift` prints it.
                finding["detail"]["note"] = format_alarm(finding["test"], note, finding["recent_n"])

        def examples(s: Store) -> None:
            for finding in findings:  # drifted ones: a few runs each that show the change
                finding["examples"] = example_runs(s, finding) if finding["drifted"] else []

        await store.run(examples)
        return page(request, "drift.html", findings=findings, agent=agent_name)

    async def alerts(request: Request) -> Response:
        def work(s: Store) -> tuple[Any, ...]:
            return (
                query_alerts(s, AlertFilter(all=True, limit=200)),
                query_history(s, AlertFilter(limit=100)),
            )

        current, history = await store.run(work)
        rules = [(rule, describe_rule(rule)) for rule in settings.alert_rules()]
        return page(request, "alerts.html", alerts=current, history=history, rules=rules)

    async def alert_rule(request: Request) -> Response:
        name = request.path_params["rule_name"]

        def work(s: Store) -> tuple[Any, ...]:
            return (
                query_alerts(s, AlertFilter(all=True, rule=name, limit=200)),
                query_history(s, AlertFilter(rule=name, limit=500)),
            )

        current, history = await store.run(work)
        rule = next((r for r in settings.alert_rules() if r.name == name), None)
        if rule is None and not current and not history:
            return problem(request, f"no alert rule named {name!r} and no alerts of that name stored", 404)
        return page(
            request,
            "alert_rule.html",
            rule_name=name,
            rule=rule,
            described=describe_rule(rule) if rule else "",
            alerts=current,
            history=history,
            intervals=_firing_intervals(history, rule),
        )

    async def compare(request: Request) -> Response:
        agent_name = request.query_params.get("agent", "")
        a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
        given = {key: request.query_params.get(key, "").strip() for key in INTERVAL_KEYS}
        try:  # each side's interval: ISO 8601 or a duration back from now (7d), as the runs filter
            moments = {key: parse_time(value) if value else None for key, value in given.items()}
        except QueryError as exc:
            return problem(request, f"compare interval: {exc}")
        intervals = {side: (moments[f"{side}_since"], moments[f"{side}_until"]) for side in ("a", "b")}
        view = await store.run(lambda s: compare_versions(s, agent_name, a, b, intervals))
        return page(request, "compare.html", view=view, given=given)

    async def references(request: Request) -> Response:
        rows = await store.run(reference_list)
        return page(request, "references.html", rows=rows)

    async def reference(request: Request) -> Response:
        task = request.path_params["task"]

        def work(s: Store) -> tuple[Any, ...]:
            return latest_references(s).get(task), versions(s, task)

        current, history = await store.run(work)
        if current is None and request.query_params.get("new") != "1":
            return problem(request, f"no reference stored for task {task!r}", 404)
        return page(
            request,
            "reference.html",
            task=task,
            current=current,
            history=history,
            text=entry_text(current) if current else "reference_trajectory:\n  - {name: tool, args: {}}\n",
            error="",
            rescored=_rescore_note(request),
        )

    async def reference_new(request: Request) -> Response:
        return page(
            request,
            "reference.html",
            task="",
            current=None,
            history=[],
            text="reference_trajectory:\n  - {name: lookup_order, args: {order_id: 1}}\n",
            error="",
            rescored=None,
        )

    async def reference_save(request: Request) -> Response:
        form = await _form(request)
        task, text = str(form.get("task", "")), str(form.get("reference", ""))
        rescore = form.get("rescore") == "1"

        def work(s: Store) -> tuple[Any, ...]:
            result = save_reference(s, task, text, source="console")
            done = None
            if rescore:
                done = rescore_task(
                    s,
                    task.strip(),
                    evaluator_version=settings.evaluator.version,
                    lookback_s=settings.evaluator.lookback_s,
                )
            return result, done

        try:
            result, done = await store.run(work)
        except ReferenceFormError as exc:
            return page(
                request,
                "reference.html",
                status_code=400,
                task=task,
                current=None,
                history=[],
                text=text,
                error=str(exc),
                rescored=None,
            )
        if done is not None and settings.on_references_changed is not None:
            settings.on_references_changed()
        changed = "added" if result.added else "updated" if result.updated else "unchanged"
        query = {"saved": changed, "rescored": str(done.runs) if done else ""}
        root = request.scope.get("root_path", "")
        shown = urlencode({k: v for k, v in query.items() if v})
        return RedirectResponse(
            f"{root}/references/{quote(task.strip(), safe='')}?{shown}",
            status_code=303,
        )

    async def failed(request: Request, exc: Exception) -> Response:
        return problem(request, f"the store refused the query: {exc}", 503)

    routes = [
        Route("/", home),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/runs", runs),
        Route("/runs/rows", runs_rows),
        Route("/runs/{trace_id}", run),
        Route("/api/runs", runs_json),
        Route("/agents", agents),
        Route("/agents/{agent}", agent),
        Route("/drift", drift),
        Route("/alerts", alerts),
        Route("/alerts/{rule_name}", alert_rule),
        Route("/compare", compare),
        Route("/references", references, methods=["GET"]),
        Route("/references", reference_save, methods=["POST"]),
        Route("/references/new", reference_new),
        Route("/references/{task}", reference),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(_TokenGate, token=settings.bearer_token)],
        exception_handlers={AgentTrailError: failed},
    )


async def _form(request: Request) -> dict[str, str]:
    """An urlencoded form body (the console's forms post nothing else; no multipart parser needed)."""
    body = (await request.body())[:1_000_000]
    return dict(parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True))


def _rescore_note(request: Request) -> dict[str, str] | None:
    saved = request.query_params.get("saved")
    if not saved:
        return None
    return {"saved": saved, "rescored": request.query_params.get("rescored", "")}


def _detail(text: str) -> dict[str, Any] | str:
    """A drift event's detail: JSON whose `note` may itself hold JSON (e.g. per-tool share changes);
    text that holds no JSON object is shown as it is ('' as nothing)."""
    detail = json_object(text)
    if detail is None:
        return text if text else {}
    note = json_object(detail.get("note"))
    if note is not None:
        detail["note"] = note
    return detail


def _firing_intervals(history: list[dict[str, Any]], rule: AlertRule | None) -> list[dict[str, Any]]:
    """Each time the rule's alert fired: when, until when, its labels, and the runs to look at."""
    intervals: list[dict[str, Any]] = []
    opened: dict[str, dict[str, Any]] = {}
    for event in sorted(
        (e for e in history if e["event"] == "transition"), key=lambda e: (str(e["at"]), e["to"] != "firing")
    ):
        key = event["fingerprint"]
        if event["to"] == "firing" and key not in opened:
            opened[key] = {
                "fingerprint": key,
                "labels": event["labels"],
                "fired_at": event["at"],
                "value": event["value"],
            }
        elif event["to"] in ("resolved", "inactive") and key in opened:
            interval = opened.pop(key)
            interval["resolved_at"] = event["at"]
            intervals.append(interval)
    intervals.extend({**interval, "resolved_at": None} for interval in opened.values())
    window_s = _window_s(rule)
    for interval in intervals:
        labels = dict(interval["labels"])
        if rule is not None:
            labels = {**{k: v for k, v in _scope_labels(rule).items() if v}, **labels}
        fired = parse_time(str(interval["fired_at"])).timestamp()
        since = datetime.fromtimestamp(fired - window_s, UTC).isoformat().replace("+00:00", "Z")
        until = (
            parse_time(str(interval["resolved_at"])).isoformat().replace("+00:00", "Z")
            if interval["resolved_at"]
            else ""
        )
        interval["runs_params"] = {
            "agent": labels.get("agent", ""),
            "task": labels.get("task", ""),
            "version": labels.get("agent_version", ""),
            "since": since,
            "until": until,
        }
    return sorted(intervals, key=lambda i: str(i["fired_at"]), reverse=True)


def _scope_labels(rule: AlertRule) -> dict[str, str]:
    """A rule scoped to one agent or task labels its runs so even when it does not group by them."""
    scope = rule.scope
    return {
        "agent": scope.agents[0] if len(scope.agents) == 1 else "",
        "task": scope.tasks[0] if len(scope.tasks) == 1 else "",
    }


def _window_s(rule: AlertRule | None) -> float:
    """How far before firing the rule looked: its condition's window, or 5 minutes."""
    window = getattr(rule.condition, "window_s", None) if rule is not None else None
    return float(window) if isinstance(window, int | float) else 300.0
