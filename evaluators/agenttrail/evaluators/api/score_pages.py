"""Stored scores as `Score` messages, in pages that stay stable while new scores arrive.

Pages are keyset pages, not offsets: the token holds the sort key of the last score sent
(run start, trace, run, metric, evaluator version: unique per row of `scores FINAL`), so a
score written between two calls neither shifts nor repeats a page. The token also holds a
digest of the filters, so a token used with other filters is refused instead of silently
paging a different list.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from agenttrail.api.v1 import evaluation_pb2 as pb
from agenttrail.collector.queries import QueryError, TrajectoryFilter
from agenttrail.collector.store import Store
from agenttrail.evaluators.api.convert import timestamp_us
from agenttrail.evaluators.api.errors import InvalidArgument

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000

_SELECT = """
SELECT TraceId, RootSpanId, Metric, Evaluator, EvaluatorVersion, Score, Label, Explanation, Agent, Task,
       toUnixTimestamp64Micro(RunStart), Revision, ReferenceVersion, Error, toUnixTimestamp64Micro(CreatedAt),
       Model, PromptTokens, CompletionTokens, Cost, Details, LatencyMs
FROM scores FINAL WHERE {where}
ORDER BY RunStart DESC, TraceId, RootSpanId, Metric, EvaluatorVersion
LIMIT {{limit:UInt32}}
"""
# Strictly after the last score sent, in the order above.
_AFTER = """(toUnixTimestamp64Micro(RunStart) < {after_start:Int64}
  OR (toUnixTimestamp64Micro(RunStart) = {after_start:Int64}
      AND (TraceId, RootSpanId, Metric, EvaluatorVersion)
          > ({after_trace:String}, {after_root:String}, {after_metric:String}, {after_version:String})))"""


@dataclass(frozen=True, slots=True)
class ScoreQuery:
    runs: TrajectoryFilter  # since/until on run start, agent, task, trace_id; limit = page size
    metric: str | None = None
    root_span_id: str | None = None

    @classmethod
    def from_request(cls, request: pb.ListScoresRequest) -> ScoreQuery:
        size = request.page_size or DEFAULT_PAGE_SIZE
        if not 1 <= size <= MAX_PAGE_SIZE:
            raise InvalidArgument(f"page_size: must be 1..{MAX_PAGE_SIZE} (0 means {DEFAULT_PAGE_SIZE})")
        try:
            runs = TrajectoryFilter(
                since=request.since.ToDatetime(tzinfo=UTC) if request.HasField("since") else None,
                until=request.until.ToDatetime(tzinfo=UTC) if request.HasField("until") else None,
                agent=request.agent or None,
                task=request.task or None,
                trace_id=request.trace_id or None,
                limit=size,
            )
        except QueryError as exc:
            raise InvalidArgument(f"trace_id: {exc}") from exc
        return cls(runs, request.metric or None)

    def digest(self) -> str:
        """What the filters select (not the page size): a token is valid for these only."""
        runs = self.runs
        key = [runs.since, runs.until, runs.agent, runs.task, runs.trace_id, self.metric, self.root_span_id]
        return hashlib.sha256(json.dumps(key, default=str).encode()).hexdigest()[:16]


def query_page(store: Store, query: ScoreQuery, page_token: str = "") -> tuple[list[pb.Score], str]:
    """One page of scores and the token of the next one ("" on the last page)."""
    clauses, params = query.runs.where_clauses("RunStart")
    if query.metric:
        clauses.append("Metric = {metric:String}")
        params["metric"] = query.metric
    if query.root_span_id:
        clauses.append("RootSpanId = {root_span_id:String}")
        params["root_span_id"] = query.root_span_id
    if page_token:
        clauses.append(_AFTER)
        params.update(_read_token(page_token, query.digest()))
    params["limit"] = query.runs.limit + 1  # one more tells whether another page exists
    rows = store.query(_SELECT.format(where=" AND ".join(clauses) or "1"), params)
    page = rows[: query.runs.limit]
    next_token = _token(page[-1], query.digest()) if len(rows) > len(page) else ""
    return [_score(row) for row in page], next_token


def _token(row: tuple[Any, ...], digest: str) -> str:
    key = [digest, int(row[10]), row[0], row[1], row[2], row[4]]
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode().rstrip("=")


def _read_token(token: str, digest: str) -> dict[str, Any]:
    try:
        key = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        given, start, trace, root, metric, version = key
        params = {
            "after_start": int(start),
            "after_trace": str(trace),
            "after_root": str(root),
            "after_metric": str(metric),
            "after_version": str(version),
        }
    except (ValueError, TypeError) as exc:
        raise InvalidArgument(
            "page_token: not a token this API gave; pass next_page_token as it came"
        ) from exc
    if given != digest:
        raise InvalidArgument(
            "page_token: it belongs to a listing with other filters; "
            "keep since, until, agent, task, metric and trace_id the same while paging"
        )
    return params


def _score(row: tuple[Any, ...]) -> pb.Score:
    trace, root, metric, evaluator, version, score, label, explanation, agent, task = row[:10]
    run_start_us, revision, reference_version, error, created_us = row[10:15]
    model, prompt_tokens, completion_tokens, cost, details, latency_ms = row[15:]
    result = pb.EvaluationResult(
        metric=metric,
        label=label,
        explanation=explanation,
        evaluator=evaluator,
        evaluator_version=version,
        error=error,
        created_at=timestamp_us(created_us),
        model=model,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost=cost,
        details_json=details,
        latency_ms=latency_ms,
    )
    if score is not None:
        result.score = score
    return pb.Score(
        trace_id=trace,
        root_span_id=root,
        agent=agent,
        task=task,
        run_start=timestamp_us(run_start_us),
        revision=revision,
        reference_version=reference_version,
        result=result,
    )
