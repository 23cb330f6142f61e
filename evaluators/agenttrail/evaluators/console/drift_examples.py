"""Example runs behind a drift finding: the runs of its recent window that show the change.

A drift test compares distributions; someone debugging wants a run to open. Per metric, the
runs that moved the statistic: failed runs for the failure rate, the slowest (or fastest) for
latency, the longest (or shortest) trajectories, runs calling (or no longer calling) the tool
whose share of calls moved most, and the lowest (or highest) scoring runs for a score, by the
direction the recent window moved against the baseline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agenttrail.collector.durations import format_duration
from agenttrail.collector.store import Store
from agenttrail.evaluators.monitoring.drift import FAILURE_RATE, LATENCY, TOOL_DISTRIBUTION, TRAJECTORY_LENGTH

# str.format templates: {{name:Type}} are ClickHouse's bound parameters
_WINDOW = (
    "t.IsDeleted = 0 AND t.Agent = {{agent:String}} "
    "AND ({{task:String}} = '' OR t.Task = {{task:String}}) "
    "AND t.Start >= fromUnixTimestamp64Milli({{start:Int64}}) "
    "AND t.Start < fromUnixTimestamp64Milli({{end:Int64}})"
)
_RUNS = (
    "SELECT t.TraceId, {value} FROM trajectories AS t FINAL WHERE "
    + _WINDOW
    + " {extra} ORDER BY {order} LIMIT {limit}"
)
_SCORES = (
    "SELECT t.TraceId, min(s.Score) AS v FROM scores AS s FINAL "
    "INNER JOIN (SELECT TraceId, RootSpanId, Agent, Task, Start, IsDeleted FROM trajectories FINAL) AS t "
    "ON s.TraceId = t.TraceId AND s.RootSpanId = t.RootSpanId "
    "WHERE s.Metric = {{metric:String}} AND s.Score IS NOT NULL AND " + _WINDOW + " "
    "GROUP BY t.TraceId ORDER BY v {direction}, t.TraceId LIMIT {limit}"
)


def _up(finding: Mapping[str, Any]) -> bool:
    """Did the recent window move up against the baseline (where both are known)?"""
    base, recent = finding.get("baseline_value"), finding.get("recent_value")
    if base is None or recent is None:
        return True
    return float(recent) >= float(base)


def example_runs(store: Store, finding: Mapping[str, Any], limit: int = 3) -> list[dict[str, str]]:
    """Up to `limit` runs of the finding's recent window that show its change: [{trace_id, why}]."""
    params: dict[str, Any] = {
        "agent": finding["agent"],
        "task": finding.get("task") or "",
        "start": int(float(finding["window_start"]) * 1000),
        "end": int(float(finding["window_end"]) * 1000) + 1,
    }
    metric, up = str(finding["metric"]), _up(finding)
    direction = "DESC" if up else "ASC"

    def runs(value: str, order: str, extra: str = "", **more: Any) -> list[tuple[Any, ...]]:
        sql = _RUNS.format(value=value, extra=extra, order=order, limit=int(limit))
        return store.query(sql, {**params, **more})

    if metric == FAILURE_RATE:
        if up:
            rows = runs("t.ErrorType", "t.Start DESC", "AND t.Failure = 1")
            return [{"trace_id": trace, "why": f"failed: {error or 'error'}"} for trace, error in rows]
        rows = runs("t.ToolCount", "t.Start DESC", "AND t.Failure = 0")
        return [{"trace_id": trace, "why": "succeeded"} for trace, _ in rows]
    if metric == LATENCY:
        rows = runs("t.LatencyS", f"t.LatencyS {direction}")
        return [{"trace_id": trace, "why": format_duration(float(value))} for trace, value in rows]
    if metric == TRAJECTORY_LENGTH:
        rows = runs("t.ToolCount", f"t.ToolCount {direction}, t.Start DESC")
        return [{"trace_id": trace, "why": f"{value} tool call(s)"} for trace, value in rows]
    if metric == TOOL_DISTRIBUTION:
        detail = finding.get("detail")
        moves = detail.get("share_change") if isinstance(detail, Mapping) else None
        if not isinstance(moves, Mapping) or not moves:
            return []
        tool, change = max(moves.items(), key=lambda item: abs(float(item[1])))
        has = "has" if float(change) > 0 else "NOT has"
        rows = runs("t.ToolCount", "t.Start DESC", f"AND {has}(t.ToolNames, {{tool:String}})", tool=tool)
        why = f"calls {tool}" if float(change) > 0 else f"no {tool} call"
        return [{"trace_id": trace, "why": why} for trace, _ in rows]
    rows = store.query(
        _SCORES.format(direction="ASC" if not up else "DESC", limit=int(limit)), {**params, "metric": metric}
    )
    return [{"trace_id": trace, "why": f"{metric} {float(value):.3g}"} for trace, value in rows]
