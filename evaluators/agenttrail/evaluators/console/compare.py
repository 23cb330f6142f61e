"""Compare two versions of an agent, each over an interval of its own: score deltas with 95%
confidence intervals (Welch, normal approximation), failure rate and latency, trajectory shape
(tools added or dropped, the most common tool sequences), and the slowest tools.

A side is a version and an optional start-time interval, so the page compares two versions
over all their runs, over the same interval (a canary running beside the old version), or one
version before and after a change (the same version on both sides, two intervals).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agenttrail.collector.store import Store

_VERSIONS = """
SELECT Agent, AgentVersion, count(), min(toUnixTimestamp64Micro(Start)) FROM trajectories
WHERE IsDeleted = 0 GROUP BY Agent, AgentVersion ORDER BY Agent, 4
"""
# One side: the agent's runs of one version started in [since, until) (0: open).
_SIDE = (
    "Agent = {agent:String} AND AgentVersion = {version:String} AND IsDeleted = 0 "
    "AND ({since:Int64} = 0 OR Start >= fromUnixTimestamp64Milli({since:Int64})) "
    "AND ({until:Int64} = 0 OR Start < fromUnixTimestamp64Milli({until:Int64}))"
)
_RUNS = f"""
SELECT count(), avg(Failure), quantile(0.5)(LatencyS), quantile(0.95)(LatencyS), avg(length(ToolNames))
FROM trajectories FINAL WHERE {_SIDE}
"""
_SCORES = f"""
SELECT s.Metric, count(), avg(s.Score), varSamp(s.Score)
FROM scores AS s FINAL
INNER JOIN (SELECT TraceId, RootSpanId FROM trajectories FINAL WHERE {_SIDE}) AS t
  ON s.TraceId = t.TraceId AND s.RootSpanId = t.RootSpanId
WHERE s.Score IS NOT NULL GROUP BY s.Metric
"""
_PATHS = f"""
SELECT arrayStringConcat(ToolNames, ' > ') AS path, count() AS n
FROM trajectories FINAL WHERE {_SIDE} GROUP BY path ORDER BY n DESC, path LIMIT 5
"""
_TOOLS = f"""
SELECT JSONExtractString(call, 'name') AS tool, count(),
       countIf(JSONExtractString(call, 'status') = 'error'),
       quantile(0.95)(JSONExtractFloat(call, 'latency_ms'))
FROM trajectories FINAL ARRAY JOIN JSONExtractArrayRaw(ToolCalls) AS call
WHERE {_SIDE} GROUP BY tool
"""
SIDES = ("a", "b")


@dataclass(frozen=True, slots=True)
class Side:
    """A version, and the start-time interval of its runs to compare (None: unbounded)."""

    version: str
    since: datetime | None = None
    until: datetime | None = None

    @property
    def label(self) -> str:
        if self.since is None and self.until is None:
            return self.version
        since = self.since.strftime("%Y-%m-%d %H:%M") if self.since else "…"
        until = self.until.strftime("%Y-%m-%d %H:%M") if self.until else "now"
        return f"{self.version} ({since} – {until} UTC)"

    def params(self, agent: str) -> dict[str, Any]:
        def ms(moment: datetime | None) -> int:
            return int(moment.timestamp() * 1000) if moment else 0

        return {"agent": agent, "version": self.version, "since": ms(self.since), "until": ms(self.until)}


@dataclass
class Comparison:
    agents: dict[str, list[tuple[str, int]]]  # agent -> [(version, runs)] oldest first
    agent: str = ""
    a: str = ""
    b: str = ""
    sides: dict[str, Side] = field(default_factory=dict)  # "a", "b"
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)  # by side
    metrics: list[dict[str, Any]] = field(default_factory=list)
    paths: dict[str, list[tuple[str, int]]] = field(default_factory=dict)  # by side
    tools: list[dict[str, Any]] = field(default_factory=list)  # {"tool", "a": {...}, "b": {...}}
    added: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


def _interval(n: int, mean: float, var: float | None) -> float:
    return (
        1.96 * math.sqrt((var or 0.0) / n) if n > 1 and var is not None and not math.isnan(var) else math.nan
    )


def compare_versions(
    store: Store,
    agent: str = "",
    a: str = "",
    b: str = "",
    intervals: dict[str, tuple[datetime | None, datetime | None]] | None = None,
) -> Comparison:
    """Side `b` against side `a` (default versions: the agent's two newest; `intervals` by side)."""
    agents: dict[str, list[tuple[str, int]]] = {}
    for name, version, count, _ in store.query(_VERSIONS):
        agents.setdefault(name, []).append((version, int(count)))
    if not agent:
        agent = next((name for name, vs in agents.items() if len(vs) > 1), next(iter(agents), ""))
    known = [version for version, _ in agents.get(agent, [])]
    if not b and known:
        b = known[-1]
    if not a and len(known) > 1:
        a = known[-2] if b == known[-1] else known[-1]
    view = Comparison(agents, agent, a, b)
    if not (agent and a and b):
        return view
    view.sides = {
        side: Side(version, *(intervals or {}).get(side, (None, None)))
        for side, version in zip(SIDES, (a, b), strict=True)
    }
    by_metric: dict[str, dict[str, tuple[int, float, float | None]]] = {}
    tools: dict[str, dict[str, Any]] = {}
    for side, spec in view.sides.items():
        params = spec.params(agent)
        for count, failure, p50, p95, length in store.query(_RUNS, params):
            view.runs[side] = {
                "runs": int(count),
                "failure_rate": failure,
                "p50": p50,
                "p95": p95,
                "length": length,
            }
        for metric, n, mean, var in store.query(_SCORES, params):
            by_metric.setdefault(metric, {})[side] = (int(n), float(mean), var)
        view.paths[side] = [(path or "(no tools)", int(count)) for path, count in store.query(_PATHS, params)]
        runs = view.runs.get(side, {}).get("runs") or 1
        for tool, calls, errors, p95 in store.query(_TOOLS, params):
            tools.setdefault(tool, {"tool": tool})[side] = {
                "per_run": int(calls) / runs,
                "error_rate": int(errors) / int(calls) if calls else 0.0,
                "p95_ms": p95,
            }
    for metric, found in sorted(by_metric.items()):
        row: dict[str, Any] = {"metric": metric}
        for side in SIDES:
            if side in found:
                n, mean, var = found[side]
                row[side] = {"n": n, "mean": mean, "ci": _interval(n, mean, var)}
        if "a" in row and "b" in row:
            delta = row["b"]["mean"] - row["a"]["mean"]
            na, va = found["a"][0], found["a"][2] or 0.0
            nb, vb = found["b"][0], found["b"][2] or 0.0
            spread = 1.96 * math.sqrt(va / max(na, 1) + vb / max(nb, 1))
            row["delta"] = delta
            row["delta_ci"] = spread
            row["significant"] = abs(delta) > spread > 0 or (spread == 0 and delta != 0)
        view.metrics.append(row)
    view.tools = sorted(
        tools.values(), key=lambda t: -max((t.get(side) or {}).get("p95_ms") or 0.0 for side in SIDES)
    )
    view.added = sorted(t["tool"] for t in tools.values() if "b" in t and "a" not in t)
    view.dropped = sorted(t["tool"] for t in tools.values() if "a" in t and "b" not in t)
    return view
