"""What each MCP tool answers, as plain functions over a store (no MCP types here).

They read through the same functions as the CLI and the console (`list_runs`, `trace_page`,
`compare_versions`, `query_stats`, `query_alerts`, the drift table), and shape the answer for a
model's context: a run's trajectory and its alignment with the reference, not every span
attribute. A question a model can fix itself fails with `ToolInputError` saying what to change:
an unknown id lists the closest ids, an empty search names the filter that emptied it.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any, TypeVar

from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.queries import QueryError, iso_utc
from agenttrail.collector.store import Store
from agenttrail.evaluators.mcp_server.sql_guard import RefusedQuery, check_select

_T = TypeVar("_T")

TEXT_CHARS = 300  # inputs, outputs and explanations are cut to this in tool answers
SQL_MAX_ROWS = 1000
SQL_TIMEOUT_S = 10
MAX_SPANS = 200  # get_run(spans=True): the first spans of the waterfall


class ToolInputError(AgentTrailError, ValueError):
    """The question cannot be answered as asked; the message says what to ask instead."""


def _cut(value: Any, chars: int = TEXT_CHARS) -> Any:
    """A value as text of at most `chars` characters (JSON for structures); None stays None."""
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _number(value: Any, digits: int = 4) -> float | None:
    if value is None:
        return None
    number = float(value)
    return None if math.isnan(number) or math.isinf(number) else round(number, digits)


class StoreReader:
    """The tools' access to one store: a client for their reads and one for user SQL.

    Tools run on worker threads; each client is used by one call at a time. User SQL gets a
    client of its own so the read-only settings it runs under never touch the other reads.
    """

    def __init__(self, open_store: Callable[[], Store]) -> None:
        self._open = open_store
        self._stores: dict[str, Store] = {}
        self._locks = {"reads": threading.Lock(), "sql": threading.Lock()}

    def run(self, function: Callable[[Store], _T], *, client: str = "reads") -> _T:
        with self._locks[client]:
            if client not in self._stores:
                self._stores[client] = self._open()
            try:
                return function(self._stores[client])
            except QueryError as exc:
                raise ToolInputError(str(exc)) from exc

    def close(self) -> None:
        for store in self._stores.values():
            store.close()
        self._stores.clear()


# -- agents and versions ----------------------------------------------------------------------

_AGENTS = """
SELECT Agent, AgentVersion, count(), avg(Failure), toUnixTimestamp64Micro(min(Start)),
       toUnixTimestamp64Micro(max(Start)), groupUniqArray(20)(Task)
