"""Everything the Run page shows about one trace, read through the shared query functions.

Spans come from `otel_traces` (values as stored: the instrumentation scrubbed secrets before
export and marks such spans with `agenttrail.scrubbed`); runs, scores, reference and audit come
from the same functions as `agenttrail trajectories`, `scores`, `references list` and `audit`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agenttrail.collector.queries import TrajectoryFilter, iso_utc, query_trajectories
from agenttrail.collector.runs import predicted_calls
from agenttrail.collector.store import Store
from agenttrail.evaluators.console.alignment import Step, align, call_view, matcher_for
from agenttrail.evaluators.metrics import METRICS
from agenttrail.evaluators.metrics import trajectory as trajectory_metrics
from agenttrail.evaluators.scoring.audit import AuditSubject, audit_run
from agenttrail.evaluators.scoring.reference_store import StoredReference, latest_references
from agenttrail.evaluators.scoring.scores import ScoreFilter, query_scores

# The page is the trace's: every span of it (spans under no run belong to its runs too). The id
# selects them; the time range only narrows the read, from otel_traces_trace_id_ts, whose Start
# and End are whole seconds floored (so End + 1 s, which is past the last span's start).
# tests/evaluators/console/test_run_page.py holds spans at seconds' edges in and others' out.
_SPANS = """
SELECT SpanId, ParentSpanId, SpanName, toUnixTimestamp64Nano(Timestamp), Duration, StatusCode, StatusMessage,
       SpanAttributes, ServiceName, Events.Name
FROM otel_traces
WHERE TraceId = {trace:String}
  AND Timestamp >= (SELECT min(Start) FROM otel_traces_trace_id_ts WHERE TraceId = {trace:String})
  AND Timestamp <= (SELECT max(End) FROM otel_traces_trace_id_ts WHERE TraceId = {trace:String}) + 1
ORDER BY Timestamp, SpanId
LIMIT {limit:UInt32}
"""
SPAN_LIMIT = 2000  # the waterfall's spans; one more is read to say that the trace has more
_REVISIONS = """
SELECT RootSpanId, Revision, toUnixTimestamp64Micro(AssembledAt), SpanCount, ToolCount, IsDeleted, Agent
FROM trajectories WHERE TraceId = {trace:String} ORDER BY AssembledAt, RootSpanId, Revision
"""
_ATTRIBUTE_CHARS = 400


def metric_explanation(metric: str) -> str:
    """One line on what a metric measures: the first paragraph of its function's docstring."""
    function = getattr(trajectory_metrics, metric, None)
    doc = (function.__doc__ or "") if function is not None else ""
    if not doc and metric in METRICS:
        doc = f"{metric}: computed by the evaluator ({METRICS[metric].usage})"
    known = {
        "latency": "Run duration in seconds, from the agent span.",
        "failure": "1 when the run failed (an error status or exception on the agent span).",
        "tool_correctness": "Share of expected tools called with matching inputs (DeepEval's metric).",
    }
    return known.get(metric) or " ".join(doc.strip().split("\n\n")[0].split())


@dataclass
class SpanView:
    span_id: str
    parent: str
    name: str
    start_ns: int
    duration_ns: int
    error: bool
    status_message: str
    attributes: dict[str, str]
    events: list[str]
    depth: int = 0
    offset_pct: float = 0.0
    width_pct: float = 0.0


def _waterfall(rows: Sequence[tuple[Any, ...]]) -> list[SpanView]:
    """Spans in tree order (children after their parent, by start) with their bar geometry."""
    spans = [
        SpanView(
            span_id=row[0],
            parent=row[1],
            name=row[2],
            start_ns=int(row[3]),
            duration_ns=int(row[4]),
            error=row[5] in ("Error", "STATUS_CODE_ERROR"),
            status_message=row[6],
            attributes={
                key: value if len(value) <= _ATTRIBUTE_CHARS else value[:_ATTRIBUTE_CHARS] + " …"
                for key, value in sorted(dict(row[7]).items())
            },
            events=list(row[9]),
        )
        for row in rows
    ]
    if not spans:
        return []
    by_id = {span.span_id: span for span in spans}
    children: dict[str, list[SpanView]] = {}
    roots = []
    for span in spans:
        if span.parent and span.parent in by_id:
            children.setdefault(span.parent, []).append(span)
        else:
            roots.append(span)
    start = min(span.start_ns for span in spans)
    end = max(span.start_ns + span.duration_ns for span in spans)
    total = max(end - start, 1)
    ordered: list[SpanView] = []

    def visit(span: SpanView, depth: int) -> None:
        span.depth = depth
        span.offset_pct = 100.0 * (span.start_ns - start) / total
        span.width_pct = max(100.0 * span.duration_ns / total, 0.3)
        ordered.append(span)
        for child in sorted(children.get(span.span_id, []), key=lambda s: s.start_ns):
            visit(child, depth + 1)

    for root in sorted(roots, key=lambda s: s.start_ns):
        visit(root, 0)
    return ordered


