"""The Runs list: filters that live in the URL and keyset pagination over (Start, TraceId, RootSpanId).

Also served as `GET /api/v1/runs` (the same parameters, JSON lines), so a script can page
through runs the way the console does. A cursor is the last row's key; `before` pages back in
time, `after` asks for runs newer than the newest one shown (the page's live updates).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Any

from agenttrail.collector.queries import QueryError, iso_utc, parse_time
from agenttrail.collector.store import Store

_CURSOR = re.compile(r"^(\d{1,19}):([0-9a-f]{32}):([0-9a-f]{0,16})$")
_STATUSES = ("ok", "failed")
PAGE_SIZE = 50
Key = tuple[int, str, str]  # a run's (start in epoch microseconds, trace id, root span id)


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
        """Conditions on `trajectories` (bound parameters only); all but `q`'s hold for
        `runs_by_start` too, which has every column they read but Input and Output."""
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
                # The plain bound on Start lets ClickHouse skip the days (partitions) outside it.
                clauses.append(f"Start {op}= fromUnixTimestamp64Micro({{{key}_s:Int64}})")
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


# How far back from the newest run (or the cursor) each look for a page's runs reaches, then
# everything older: a busy store's newest page is in its last hour, a quiet one's further back.
WINDOWS_S = (3_600, 86_400, 7 * 86_400, 31 * 86_400, 366 * 86_400)
_NEWEST = "SELECT toUnixTimestamp64Micro(max(Start)) FROM runs_by_start"


def time_windows(
    store: Store, params: dict[str, Any], *, since_us: int | None
) -> Iterator[tuple[list[str], dict[str, Any]]]:
    """The windows of time, newest first, that a search for the newest runs reads one at a time:
    back from the newest run in `runs_by_start` (or the `before` cursor, or `until`, in `params`)
    by `WINDOWS_S`, then everything older; each as conditions on Start and their parameters.
    `since_us` (a lower bound the caller's conditions hold) ends them there."""
    top = params.get("before_s")
    if top is None:
        newest = store.query(_NEWEST)
        top = int(newest[0][0]) if newest else 0
    if "until" in params:
        top = min(top, params["until"])
    upper: int | None = None
    for lower in [*(top - seconds * 1_000_000 for seconds in WINDOWS_S), None]:
        window: list[str] = []
        bounds = dict(params)
        if lower is not None:
            window.append("Start >= fromUnixTimestamp64Micro({w_lower:Int64})")
            bounds["w_lower"] = lower
        if upper is not None:
            window.append("Start < fromUnixTimestamp64Micro({w_upper:Int64})")
            bounds["w_upper"] = upper
        yield window, bounds
        if lower is None or (since_us is not None and lower <= since_us):
            return
        upper = lower


def newest_live(
    store: Store,
    columns: str,
    clauses: list[str],
    params: dict[str, Any],
    limit: int,
    *,
    since_us: int | None,
) -> list[tuple[Any, ...]]:
    """`columns` of the newest `limit` live runs matching `clauses`, newest first, from `runs_by_start`.

    `trajectories` is sorted by trace id, so the newest runs are everywhere in it; the run-level
    rollup `runs_by_start` (monitoring/rollups.py: the latest version of each run, partitioned by
    day) is read instead, one of `time_windows` at a time, each with FINAL over only the days it
    covers, until `limit` rows are found.
    """
    order = "ORDER BY Start DESC, TraceId DESC, RootSpanId DESC"
    found: list[tuple[Any, ...]] = []
    for window, bounds in time_windows(store, params, since_us=since_us):
        found += store.query(
            f"SELECT {columns} FROM runs_by_start FINAL WHERE {' AND '.join([*clauses, *window])} {order} "
            "LIMIT {w_limit:UInt32}",
            {**bounds, "w_limit": limit - len(found)},
        )
        if len(found) >= limit:
            break
    return found


# What the page shows that only `trajectories` holds, of the exact versions the rollup named.
_PAGE_DETAILS = """
SELECT TraceId, RootSpanId, Version, substring(Input, 1, 160), substring(Output, 1, 160), Revision
FROM trajectories PREWHERE TraceId IN {traces:Array(String)}
"""
# The page's columns that `runs_by_start` holds, in `_RUN_COLUMNS`' order, then the version.
_ROLLUP_COLUMNS = """TraceId, RootSpanId, Agent, AgentVersion, Task, toUnixTimestamp64Micro(Start), LatencyS,
Failure, ErrorType, ToolNames, ToolStatuses, Version"""


def _page_runs(
    store: Store, where: RunsFilter, clauses: list[str], params: dict[str, Any]
) -> list[tuple[Any, ...]]:
    """The rollup's rows of the page's runs (and one more, if there is one), in the page's order."""
    if where.after or where.metric or where.verdict:
        # Runs newer than the newest shown are few and in the newest days; the score filters'
        # subqueries read every score, so they are run once, over every day at once.
        order = "ASC" if where.after else "DESC"
        return store.query(
            f"SELECT {_ROLLUP_COLUMNS} FROM runs_by_start FINAL WHERE {' AND '.join(clauses)} "
            f"ORDER BY Start {order}, TraceId {order}, RootSpanId {order} LIMIT {{limit:UInt32}}",
            params,
        )
    return newest_live(store, _ROLLUP_COLUMNS, clauses, params, params["limit"], since_us=params.get("since"))


def _with_details(store: Store, runs: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Each rollup row with its version's input, output and revision from `trajectories`: a point
    read by trace id, the table's sort key, of only those columns (all of a page's columns, or
    FINAL, took 2-4x longer). A version a merge dropped since (a newer one was stored between the
    two reads) leaves its run out, and so does a version the rollup holds and the table never
    kept (revisions of a run inserted in one block: ClickHouse replaces the older one as it
    writes the block, the rollup's view saw both)."""
    if not runs:
        return []
    details = {
        (trace, root, int(version)): rest
        for trace, root, version, *rest in store.query(
            _PAGE_DETAILS, {"traces": sorted({row[0] for row in runs})}
        )
    }
    return [(*row[:-1], *details[key]) for row in runs if (key := (row[0], row[1], int(row[-1]))) in details]


def list_runs(store: Store, where: RunsFilter) -> RunsPage:
    """One page of runs, newest first (or, with `after`, the runs newer than the cursor).

    The page's runs come from the run-level rollup `runs_by_start` (sorted by time; see
    `newest_live`), what it lacks (input, output, revision) from `trajectories` by key. A text
    search (`q`) reads Input and Output, which only `trajectories` holds: it reads that table
    (`_text_search`).
    """
    clauses, params = where.where()
    params["limit"] = where.limit + 1
    if where.q:
        return _page(_text_search(store, where, clauses, params), where)
    want = where.limit + 1
    while True:
        runs = _page_runs(store, where, clauses, {**params, "limit": want})
        rows = _with_details(store, runs)
        if len(rows) > where.limit or len(runs) < want:
            return _page(rows, where)
        want += 2 * (len(runs) - len(rows))  # runs left out: read further for the page's rest


def _page(rows: list[tuple[Any, ...]], where: RunsFilter) -> RunsPage:
    """The first `limit` of `rows` (read one further: more exist if it is there)."""
    runs = [_run_row(row) for row in rows[: where.limit + 1]]
    cursor = cursor_of(runs[where.limit - 1]) if len(runs) > where.limit else None
    runs = runs[: where.limit]
    if where.after:
        runs.reverse()
        return RunsPage(runs, None)
    return RunsPage(runs, cursor)


# ClickHouse reads the other columns of only the rows an ORDER BY ... LIMIT keeps ("lazy
# materialization"); its default stops at LIMIT 10.
_LAZY = "SETTINGS query_plan_max_limit_for_lazy_materialization = 10000"
_LATEST = """
SELECT TraceId, RootSpanId, max(Version) FROM trajectories
PREWHERE TraceId IN {traces:Array(String)} GROUP BY TraceId, RootSpanId
"""


def _text_search(
    store: Store, where: RunsFilter, clauses: list[str], params: dict[str, Any]
) -> list[tuple[Any, ...]]:
    """The page's rows for a text search, which reads every run's Input and Output.

    A FINAL read would merge the whole table, so the candidate rows are taken by start time
    alone, then checked against each run's latest version: a row that a re-assembly replaced or
    deleted is dropped. When too many were dropped to fill the page, one FINAL query answers.
    """
    order = "ASC" if where.after else "DESC"
    sort = f"ORDER BY Start {order}, TraceId {order}, RootSpanId {order}"
    params = {**params, "candidates": where.limit * 2 + 2}
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
    return current


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
    """Agents, versions, tasks and tools of the latest 10,000 runs, as the filter form's suggestions.

    Read from `runs_by_start` a time window at a time, without FINAL (a third of the time: a
    name a replaced version had is still a suggestion), distinct values counted in ClickHouse.
    """
    wanted, seen = 10_000, 0
    choices: dict[str, set[str]] = {"agent": set(), "version": set(), "task": set(), "tool": set()}
    for window, bounds in time_windows(store, {}, since_us=None):
        conditions = " AND ".join(["IsDeleted = 0", *window])
        rows = store.query(
            "SELECT count(), groupUniqArray(100)(Agent), groupUniqArray(100)(AgentVersion), "
            "groupUniqArray(200)(Task), groupUniqArrayArray(200)(ToolNames) FROM ("
            f"SELECT Agent, AgentVersion, Task, ToolNames FROM runs_by_start WHERE {conditions} "
            "ORDER BY Start DESC LIMIT {w_limit:UInt32})",
            {**bounds, "w_limit": wanted - seen},
        )
        count, agents, versions, tasks, tools = rows[0]
        for name, values in (("agent", agents), ("version", versions), ("task", tasks), ("tool", tools)):
            choices[name].update(values)
        seen += int(count)
        if seen >= wanted:
            break
    caps = {"agent": 100, "version": 100, "task": 200, "tool": 200}
    return {name: sorted(v for v in values if v)[: caps[name]] for name, values in choices.items()}