FROM trajectories FINAL WHERE IsDeleted = 0
GROUP BY Agent, AgentVersion ORDER BY Agent, min(Start)
"""


def list_agents(store: Store) -> dict[str, Any]:
    """Each agent with its versions (oldest first): runs, failure rate, first and last run, tasks."""
    agents: dict[str, list[dict[str, Any]]] = {}
    for agent, version, runs, failure, first, last, tasks in store.query(_AGENTS):
        agents.setdefault(agent, []).append(
            {
                "version": version,
                "runs": int(runs),
                "failure_rate": _number(failure),
                "first_run": iso_utc(int(first)),
                "last_run": iso_utc(int(last)),
                "tasks": sorted(t for t in tasks if t),
            }
        )
    if not agents:
        return {
            "agents": [],
            "note": "no runs are stored yet: is an instrumented agent exporting to the sidecar?",
        }
    return {"agents": [{"agent": name, "versions": versions} for name, versions in agents.items()]}


# -- runs ----------------------------------------------------------------------------------------


def _run_summary(run: dict[str, Any]) -> dict[str, Any]:
    """One run in a list: who, when, how it ended, and its tool path ("!" marks a failed call)."""
    statuses = run.get("tool_statuses") or []
    path = [
        name + ("!" if i < len(statuses) and statuses[i] == "error" else "")
        for i, name in enumerate(run["tools"])
    ]
    return {
        "run_id": run["trace_id"],
        "agent": run["agent"],
        "version": run["version"],
        "task": run["task"],
        "start": run["start"],
        "latency_s": _number(run["latency_s"], 3),
        "status": (run["error_type"] or "failed") if run["failure"] else "ok",
        "tool_path": " > ".join(path) or "(no tool calls)",
    }


def search_runs(store: Store, filters: dict[str, str], limit: int) -> dict[str, Any]:
    """Runs matching every filter, newest first; when none match, which filter emptied the result."""
    from agenttrail.evaluators.console.runs import RunsFilter, list_runs

    where = RunsFilter.from_params({**{k: v for k, v in filters.items() if v}, "limit": str(limit)})
    page = list_runs(store, where)
    answer: dict[str, Any] = {"runs": [_run_summary(run) for run in page.runs]}
    if page.next_cursor:
        answer["next_cursor"] = page.next_cursor
    if not page.runs:
        answer["why_empty"] = _why_empty(store, where)
    return answer


_FILTER_CHOICES = {
    "agent": "SELECT DISTINCT Agent FROM trajectories WHERE IsDeleted = 0 LIMIT 50",
    "version": "SELECT DISTINCT AgentVersion FROM trajectories WHERE IsDeleted = 0 LIMIT 50",
    "task": "SELECT DISTINCT Task FROM trajectories WHERE IsDeleted = 0 LIMIT 100",
    "tool": "SELECT DISTINCT arrayJoin(ToolNames) FROM trajectories WHERE IsDeleted = 0 LIMIT 100",
}


def _why_empty(store: Store, where: Any) -> str:
    """Add the given filters one at a time and name the first one after which nothing matches."""
    from agenttrail.evaluators.console.runs import RunsFilter

    given = [(f.name, getattr(where, f.name)) for f in fields(where) if f.name not in ("limit",)]
    given = [(name, value) for name, value in given if value]
    if not given:
        return "no runs are stored yet"
    applied: dict[str, str] = {}
    matched = _count_runs(store, RunsFilter())
    for name, value in given:
        if name == "below":
            continue  # applied together with metric
        applied[name] = value
        if name == "metric":
            applied["below"] = where.below
        count = _count_runs(store, RunsFilter.from_params(applied))
        if count == 0:
            shown = "text" if name == "q" else name  # the tool's name for it
            text = f"filter {shown}={value!r} left no runs ({matched} matched the filters before it)"
            if name in _FILTER_CHOICES:
                known = sorted(str(row[0]) for row in store.query(_FILTER_CHOICES[name]) if row[0])
                text += f"; known {name} values: {', '.join(known[:30])}"
            return text
        matched = count
    return f"{matched} runs match every filter, but none on this page (the cursor is past them)"


def _count_runs(store: Store, where: Any) -> int:
    clauses, params = where.where()
    rows = store.query(f"SELECT count() FROM trajectories FINAL WHERE {' AND '.join(clauses)}", params)
    return int(rows[0][0]) if rows else 0


_CLOSEST = """
SELECT TraceId FROM (SELECT DISTINCT TraceId FROM trajectories WHERE IsDeleted = 0)
ORDER BY editDistance(substring(TraceId, 1, {n:UInt32}), {prefix:String}), TraceId LIMIT 5
"""
_MATCHES = """
SELECT DISTINCT TraceId FROM trajectories
WHERE IsDeleted = 0 AND startsWith(TraceId, {prefix:String}) LIMIT 11
"""


def resolve_run_id(store: Store, run_id: str) -> str:
    """The full trace id that `run_id` (the id, or a prefix of 8+ hex) names; else what to give."""
    text = run_id.strip().lower()
    if len(text) < 8 or len(text) > 32 or any(c not in "0123456789abcdef" for c in text):
        raise ToolInputError(
            f"run_id {run_id!r} must be a trace id (32 hex) or its first 8+ hex characters, "
            "as search_runs lists them"
        )
    found = [row[0] for row in store.query(_MATCHES, {"prefix": text})]
    if len(found) == 1:
        return str(found[0])
    if len(found) > 1:
        shown = ", ".join(found[:10]) + (", ..." if len(found) > 10 else "")
        raise ToolInputError(f"run_id {run_id!r} is the start of several runs; give more of it: {shown}")
    closest = [row[0] for row in store.query(_CLOSEST, {"prefix": text, "n": len(text)})]
    hint = f"; the closest stored ids: {', '.join(closest)}" if closest else "; no runs are stored yet"
    raise ToolInputError(f"no run {run_id!r} is stored{hint}")


_VERSIONS = "SELECT RootSpanId, AgentVersion FROM trajectories FINAL WHERE TraceId = {trace:String}"


def get_run(
    store: Store, run_id: str, default_metrics: Sequence[str], *, full_io: bool = False, spans: bool = False
) -> dict[str, Any]:
    """One trace's runs: trajectory, alignment with the reference, scores, judge reasons, errors."""
    from agenttrail.evaluators.console.run_page import trace_page

    trace_id = resolve_run_id(store, run_id)
    page = trace_page(store, trace_id, audit_subjects=[], lookback_s=0, default_metrics=default_metrics)
    if page is None:  # deleted between the two reads
        raise ToolInputError(f"run {trace_id} is no longer stored")
    chars = 4000 if full_io else TEXT_CHARS
    versions = dict(store.query(_VERSIONS, {"trace": trace_id}))
    runs = []
    for view in page.runs:
        run, calls = view.run, view.calls
        tool_calls = [
            {
                "step": i + 1,
                "name": call["name"],
                "status": call["status"],
                **({"error_type": call["error_type"]} if call.get("error_type") else {}),
                "input": _cut(call.get("input"), chars),
                "output": _cut(call.get("output"), chars),
                "latency_ms": _number(call.get("latency_ms"), 1),
            }
            for i, call in enumerate(calls)
        ]
        alignment = [
            {
                "kind": step.kind,
                "step": None if step.predicted is None else step.predicted + 1,
                "called": None if step.predicted is None else calls[step.predicted]["name"],
                "expected": None if step.reference is None else view.reference_calls[step.reference]["name"],
                **({"differing_arguments": list(step.differing_keys)} if step.differing_keys else {}),
            }
            for step in view.steps
        ]
        errors = [
            f"step {c['step']} {c['name']}: {c.get('error_type') or 'error'}"
            for c in tool_calls
            if c["status"] == "error"
        ]
        if run["failure"]:
            errors.insert(0, f"run failed: {run['error_type'] or 'error status on the agent span'}")
        runs.append(
            {
                "run_id": run["trace_id"],
                "root_span_id": run["root_span_id"],
                "agent": run["agent"],
                "version": versions.get(run["root_span_id"], ""),
                "task": run["task"],
                "start": run["start"],
                "latency_s": _number(run["latency_s"], 3),
                "status": "failed" if run["failure"] else "ok",
                "errors": errors,
                "input": _cut(run.get("input"), chars),
                "output": _cut(run.get("output"), chars),
                "tool_calls": tool_calls,
                "reference": (
                    {
                        "task": run["task"],
                        "version": view.reference.version,
                        "calls": [call["name"] for call in view.reference_calls],
                    }
                    if view.reference
                    else None
                ),
                "alignment": alignment if view.reference else [],
                "scores": [
                    {
                        "metric": s["metric"],
                        "score": _number(s["score"]),
                        "label": s["label"],
                        **({"error": _cut(s["error"])} if s.get("error") else {}),
                    }
                    for s in view.scores
                ],
                "judge_verdicts": [
                    {
                        "metric": s["metric"],
                        "label": s["label"],
                        "score": _number(s["score"]),
                        "reason": _cut(s.get("explanation")),
                        "judge": s["evaluator"],
                        **({"error": _cut(s["error"])} if s.get("error") else {}),
                    }
                    for s in view.verdicts
                ],
            }
        )
    answer: dict[str, Any] = {
        "run_id": trace_id,
        "runs": runs,
        "span_count": len(page.spans),
        "duration_ms": _number(page.duration_ms, 1),
    }
    if spans:
        start = min((span.start_ns for span in page.spans), default=0)
        answer["spans"] = [
            {
                "span_id": span.span_id,
                "parent": span.parent,
                "depth": span.depth,
                "name": span.name,
                "start_ms": _number((span.start_ns - start) / 1e6, 2),
                "duration_ms": _number(span.duration_ns / 1e6, 2),
                "error": span.error,
                **({"status_message": _cut(span.status_message)} if span.status_message else {}),
                "attributes": {key: _cut(value, 200) for key, value in span.attributes.items()},
                **({"events": span.events} if span.events else {}),
            }
            for span in page.spans[:MAX_SPANS]
        ]
    return answer


