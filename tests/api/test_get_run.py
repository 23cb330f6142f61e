"""GetRun for runs ingested through OTLP on the same port: trajectory, scores, NOT_FOUND, several runs."""

from __future__ import annotations

import json
import time
from typing import Any

import grpc
import pytest
from otlp_builders import agent_span, new_span_id, new_trace_id, request, tool_span

from agenttrail.api.v1 import evaluation_pb2 as pb
from agenttrail.evaluators.scoring.reference_store import store_reference_set
from agenttrail.evaluators.scoring.references import parse_reference_set
from agenttrail.evaluators.scoring.scores import ScoreFilter, query_scores

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
REFERENCES = {"refund": [{"tool_name": "lookup", "tool_input": {"id": 7}}, {"tool_name": "refund"}]}


def export(api: Any, *spans: Any) -> None:
    """Send spans through OTLP/gRPC on the API's own channel, and wait until they are assembled."""
    api.channel.unary_unary(EXPORT)(request(*spans).SerializeToString(), timeout=30)
    assert api.sidecar.wait_until_assembled(30)


def wait_for_scores(api: Any, trace: str, timeout: float = 30) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = query_scores(api.sidecar.store, ScoreFilter.from_params({"trace_id": trace}))
        if rows:
            return rows
        time.sleep(0.05)
    raise AssertionError(f"run {trace} was never scored")


def refund_run(trace: str, root: str, *, failed: bool = False) -> list[Any]:
    return [
        agent_span(
            trace,
            root,
            0,
            250,
            agent="support",
            attributes={
                "agenttrail.task": "refund",
                "gen_ai.conversation.id": "conv-1",
                "gen_ai.agent.version": "2.4",
                "input.value": json.dumps({"question": "refund order 7"}),
                "output.value": "Refunded.",
            },
            error="RuntimeError" if failed else None,
        ),
        tool_span(trace, new_span_id(), root, "lookup", 10, 30, arguments={"id": 7}),
        tool_span(trace, new_span_id(), root, "refund", 40, 60, arguments={"id": 7}, error="ValueError"),
    ]


def test_get_run_returns_the_trajectory_and_its_scores(api: Any) -> None:
    """An ingested run comes back with its tool calls and the scores the online evaluator stored."""
    store_reference_set(api.sidecar.store, parse_reference_set(REFERENCES), source="test")
    trace, root = new_trace_id(), new_span_id()
    export(api, *refund_run(trace, root))
    stored = wait_for_scores(api, trace)

    response = api.stub.GetRun(pb.GetRunRequest(trace_id=trace), timeout=30)
    run = response.trajectory
    assert (run.trace_id, run.root_span_id, run.agent, run.task) == (trace, root, "support", "refund")
    assert run.conversation_id == "conv-1"
    assert run.latency_s == pytest.approx(0.25)
    assert run.HasField("failure")
    assert not run.failure
    assert json.loads(run.input_json) == {"question": "refund order 7"}
    assert json.loads(run.output_json) == "Refunded."
    assert run.revision >= 1
    assert run.agent_version == "2.4"
    assert [call.name for call in run.tool_calls] == ["lookup", "refund"]
    lookup, refund = run.tool_calls
    assert json.loads(lookup.input_json) == {"id": 7}
    assert lookup.status == pb.TOOL_CALL_STATUS_OK
    assert lookup.latency_ms == pytest.approx(20.0)
    assert (refund.status, refund.error_type) == (pb.TOOL_CALL_STATUS_ERROR, "ValueError")
    assert not refund.HasField("output_json")
    assert all(call.agent == "support" and len(call.span_id) == 16 for call in run.tool_calls)

    got = {s.result.metric: s.result.score if s.result.HasField("score") else None for s in response.scores}
    assert got == {row["metric"]: row["score"] for row in stored}
    assert got["trajectory_exact_match"] == 1.0
    assert all(s.trace_id == trace and s.root_span_id == root and s.task == "refund" for s in response.scores)
    assert {s.reference_version for s in response.scores} == {1}


def test_a_run_from_get_run_evaluates_as_the_online_evaluator_scored_it(api: Any) -> None:
    """Feeding GetRun's trajectory to Evaluate (stored reference) gives the stored online scores."""
    store_reference_set(api.sidecar.store, parse_reference_set(REFERENCES), source="test")
    trace, root = new_trace_id(), new_span_id()
    spans = refund_run(trace, root, failed=True)
    spans.append(tool_span(trace, new_span_id(), root, "lookup", 70, 80, arguments={"id": 8}))
    export(api, *spans)
    stored = {row["metric"]: row["score"] for row in wait_for_scores(api, trace)}
    run = api.stub.GetRun(pb.GetRunRequest(trace_id=trace), timeout=30).trajectory
    response = api.stub.Evaluate(pb.EvaluateRequest(trajectory=run), timeout=30)
    assert {r.metric: r.score for r in response.results} == stored
    assert stored["failure"] == 1.0
    assert stored["trajectory_precision"] == pytest.approx(2 / 3)


def test_unknown_run_is_not_found(api: Any) -> None:
    """A trace id that is not stored is NOT_FOUND; a malformed one is INVALID_ARGUMENT naming trace_id."""
    with pytest.raises(grpc.RpcError) as missing:
        api.stub.GetRun(pb.GetRunRequest(trace_id=new_trace_id()), timeout=30)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    assert "no run with trace_id" in missing.value.details()
    for bad in ("", "XYZ", "ab" * 17):
        with pytest.raises(grpc.RpcError) as invalid:
            api.stub.GetRun(pb.GetRunRequest(trace_id=bad), timeout=30)
        assert invalid.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert invalid.value.details().startswith("trace_id")


def test_a_trace_with_two_runs_needs_the_root_span_id(api: Any) -> None:
    """With two top-level agent runs in a trace, root_span_id picks one; without it the error lists both."""
    trace, first, second = new_trace_id(), new_span_id(), new_span_id()
    export(
        api,
        agent_span(trace, first, 0, 50, agent="a"),
        tool_span(trace, new_span_id(), first, "one", 10, 20),
        agent_span(trace, second, 100, 150, agent="b"),
        tool_span(trace, new_span_id(), second, "two", 110, 120),
    )
    with pytest.raises(grpc.RpcError) as ambiguous:
        api.stub.GetRun(pb.GetRunRequest(trace_id=trace), timeout=30)
    assert ambiguous.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert ambiguous.value.details().startswith("root_span_id")
    assert first in ambiguous.value.details()
    assert second in ambiguous.value.details()
    run = api.stub.GetRun(pb.GetRunRequest(trace_id=trace, root_span_id=second), timeout=30).trajectory
    assert (run.agent, [call.name for call in run.tool_calls]) == ("b", ["two"])
    with pytest.raises(grpc.RpcError) as missing:
        api.stub.GetRun(pb.GetRunRequest(trace_id=trace, root_span_id=new_span_id()), timeout=30)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
