"""Evaluate over a real gRPC channel: the same numbers as the metric catalogue, references, bad requests."""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest

from agenttrail.api.v1 import evaluation_pb2 as pb
from agenttrail.evaluators.metrics import compute_metrics
from agenttrail.evaluators.scoring.reference_store import latest_references, store_reference_set
from agenttrail.evaluators.scoring.references import parse_reference_set
from agenttrail.evaluators.scoring.worker import EvaluatorConfig

PREDICTED = [
    {"name": "search", "input": {"q": "refund policy", "limit": 5}, "output": {"hits": 3}},
    {"name": "lookup", "input": {"id": 12345678901234567891}, "output": None},
    {"name": "search", "input": {"q": "refund policy"}, "output": {"hits": 3}},
    {"name": "refund", "input": {"id": 12345678901234567891, "amount": 10.5}, "output": "done"},
]
REFERENCE = [
    {"name": "lookup", "args": {"id": 12345678901234567891}},
    {"name": "refund", "args": None},
    {"name": "notify", "args": {"channel": "email"}},
]
METRICS = [
    "trajectory_exact_match",
    "trajectory_in_order_match",
    "trajectory_any_order_match",
    "trajectory_precision",
    "trajectory_recall:arguments=subset",
    "trajectory_single_tool_use:tool_name=search",
    "tool_correctness:threshold=0.3",
]


def tool_call(call: dict[str, Any]) -> pb.ToolCall:
    message = pb.ToolCall(name=call["name"], status=pb.TOOL_CALL_STATUS_OK)
    message.input_json = json.dumps(call["input"])
    if call["output"] is not None:
        message.output_json = json.dumps(call["output"])
    return message


def reference_call(call: dict[str, Any]) -> pb.ToolCall:
    return pb.ToolCall(name=call["name"], input_json=json.dumps(call["args"]))


def trajectory(**fields: Any) -> pb.Trajectory:
    return pb.Trajectory(tool_calls=[tool_call(call) for call in PREDICTED], **fields)


def scores(response: pb.EvaluateResponse) -> dict[str, float | None]:
    return {r.metric: r.score if r.HasField("score") else None for r in response.results}


def predicted_for_metrics() -> list[dict[str, Any]]:
    """The same calls in the DeepEval format `compute_metrics` reads (no output = absent)."""
    return [
        {
            "name": c["name"],
            "args": c["input"],
            **({"output": c["output"]} if c["output"] is not None else {}),
        }
        for c in PREDICTED
    ]