@dataclass
class RunView:
    """One agent run of the trace, with its reference alignment and scores."""

    run: dict[str, Any]
    reference: StoredReference | None
    steps: list[Step]
    calls: list[dict[str, Any]]  # the run's tool calls as stored
    reference_calls: list[dict[str, Any]]
    scores: list[dict[str, Any]] = field(default_factory=list)  # deterministic metrics
    verdicts: list[dict[str, Any]] = field(default_factory=list)  # LLM judges


@dataclass
class TracePage:
    trace_id: str
    runs: list[RunView]
    spans: list[SpanView]
    audit: list[dict[str, Any]]
    revisions: list[dict[str, Any]]
    duration_ms: float
    more_spans: bool = False  # the trace has more than the SPAN_LIMIT spans shown


def trace_page(
    store: Store,
    trace_id: str,
    *,
    audit_subjects: list[AuditSubject],
    lookback_s: int,
    default_metrics: Sequence[str],
) -> TracePage | None:
    """The trace's runs (latest revision), spans, scores, audit and revisions; None if unknown."""
    runs = query_trajectories(store, TrajectoryFilter(trace_id=trace_id, limit=100))
    span_rows = store.query(_SPANS, {"trace": trace_id, "limit": SPAN_LIMIT + 1})
    more_spans = len(span_rows) > SPAN_LIMIT
    span_rows = span_rows[:SPAN_LIMIT]
    if not runs and not span_rows:
        return None
    references = latest_references(store) if runs else {}
    scores = query_scores(store, ScoreFilter(TrajectoryFilter(trace_id=trace_id, limit=10_000)))
    views = []
    for run in sorted(runs, key=lambda r: r["start"]):
        reference = references.get(run["task"]) if run["task"] else None
        predicted = predicted_calls(run["tool_calls"])
        expected = list(reference.entry.reference) if reference else []
        steps = (
            align(predicted, expected, matcher_for(reference.entry, default_metrics))
            if reference
            else align(predicted, [], lambda _p, _r: False)
        )
        mine = [s for s in scores if s["root_span_id"] == run["root_span_id"]]
        for score in mine:
            score["explanation_of_metric"] = metric_explanation(score["metric"])
        views.append(
            RunView(
                run=run,
                reference=reference,
                steps=steps,
                calls=run["tool_calls"],
                reference_calls=[call_view(call) for call in expected],
                scores=sorted((s for s in mine if "model" not in s), key=lambda s: s["metric"]),
                verdicts=sorted((s for s in mine if "model" in s), key=lambda s: s["metric"]),
            )
        )
    spans = _waterfall(span_rows)
    duration_ms = 0.0
    if spans:
        duration_ms = (max(s.start_ns + s.duration_ns for s in spans) - min(s.start_ns for s in spans)) / 1e6
    revisions = [
        {
            "root_span_id": root,
            "revision": int(revision),
            "assembled_at": iso_utc(int(assembled)),
            "spans": int(span_count),
            "tools": int(tool_count),
            "deleted": bool(deleted),
            "agent": agent,
        }
        for root, revision, assembled, span_count, tool_count, deleted, agent in store.query(
            _REVISIONS, {"trace": trace_id}
        )
    ]
    audit = audit_run(store, trace_id, audit_subjects, lookback_s=lookback_s) if runs else []
    return TracePage(trace_id, views, spans, audit, revisions, duration_ms, more_spans)


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)
