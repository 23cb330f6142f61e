"""Compare two versions of an agent: score deltas with 95% confidence intervals (Welch, normal
approximation), failure rate and latency, trajectory shape (tools added or dropped, the most
common tool sequences), and the slowest tools."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from agenttrail.collector.store import Store

_VERSIONS = """
SELECT Agent, AgentVersion, count(), min(toUnixTimestamp64Micro(Start)) FROM trajectories
WHERE IsDeleted = 0 GROUP BY Agent, AgentVersion ORDER BY Agent, 4
"""
_RUNS = """
SELECT AgentVersion, count(), avg(Failure), quantile(0.5)(LatencyS), quantile(0.95)(LatencyS),
       avg(length(ToolNames))
FROM trajectories FINAL WHERE Agent = {agent:String} AND AgentVersion IN {versions:Array(String)}
  AND IsDeleted = 0 GROUP BY AgentVersion
"""
_SCORES = """
SELECT t.AgentVersion, s.Metric, count(), avg(s.Score), varSamp(s.Score)
FROM scores AS s FINAL
INNER JOIN (
    SELECT TraceId, RootSpanId, AgentVersion FROM trajectories FINAL
    WHERE Agent = {agent:String} AND AgentVersion IN {versions:Array(String)} AND IsDeleted = 0
) AS t ON s.TraceId = t.TraceId AND s.RootSpanId = t.RootSpanId
WHERE s.Score IS NOT NULL GROUP BY t.AgentVersion, s.Metric
"""
_PATHS = """
SELECT AgentVersion, arrayStringConcat(ToolNames, ' > ') AS path, count() AS n
FROM trajectories FINAL WHERE Agent = {agent:String} AND AgentVersion IN {versions:Array(String)}
  AND IsDeleted = 0 GROUP BY AgentVersion, path ORDER BY n DESC LIMIT 5 BY AgentVersion
"""
_TOOLS = """
SELECT AgentVersion, JSONExtractString(call, 'name') AS tool, count(),
       countIf(JSONExtractString(call, 'status') = 'error'),
       quantile(0.95)(JSONExtractFloat(call, 'latency_ms'))
FROM trajectories FINAL ARRAY JOIN JSONExtractArrayRaw(ToolCalls) AS call
WHERE Agent = {agent:String} AND AgentVersion IN {versions:Array(String)} AND IsDeleted = 0
GROUP BY AgentVersion, tool
"""


@dataclass
class Comparison:
    agents: dict[str, list[tuple[str, int]]]  # agent -> [(version, runs)] oldest first
    agent: str = ""
    a: str = ""
    b: str = ""
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    paths: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


def _interval(n: int, mean: float, var: float | None) -> float:
    return (
        1.96 * math.sqrt((var or 0.0) / n) if n > 1 and var is not None and not math.isnan(var) else math.nan
    )


def compare_versions(store: Store, agent: str = "", a: str = "", b: str = "") -> Comparison:
    """Version `b` against `a` (default: the agent's two newest versions)."""
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
    params = {"agent": agent, "versions": [a, b]}
    for version, count, failure, p50, p95, length in store.query(_RUNS, params):
        view.runs[version] = {
            "runs": int(count),
            "failure_rate": failure,
            "p50": p50,
            "p95": p95,
            "length": length,
        }
    by_metric: dict[str, dict[str, tuple[int, float, float | None]]] = {}
    for version, metric, n, mean, var in store.query(_SCORES, params):
        by_metric.setdefault(metric, {})[version] = (int(n), float(mean), var)
    for metric, found in sorted(by_metric.items()):
        row: dict[str, Any] = {"metric": metric}
        for key, version in (("a", a), ("b", b)):
            if version in found:
                n, mean, var = found[version]
                row[key] = {"n": n, "mean": mean, "ci": _interval(n, mean, var)}
        if "a" in row and "b" in row:
            delta = row["b"]["mean"] - row["a"]["mean"]
            na, va = found[a][0], found[a][2] or 0.0
            nb, vb = found[b][0], found[b][2] or 0.0
            spread = 1.96 * math.sqrt(va / max(na, 1) + vb / max(nb, 1))
            row["delta"] = delta
            row["delta_ci"] = spread
            row["significant"] = abs(delta) > spread > 0 or (spread == 0 and delta != 0)
        view.metrics.append(row)
    for version, path, count in store.query(_PATHS, params):
        view.paths.setdefault(version, []).append((path or "(no tools)", int(count)))
    tools: dict[str, dict[str, Any]] = {}
    for version, tool, calls, errors, p95 in store.query(_TOOLS, params):
        runs = view.runs.get(version, {}).get("runs") or 1
        tools.setdefault(tool, {"tool": tool})[version] = {
            "per_run": int(calls) / runs,
            "error_rate": int(errors) / int(calls) if calls else 0.0,
            "p95_ms": p95,
        }
    view.tools = sorted(
        tools.values(), key=lambda t: -max((t.get(v) or {}).get("p95_ms") or 0.0 for v in (a, b))
    )
    view.added = sorted(t["tool"] for t in tools.values() if b in t and a not in t)
    view.dropped = sorted(t["tool"] for t in tools.values() if a in t and b not in t)
    return view
