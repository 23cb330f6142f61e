"""Each evaluation result as an OTel `gen_ai.evaluation.result` event (a log record with an event name).

Follows the GenAI semantic conventions: `gen_ai.evaluation.name` (required),
`gen_ai.evaluation.score.value` and `gen_ai.evaluation.score.label` (when present),
`gen_ai.evaluation.explanation`, and `error.type` when the evaluation failed. The event is
parented to the evaluated run's agent span (its trace and span ids), as the convention asks,
so a backend shows it on that span. Records go through our own `LoggerProvider` and a batch
processor (bounded queue; the SDK drops and logs beyond it), never the global provider.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.context import Context
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from opentelemetry.util.types import AttributeValue

from agenttrail.evaluators.monitoring.instruments import ScoreRecord

EVENT_NAME = "gen_ai.evaluation.result"


def event_attributes(score: ScoreRecord) -> dict[str, AttributeValue]:
    """The convention's attributes, plus agenttrail's own context under `agenttrail.`."""
    attributes: dict[str, AttributeValue] = {"gen_ai.evaluation.name": score.metric}
    if score.score is not None:
        attributes["gen_ai.evaluation.score.value"] = score.score
    if score.label:
        attributes["gen_ai.evaluation.score.label"] = score.label
    explanation = score.explanation or score.error
    if explanation:
        attributes["gen_ai.evaluation.explanation"] = explanation
    if score.error:
        attributes["error.type"] = "_OTHER"
    if score.agent:
        attributes["gen_ai.agent.name"] = score.agent
    if score.task:
        attributes["agenttrail.task"] = score.task
    attributes["agenttrail.evaluator"] = score.evaluator
    return attributes


def _run_context(score: ScoreRecord) -> Context | None:
    try:
        span_context = SpanContext(
            int(score.trace_id, 16),
            int(score.root_span_id, 16),
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
    except ValueError:
        return None
    if not span_context.is_valid:
        return None
    return trace.set_span_in_context(NonRecordingSpan(span_context))


class EvaluationEvents:
    """Emits one event per evaluation result through `exporter` (OTLP in the sidecar)."""

    def __init__(self, exporter: LogRecordExporter, *, max_queue_size: int = 20_000) -> None:
        self.provider = LoggerProvider(resource=Resource.create({"service.name": "agenttrail"}))
        self.provider.add_log_record_processor(
            BatchLogRecordProcessor(exporter, max_queue_size=max_queue_size)
        )
        self._logger = self.provider.get_logger("agenttrail.evaluators.monitoring")

    def emit(self, score: ScoreRecord) -> None:
        self._logger.emit(
            timestamp=score.created_at_ns,
            context=_run_context(score),
            severity_number=SeverityNumber.INFO,
            attributes=event_attributes(score),
            event_name=EVENT_NAME,
        )

    def flush(self, timeout_s: float = 10.0) -> bool:
        return self.provider.force_flush(int(timeout_s * 1000))

    def shutdown(self) -> None:
        self.provider.shutdown()
