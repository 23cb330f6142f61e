"""The Runs list: filters that live in the URL and keyset pagination over (Start, TraceId, RootSpanId).

Also served as `GET /api/v1/runs` (the same parameters, JSON lines), so a script can page
through runs the way the console does. A cursor is the last row's key; `before` pages back in
time, `after` asks for runs newer than the newest one shown (the page's live updates).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any

from agenttrail.collector.queries import QueryError, iso_utc, parse_time
from agenttrail.collector.store import Store

_CURSOR = re.compile(r"^(\d{1,19}):([0-9a-f]{32}):([0-9a-f]{0,16})$")
_STATUSES = ("ok", "failed")
PAGE_SIZE = 50


def _cursor(text: str, what: str) -> tuple[int, str, str]:
    match = _CURSOR.match(text)
    if not match:
        raise QueryError(f"{what} {text!r} is not a runs cursor: use the value of a page's next link")
    return int(match.group(1)), match.group(2), match.group(3)


def cursor_of(run: dict[str, Any]) -> str:
    return f"{run['start_us']}:{run['trace_id']}:{run['root_span_id']}"


@dataclass(frozen=True, slots=True)
class RunsFilter:
    """Every filter of the Runs page; empty strings are "any"."""

    agent: str = ""
    version: str = ""
    task: str = ""
    status: str = ""  # ok | failed
    tool: str = ""  # runs that called this tool
    q: str = ""  # free text in input or output
    since: str = ""
    until: str = ""
    metric: str = ""  # with below: runs whose score of this metric is below the threshold
    below: str = ""
    verdict: str = ""  # a judge's label (pass, fail, ...)
    before: str = ""  # cursor: older than this row
    after: str = ""  # cursor: newer than this row
    limit: int = PAGE_SIZE

    @classmethod
    def from_params(cls, params: dict[str, str]) -> RunsFilter:
        known = {field.name for field in fields(cls)}
        unknown = set(params) - known
        if unknown:
            raise QueryError(f"unknown filter(s) {sorted(unknown)}; use {', '.join(sorted(known))}")
        values: dict[str, Any] = {key: str(value).strip() for key, value in params.items()}
        try:
            values["limit"] = int(values.get("limit") or PAGE_SIZE)
        except ValueError as exc:
            raise QueryError(f"limit must be a whole number, got {params['limit']!r}") from exc
        runs = cls(**values)
        runs.check()
        return runs

    def check(self) -> None:
        if not 1 <= self.limit <= 1000:
            raise QueryError(f"limit must be between 1 and 1000, got {self.limit}")
        if self.status and self.status not in _STATUSES:
            raise QueryError(f"status must be one of {', '.join(_STATUSES)}, got {self.status!r}")
        if bool(self.metric) != bool(self.below):
            raise QueryError("give metric and below together: runs whose metric is below a threshold")
        if self.below:
            try:
                float(self.below)
            except ValueError as exc:
                raise QueryError(f"below must be a number, got {self.below!r}") from exc
        for name in ("since", "until"):
            if getattr(self, name):
                parse_time(getattr(self, name))
        for name in ("before", "after"):
            if getattr(self, name):
                _cursor(getattr(self, name), name)

    def to_params(self, **changes: Any) -> dict[str, str]:
        """The non-empty filters (for links), with `changes` applied; cursors dropped unless given."""
        values = {field.name: getattr(self, field.name) for field in fields(self)}
        values.update(before="", after="", limit=self.limit if self.limit != PAGE_SIZE else "")
        values.update(changes)
        return {key: str(value) for key, value in values.items() if value not in ("", None)}

    def where(self) -> tuple[list[str], dict[str, Any]]:
        """Conditions on `trajectories` (bound parameters only)."""
        clauses = ["IsDeleted = 0"]
        params: dict[str, Any] = {}
        for column, key in (("Agent", "agent"), ("AgentVersion", "version"), ("Task", "task")):
            if getattr(self, key):
                clauses.append(f"{column} = {{{key}:String}}")
                params[key] = getattr(self, key)
        if self.status:
            clauses.append(f"Failure = {1 if self.status == 'failed' else 0}")
        if self.tool:
            clauses.append("has(ToolNames, {tool:String})")
            params["tool"] = self.tool
        if self.q:
            clauses.append(
                "(positionCaseInsensitiveUTF8(Input, {q:String}) > 0 "
                "OR positionCaseInsensitiveUTF8(Output, {q:String}) > 0)"
            )
            params["q"] = self.q
        for key, op in (("since", ">="), ("until", "<")):
            if getattr(self, key):
                clauses.append(f"Start {op} fromUnixTimestamp64Micro({{{key}:Int64}})")
                params[key] = int(parse_time(getattr(self, key)).timestamp() * 1e6)
        if self.metric:
            clauses.append(
                "(TraceId, RootSpanId) IN (SELECT TraceId, RootSpanId FROM scores FINAL "
                "WHERE Metric = {metric:String} AND Score < {below:Float64})"
            )
            params.update(metric=self.metric, below=float(self.below))
        if self.verdict:
            clauses.append(
                "(TraceId, RootSpanId) IN (SELECT TraceId, RootSpanId FROM scores FINAL "
                "WHERE Model != '' AND Label = {verdict:String})"
            )
            params["verdict"] = self.verdict
        for key, op in (("before", "<"), ("after", ">")):
            if getattr(self, key):
                start_us, trace, root = _cursor(getattr(self, key), key)
                clauses.append(
                    f"(Start, TraceId, RootSpanId) {op} "
                    f"(fromUnixTimestamp64Micro({{{key}_s:Int64}}), {{{key}_t:String}}, {{{key}_r:String}})"
                )
                params.update({f"{key}_s": start_us, f"{key}_t": trace, f"{key}_r": root})
        return clauses, params


_RUN_COLUMNS = """TraceId, RootSpanId, Agent, AgentVersion, Task, toUnixTimestamp64Micro(Start), LatencyS,
Failure, ErrorType, ToolNames, ToolStatuses, substring(Input, 1, 160), substring(Output, 1, 160), Revision"""


def _run_row(row: tuple[Any, ...]) -> dict[str, Any]:
    return {
        "trace_id": row[0],
        "root_span_id": row[1],
        "agent": row[2],
        "version": row[3],
        "task": row[4],
        "start_us": int(row[5]),
        "start": iso_utc(int(row[5])),
        "latency_s": row[6],
        "failure": int(row[7]),
        "error_type": row[8],
        "tools": list(row[9]),
        "tool_statuses": list(row[10]),
        "input": row[11],
        "output": row[12],
        "revision": int(row[13]),
    }


@dataclass(frozen=True, slots=True)
class RunsPage:
    runs: list[dict[str, Any]]
    next_cursor: str | None  # older runs exist: the `before` of the next page


# ClickHouse reads the other columns of only the rows an ORDER BY ... LIMIT keeps ("lazy
# materialization"); its default stops at LIMIT 10.
_LAZY = "SETTINGS query_plan_max_limit_for_lazy_materialization = 10000"
_LATEST = """
SELECT TraceId, RootSpanId, max(Version) FROM trajectories
PREWHERE TraceId IN {traces:Array(String)} GROUP BY TraceId, RootSpanId
"""


def list_runs(store: Store, where: RunsFilter) -> RunsPage:
    """One page of runs, newest first (or, with `after`, the runs newer than the cursor).

    `trajectories` is sorted by trace id, so a FINAL read of the newest runs would merge the
    whole table. Instead the page's candidate rows are taken by start time alone (reading only
    the sort columns of every row), then checked against each run's latest version: a row that
    a re-assembly replaced or deleted is dropped. When too many were dropped to fill the page,
    one FINAL query answers instead.
    """
    clauses, params = where.where()
    ascending = bool(where.after)
    order = "ASC" if ascending else "DESC"
    sort = f"ORDER BY Start {order}, TraceId {order}, RootSpanId {order}"
    params.update(limit=where.limit + 1, candidates=where.limit * 2 + 2)
    conditions = " AND ".join(clauses)
    rows = store.query(
        f"SELECT {_RUN_COLUMNS}, Version FROM trajectories WHERE {conditions} {sort} "
        f"LIMIT {{candidates:UInt32}} {_LAZY}",
        params,
    )
    latest = (
        {
            (trace, root): int(version)
            for trace, root, version in store.query(_LATEST, {"traces": sorted({row[0] for row in rows})})
        }
        if rows
        else {}
    )
    current = [row for row in rows if latest.get((row[0], row[1])) == int(row[-1])]
    if len(current) <= where.limit and len(rows) == params["candidates"]:
        current = store.query(
            f"SELECT {_RUN_COLUMNS}, Version FROM trajectories FINAL WHERE {conditions} {sort} "
            "LIMIT {limit:UInt32}",
            params,
        )
    runs = [_run_row(row) for row in current[: where.limit + 1]]
    more = len(runs) > where.limit
    runs = runs[: where.limit]
    if ascending:
        runs.reverse()
        return RunsPage(runs, None)
    return RunsPage(runs, cursor_of(runs[-1]) if more else None)


def score_badges(store: Store, runs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, int]]:
    """Per run: how many labelled scores passed and failed (a deterministic or judge label)."""
    if not runs:
        return {}
    # The latest label per score key by argMax, not FINAL: the same rows, half the time over a
    # few dozen traces of a large table (the runs page's other half-second before).
    rows = store.query(
        "SELECT TraceId, RootSpanId, countIf(label IN ('pass', 'ok')), countIf(label IN ('fail', 'failed')) "
        "FROM (SELECT TraceId, RootSpanId, argMax(Label, CreatedAt) AS label FROM scores "
        "WHERE TraceId IN {traces:Array(String)} GROUP BY TraceId, RootSpanId, Metric, EvaluatorVersion) "
        "GROUP BY TraceId, RootSpanId",
        {"traces": sorted({run["trace_id"] for run in runs})},
    )
    return {(trace, root): {"pass": int(passed), "fail": int(failed)} for trace, root, passed, failed in rows}


def filter_choices(store: Store) -> dict[str, list[str]]:
    """Agents, versions, tasks and tools of the latest 10,000 runs, as the filter form's suggestions."""
    rows = store.query(
        "SELECT groupUniqArray(100)(Agent), groupUniqArray(100)(AgentVersion), groupUniqArray(200)(Task), "
        "groupUniqArrayArray(200)(ToolNames) FROM (SELECT Agent, AgentVersion, Task, ToolNames "
        f"FROM trajectories WHERE IsDeleted = 0 ORDER BY Start DESC LIMIT 10000 {_LAZY})"
    )
    agents, versions, tasks, tools = rows[0] if rows else ([], [], [], [])
    return {
        "agent": sorted(a for a in agents if a),
        "version": sorted(v for v in versions if v),
        "task": sorted(t for t in tasks if t),
        "tool": sorted(t for t in tools if t),
    }
