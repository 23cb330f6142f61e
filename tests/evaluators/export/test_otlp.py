"""OTLP export: metrics and gen_ai.evaluation.result events reach a real local OTLP receiver."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter

from agenttrail.evaluators.monitoring.evaluation_events import EVENT_NAME, EvaluationEvents
from agenttrail.evaluators.monitoring.instruments import ScoreRecord

from .otlp_sink import OtlpSink
from .runs import config_file, load_references, send_run, wait_for


@pytest.fixture(params=["grpc", "http"])
def sink(request: pytest.FixtureRequest) -> Iterator[OtlpSink]:
    receiver = OtlpSink().start(request.param)
    yield receiver
    receiver.stop()


def latest_sum(sink: OtlpSink, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The newest cumulative value of each series of counter `name` in the received metrics."""
    values: dict[tuple[tuple[str, str], ...], float] = {}
    for message in sink.received("metrics"):
        for resource in message.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name != name:
                        continue
                    for point in metric.sum.data_points:
                        key = tuple(sorted((a.key, a.value.string_value) for a in point.attributes))
                        values[key] = point.as_double or point.as_int
    return values


def received_events(sink: OtlpSink) -> list[Any]:
    return [
        record
        for message in sink.received("logs")
        for resource in message.resource_logs
        for scope in resource.scope_logs
        for record in scope.log_records
        if record.event_name == EVENT_NAME
    ]


@pytest.mark.slow
def test_metrics_and_evaluation_events_reach_an_otlp_receiver(
    sink: OtlpSink, start_sidecar: Any, tmp_path: Path
) -> None:
    """Run counters arrive as OTLP metrics; each score as a gen_ai.evaluation.result event on its run."""
    sidecar = start_sidecar(
        config_file(tmp_path, prometheus=False, otlp_endpoint=sink.endpoint, otlp_protocol=sink.protocol)
    )
    load_references(sidecar)
    passing = send_run(sidecar)
    failing = send_run(sidecar, tools=("refund",), failed=True)
    assert sidecar.wait_until_assembled(30)

    runs = wait_for(
        lambda: (got := latest_sum(sink, "agenttrail.runs")) and sum(got.values()) == 2 and got,
        what="2 runs in OTLP metrics",
    )
    assert runs[(("agent", "bot"), ("status", "ok"), ("task", "refund"))] == 1
    assert runs[(("agent", "bot"), ("status", "error"), ("task", "refund"))] == 1

    # Five trajectory metrics per run (latency and failure are run metrics, not events).
    events = wait_for(lambda: len(got := received_events(sink)) >= 10 and got, what="10 evaluation events")
    assert len(events) == 10
    by_run: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for record in events:
        attributes = {a.key: a.value for a in record.attributes}
        by_run.setdefault((record.trace_id.hex(), record.span_id.hex()), {})[
            attributes["gen_ai.evaluation.name"].string_value
        ] = attributes
    assert set(by_run) == {passing, failing}
    exact = by_run[passing]["trajectory_exact_match"]
    assert exact["gen_ai.evaluation.score.value"].double_value == 1.0
    assert exact["gen_ai.evaluation.score.label"].string_value == "pass"
    assert exact["gen_ai.agent.name"].string_value == "bot"
    recall = by_run[failing]["trajectory_recall"]
    assert recall["gen_ai.evaluation.score.value"].double_value == 0.5
    assert "gen_ai.evaluation.score.label" not in recall  # the evaluator gives recall no label


def test_evaluation_event_attributes_follow_the_genai_convention() -> None:
    """An evaluation result becomes one event with the convention's attributes, parented to the run's span."""
    exporter = InMemoryLogRecordExporter()
    events = EvaluationEvents(exporter)
    trace_id, span_id = "ab" * 16, "cd" * 8
    events.emit(
        ScoreRecord(
            trace_id, span_id, "bot", "refund", "helpfulness", "judge", 0.25, "poor", "vague", "", 10**18
        )
    )
    events.emit(
        ScoreRecord(
            trace_id, span_id, "bot", "refund", "faithfulness", "judge", None, "", "", "timeout", 10**18
        )
    )
    events.emit(ScoreRecord("not-hex", "", "bot", "", "helpfulness", "judge", 1.0, "good", "", "", 10**18))
    assert events.flush()
    first, errored, orphan = (data.log_record for data in exporter.get_finished_logs())
    assert first.event_name == EVENT_NAME
    assert dict(first.attributes or {}) == {
        "gen_ai.evaluation.name": "helpfulness",
        "gen_ai.evaluation.score.value": 0.25,
        "gen_ai.evaluation.score.label": "poor",
        "gen_ai.evaluation.explanation": "vague",
        "gen_ai.agent.name": "bot",
        "agenttrail.task": "refund",
        "agenttrail.evaluator": "judge",
    }
    assert (first.trace_id, first.span_id) == (int(trace_id, 16), int(span_id, 16))
    assert first.timestamp == 10**18
    assert errored.attributes is not None
    assert errored.attributes["error.type"] == "_OTHER"
    assert errored.attributes["gen_ai.evaluation.explanation"] == "timeout"
    assert "gen_ai.evaluation.score.value" not in errored.attributes
    assert not orphan.trace_id  # an unparseable trace id leaves the event without a parent, not lost
    events.shutdown()