def rpc_error(call: Any, request: Any, **kw: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call(request, timeout=30, **kw)
    return caught.value


def test_evaluate_gives_the_metric_catalogues_numbers(api: Any) -> None:
    """Every requested metric equals compute_metrics on the same input, big integers compared exactly."""
    request = pb.EvaluateRequest(
        trajectory=trajectory(latency_s=1.25, failure=False),
        reference=pb.Reference(tool_calls=[reference_call(call) for call in REFERENCE]),
        metrics=METRICS,
    )
    response = api.stub.Evaluate(request, timeout=30)
    expected = compute_metrics(predicted_for_metrics(), REFERENCE, METRICS, latency_s=1.25, failure=False)
    assert scores(response) == expected
    assert list(scores(response)) == list(expected)  # request order, then latency and failure
    assert expected["trajectory_recall"] == pytest.approx(2 / 3)  # the data is not trivially 0 or 1
    assert expected["trajectory_single_tool_use"] == 1.0
    by_metric = {r.metric: r for r in response.results}
    assert by_metric["trajectory_exact_match"].label == "fail"
    assert by_metric["trajectory_single_tool_use"].label == "pass"
    assert by_metric["failure"].label == "ok"
    assert {r.evaluator for r in response.results} == {"trajectory"}
    assert by_metric["latency"].evaluator_version == EvaluatorConfig(metrics=tuple(METRICS)).version
    assert all(r.created_at.seconds > 0 and not r.error for r in response.results)
    assert response.reference.version == 0
    assert [call.name for call in response.reference.tool_calls] == ["lookup", "refund", "notify"]


def test_a_failed_calls_output_is_not_compared(api: Any) -> None:
    """A call with status ERROR has no output to compare, as in online scoring."""
    call = pb.ToolCall(name="f", input_json="{}", output_json='"partial"', status=pb.TOOL_CALL_STATUS_ERROR)
    request = pb.EvaluateRequest(
        trajectory=pb.Trajectory(tool_calls=[call]),
        reference=pb.Reference(tool_calls=[pb.ToolCall(name="f", input_json="{}", output_json='"full"')]),
        metrics=["tool_correctness"],
    )
    assert scores(api.stub.Evaluate(request, timeout=30))["tool_correctness"] == 1.0


def test_evaluate_uses_the_stored_reference_of_the_task(api: Any) -> None:
    """Without an inline reference, the task's stored reference applies, with its metrics and options."""
    reference = [
        {"name": "lookup", "args": {"id": 12345678901234567891}},
        {"name": "search", "args": {"q": "refund policy", "limit": 5, "lang": "en"}},
    ]
    references = {
        "refund": {
            "reference_trajectory": reference,
            "metrics": ["trajectory_recall", "trajectory_precision"],
            "options": {"arguments": "subset"},
            "expected_response": "Refunded.",
        }
    }
    store_reference_set(api.sidecar.store, parse_reference_set(references), source="test")
    entry = latest_references(api.sidecar.store)["refund"].entry
    response = api.stub.Evaluate(pb.EvaluateRequest(trajectory=trajectory(task="refund")), timeout=30)
    expected = compute_metrics(predicted_for_metrics(), reference, entry.configured_metrics())
    assert scores(response) == expected
    assert expected["trajectory_recall"] == 1.0  # with the stored option (subset); exact would give 0.5
    assert response.reference.task == "refund"
    assert response.reference.version == 1
    assert json.loads(response.reference.expected_response_json) == "Refunded."
    assert dict(response.reference.options) == {"arguments": "subset"}


def test_request_metrics_replace_the_references_own(api: Any) -> None:
    """Metrics given in the request are computed instead of the stored reference's."""
    store_reference_set(
        api.sidecar.store,
        parse_reference_set({"t": {"reference_trajectory": REFERENCE, "metrics": ["trajectory_recall"]}}),
        source="test",
    )
    request = pb.EvaluateRequest(trajectory=trajectory(task="t"), metrics=["trajectory_exact_match"])
    assert list(scores(api.stub.Evaluate(request, timeout=30))) == [
        "trajectory_exact_match",
        "latency",
        "failure",
    ]


def test_without_a_reference_scores_are_missing_with_a_reason(api: Any) -> None:
    """No stored reference for the task: reference metrics have no score and say why; never 0."""
    request = pb.EvaluateRequest(
        trajectory=trajectory(task="unknown-task"),
        metrics=["trajectory_recall", "trajectory_single_tool_use:tool_name=lookup"],
    )
    response = api.stub.Evaluate(request, timeout=30)
    by_metric = {r.metric: r for r in response.results}
    assert not by_metric["trajectory_recall"].HasField("score")
    assert "unknown-task" in by_metric["trajectory_recall"].error
    assert by_metric["trajectory_single_tool_use"].score == 1.0
    assert not by_metric["latency"].HasField("score")
    assert "latency_s" in by_metric["latency"].explanation
    assert not response.HasField("reference")


@pytest.mark.parametrize(
    ("request_", "field", "detail"),
    [
        (
            pb.EvaluateRequest(trajectory=trajectory(), metrics=["trajectory_recall", "nope"]),
            "metrics[1]",
            "nope",
        ),
        (
            pb.EvaluateRequest(trajectory=trajectory(), metrics=["trajectory_single_tool_use"]),
            "metrics[0]",
            "tool_name",
        ),
        (
            pb.EvaluateRequest(trajectory=trajectory(), metrics=["trajectory_recall", "trajectory_recall"]),
            "metrics",
            "more than once",
        ),
        (pb.EvaluateRequest(metrics=["trajectory_recall"]), "trajectory", "required"),
        (
            pb.EvaluateRequest(trajectory=pb.Trajectory(tool_calls=[pb.ToolCall(name="a", input_json="{x")])),
            "trajectory.tool_calls[0].input_json",
            "not valid JSON",
        ),
        (
            pb.EvaluateRequest(trajectory=pb.Trajectory(tool_calls=[pb.ToolCall(input_json="{}")])),
            "trajectory.tool_calls[0].name",
            "name",
        ),
        (
            pb.EvaluateRequest(
                trajectory=trajectory(),
                reference=pb.Reference(tool_calls=[pb.ToolCall(name="a", input_json="[1]")]),
            ),
            "reference.tool_calls",
            "args",
        ),
        (
            pb.EvaluateRequest(trajectory=trajectory(), reference=pb.Reference(options={"thresh": "1"})),
            "reference.options",
            "thresh",
        ),
    ],
)
def test_bad_requests_are_invalid_argument_naming_the_field(
    api: Any, request_: pb.EvaluateRequest, field: str, detail: str
) -> None:
    """A bad field is INVALID_ARGUMENT and the message names it and what was wrong."""
    error = rpc_error(api.stub.Evaluate, request_)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details().startswith(field), error.details()
    assert detail in error.details()


def test_a_body_that_does_not_parse_is_invalid_argument(api: Any) -> None:
    """Undecodable bytes are INVALID_ARGUMENT with a message, not INTERNAL."""
    raw = api.channel.unary_unary("/agenttrail.api.v1.EvaluationService/Evaluate")
    error = rpc_error(raw, b"\x0a\xff\xff\xff")
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "EvaluateRequest" in error.details()
