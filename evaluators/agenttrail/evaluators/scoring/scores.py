"""Read scores back: the one query behind `agenttrail scores` and `GET /api/v1/scores`.

The JSON shape is a contract: `trace_id`, `metric`, `score`, `label`, `explanation`,
`evaluator`, `created_at` (plus run context: `agent`, `task`, `run_start`, `revision`).
LLM judge results add `model`, `prompt_tokens`, `completion_tokens`, `latency_ms`, `cost`,
`details` (an object) and `error` (a failed judge call: `score` is null); rows of
deterministic metrics carry only `error`, and only when set.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agenttrail.collector.queries import QueryError, TrajectoryFilter, iso_utc, parse_time
from agenttrail.collector.store import Store


@dataclass(frozen=True, slots=True)
class ScoreFilter:
    runs: TrajectoryFilter  # since/until (run start), agent, task, trace_id, limit
    metric: str | None = None

    @classmethod
    def from_params(cls, params: dict[str, str]) -> ScoreFilter:
        params = dict(params)
        metric = params.pop("metric", None) or None
        return cls(TrajectoryFilter.from_params(params), metric)

    def to_params(self) -> dict[str, str]:
        params = self.runs.to_params()
        if self.metric:
            params["metric"] = self.metric
        return params


def query_scores(store: Store, where: ScoreFilter) -> list[dict[str, Any]]:
    """Latest score of each (run, metric, evaluator version), newest runs first."""
    clauses, params = where.runs.where_clauses("RunStart")
    if where.metric:
        clauses.append("Metric = {metric:String}")
        params["metric"] = where.metric
    sql = (
        "SELECT TraceId, Metric, Score, Label, Explanation, Evaluator, EvaluatorVersion, "
        "toUnixTimestamp64Micro(CreatedAt), Agent, Task, toUnixTimestamp64Micro(RunStart), Revision, "
        "RootSpanId, Error, Model, PromptTokens, CompletionTokens, LatencyMs, Cost, Details "
        f"FROM scores FINAL WHERE {' AND '.join(clauses) or '1'} "
        "ORDER BY RunStart DESC, TraceId, Metric LIMIT {limit:UInt32}"
    )
    return [_to_json(row) for row in store.query(sql, params)]


def _to_json(row: tuple[Any, ...]) -> dict[str, Any]:
    result = {
        "trace_id": row[0],
        "metric": row[1],
        "score": row[2],
        "label": row[3],
        "explanation": row[4],
        "evaluator": f"{row[5]}@{row[6]}",
        "created_at": iso_utc(row[7]),
        "agent": row[8],
        "task": row[9],
        "run_start": iso_utc(row[10]),
        "revision": int(row[11]),
        "root_span_id": row[12],
    }
    error, model, details = row[13], row[14], row[19]
    if error:
        result["error"] = error
    if model:  # an LLM judge's verdict (failed calls may not know their model)
        result.update(
            model=model,
            prompt_tokens=int(row[15]),
            completion_tokens=int(row[16]),
            latency_ms=int(row[17]),
            cost=row[18],
        )
    if details:
        result["details"] = json.loads(details)
    return result


__all__ = ["QueryError", "ScoreFilter", "parse_time", "query_scores"]