# -- versions, drift, alerts, metrics --------------------------------------------------------------


def compare(store: Store, agent: str, version_a: str, version_b: str) -> dict[str, Any]:
    """Version b against a: runs, failure rate, latency, score deltas, tool error rates, paths."""
    from agenttrail.evaluators.console.compare import compare_versions

    view = compare_versions(store, agent, version_a, version_b)
    if not view.agents:
        raise ToolInputError("no runs are stored yet")
    if view.agent not in view.agents:
        raise ToolInputError(f"no agent {agent!r}; known agents: {', '.join(sorted(view.agents))}")
    known = [version for version, _ in view.agents[view.agent]]
    for given in (version_a, version_b):
        if given and given not in known:
            raise ToolInputError(
                f"agent {view.agent!r} has no version {given!r}; its versions: {', '.join(known)}"
            )
    if not (view.a and view.b) or view.a == view.b:
        raise ToolInputError(
            f"agent {view.agent!r} needs two versions to compare; it has {', '.join(known) or 'none'}"
        )

    def side(key: str, version: str) -> dict[str, Any]:
        runs = view.runs.get(key, {})  # by side ("a", "b"): a side may be a version over an interval
        return {
            "version": version,
            "runs": runs.get("runs", 0),
            "failure_rate": _number(runs.get("failure_rate")),
            "latency_p50_s": _number(runs.get("p50"), 3),
            "latency_p95_s": _number(runs.get("p95"), 3),
            "tool_calls_per_run": _number(runs.get("length"), 2),
            "top_paths": [{"path": p, "runs": n} for p, n in view.paths.get(key, [])[:3]],
        }

    tools = []
    for tool in view.tools:
        a, b = tool.get("a") or {}, tool.get("b") or {}
        tools.append(
            {
                "tool": tool["tool"],
                "error_rate_a": _number(a.get("error_rate")),
                "error_rate_b": _number(b.get("error_rate")),
                "calls_per_run_a": _number(a.get("per_run"), 2),
                "calls_per_run_b": _number(b.get("per_run"), 2),
                "p95_ms_a": _number(a.get("p95_ms"), 1),
                "p95_ms_b": _number(b.get("p95_ms"), 1),
            }
        )
    tools.sort(key=lambda t: -abs((t["error_rate_b"] or 0.0) - (t["error_rate_a"] or 0.0)))
    metrics = [
        {
            "metric": row["metric"],
            "mean_a": _number((row.get("a") or {}).get("mean")),
            "mean_b": _number((row.get("b") or {}).get("mean")),
            "delta": _number(row.get("delta")),
            "delta_ci95": _number(row.get("delta_ci")),
            "significant": bool(row.get("significant", False)),
        }
        for row in view.metrics
    ]
    return {
        "agent": view.agent,
        "a": side("a", view.a),
        "b": side("b", view.b),
        "metrics": metrics,
        "tools_by_error_rate_change": tools,
        "tools_added": view.added,
        "tools_dropped": view.dropped,
    }


_DRIFT = """
SELECT Agent, Task, Metric, argMax(Test, DetectedAt), argMax(Drifted, DetectedAt), argMax(PValue, DetectedAt),
       argMax(EffectSize, DetectedAt), argMax(BaselineValue, DetectedAt), argMax(RecentValue, DetectedAt),
       argMax(BaselineN, DetectedAt), argMax(RecentN, DetectedAt), toUnixTimestamp64Milli(max(DetectedAt)),
       argMax(Detail, DetectedAt)
FROM drift_events WHERE DetectedAt >= now64(3) - toIntervalSecond({since_s:UInt32}) AGENT_CLAUSE
GROUP BY Agent, Task, Metric ORDER BY argMax(Drifted, DetectedAt) DESC, Agent, Metric, Task
"""


def drift_findings(store: Store, agent: str, since_s: int, drifted_only: bool) -> dict[str, Any]:
    """The latest check of each (agent, task, metric) by the sidecar's drift monitor in the period."""
    clause = "AND Agent = {agent:String}" if agent else ""
    rows = store.query(_DRIFT.replace("AGENT_CLAUSE", clause), {"since_s": since_s, "agent": agent})
    findings = []
    for agent_, task, metric, test, drifted, p, effect, base, recent, base_n, recent_n, at, detail in rows:
        if drifted_only and not drifted:
            continue
        note = json.loads(detail or "{}") if detail else {}
        findings.append(
            {
                "agent": agent_,
                "task": task or "(all tasks)",
                "metric": metric,
                "drifted": bool(drifted),
                "baseline": _number(base),
                "recent": _number(recent),
                "p_value": _number(p, 6),
                "effect_size": _number(effect),
                "test": test,
                "baseline_n": int(base_n),
                "recent_n": int(recent_n),
                "checked_at": iso_utc(int(at) * 1000),
                **({"baseline_window": note["baseline"]} if note.get("baseline") else {}),
                **({"note": _cut(note["note"])} if note.get("note") else {}),
            }
        )
    answer: dict[str, Any] = {"findings": findings}
    if not rows:
        answer["note"] = (
            "no drift check is stored in this period: the sidecar's drift monitor writes one every "
            "drift.interval_s; widen `since`, or run `agenttrail drift` for a check now"
        )
    elif not findings:
        answer["note"] = f"{len(rows)} metrics were checked and none drifted (drifted_only=false lists them)"
    return answer


def alerts(store: Store, params: dict[str, str], history: bool) -> dict[str, Any]:
    """Active alerts (with `all`, resolved ones too), or the history of transitions and deliveries."""
    from agenttrail.evaluators.monitoring.alerts.history import AlertFilter, query_alerts, query_history

    where = AlertFilter.from_params(params)
    if history:
        events = query_history(store, where)
        return {
            "history": [
                {k: _cut(v) if k == "detail" else v for k, v in e.items() if v not in ("", None)}
                for e in events
            ]
        }
    rows = query_alerts(store, where)
    keep = (
        "rule",
        "state",
        "severity",
        "labels",
        "value",
        "threshold",
        "since",
        "fired_at",
        "resolved_at",
        "detail",
    )
    answer: dict[str, Any] = {
        "alerts": [{k: _cut(row[k]) if k == "detail" else row[k] for k in keep} for row in rows]
    }
    if not rows:
        answer["note"] = "no alert is pending or firing" + (
            "" if where.all else " (include_resolved=true lists resolved ones)"
        )
    return answer


def metrics_over_time(store: Store, params: dict[str, str]) -> dict[str, Any]:
    """Per time bucket (and agent, and any `by` group): runs, failure rate, latency, tool errors, scores."""
    from agenttrail.evaluators.monitoring.stats import StatsQuery, query_stats

    if params.get("by"):  # "version" as the other tools call it
        params = {
            **params,
            "by": ",".join("agent_version" if b.strip() == "version" else b for b in params["by"].split(",")),
        }
    rows = query_stats(store, StatsQuery.from_params(params))
    buckets = []
    for row in rows:
        compact = {
            "bucket_start": row["bucket_start"],
            "agent": row["agent"],
            **{key: row[key] for key in ("task", "agent_version", "model") if row.get(key)},
            "runs": row["runs"],
            "failure_rate": _number(row["failure_rate"]),
            "latency_p50_s": _number(row["latency_p50_s"], 3),
            "latency_p95_s": _number(row["latency_p95_s"], 3),
            "tool_errors": {
                name: f"{t['errors']}/{t['calls']}" for name, t in sorted(row["tools"].items()) if t["errors"]
            },
            "scores": {name: _number(m["mean"]) for name, m in sorted(row["metrics"].items()) if m["count"]},
        }
        buckets.append(compact)
    answer: dict[str, Any] = {"buckets": buckets}
    if not buckets:
        answer["note"] = "no runs in that period for those filters; widen `since` or drop a filter"
    return answer


# -- SQL -----------------------------------------------------------------------------------------


def sql_settings(limit: int, timeout_s: int = SQL_TIMEOUT_S) -> dict[str, str | int]:
    """What a user query runs under: read-only, a timeout, and at most `limit` + 1 rows read out.

    These are the sidecar's protection against one assistant's query (its time, the rows it holds
    in memory, no writes), so the query may not change them. A SETTINGS clause in the query is
    applied after these and wins (on the embedded engine ours are a second clause after it, over
    HTTP request parameters), so `readonly` is 1, under which ClickHouse refuses any setting the
    query sets; ours still apply, since a clause's settings are checked as one change before any
    of them is applied.
    """
    return {
        "readonly": 1,  # no writes and no settings from the query (2 would let it raise the limits)
        "max_execution_time": timeout_s,
        "max_result_rows": limit + 1,
        "result_overflow_mode": "break",  # stop at the limit instead of failing
        "max_block_size": max(limit + 1, 64),  # "break" stops at a block's end: keep blocks small
    }


def run_sql(store: Store, sql: str, limit: int, *, timeout_s: int = SQL_TIMEOUT_S) -> dict[str, Any]:
    """One read-only SELECT, at most `limit` rows (truncated says when more existed)."""
    try:
        text = check_select(sql)
    except RefusedQuery as exc:
        raise ToolInputError(str(exc)) from exc
    columns, rows = store.query_with_names(text, settings=sql_settings(limit, timeout_s))
    truncated = len(rows) > limit
    return {
        "columns": columns,
        "rows": [[_cell(value) for value in row] for row in rows[:limit]],
        "row_count": min(len(rows), limit),
        "truncated": truncated,
    }


def _cell(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value if not isinstance(value, str) else _cut(value, 1000)
    if isinstance(value, float):
        return _number(value, 6)
    return _cut(value, 1000)
