"""Who may call the API and what a caller sees when the store is down."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest

from agenttrail.api.v1 import evaluation_pb2 as pb
from agenttrail.collector.store import Store, parse_store
from agenttrail.evaluators.api import EvaluationApi

EVALUATE = pb.EvaluateRequest(trajectory=pb.Trajectory(tool_calls=[pb.ToolCall(name="a")]))


def test_the_bearer_token_of_otlp_guards_the_api(start_sidecar: Callable[..., Any], connect: Any) -> None:
    """With a bearer token configured, calls without it or with another are UNAUTHENTICATED."""
    sidecar = start_sidecar(bearer_token="s3cret")
    _, stub = connect(sidecar.grpc_address)
    for metadata in ((), (("authorization", "Bearer wrong"),), (("authorization", "s3cret"),)):
        for call, request in ((stub.Evaluate, EVALUATE), (stub.ListScores, pb.ListScoresRequest())):
            with pytest.raises(grpc.RpcError) as caught:
                call(request, timeout=30, metadata=metadata)
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    good = (("authorization", "Bearer s3cret"),)
    assert stub.Evaluate(EVALUATE, timeout=30, metadata=good).results
    assert not stub.ListScores(pb.ListScoresRequest(), timeout=30, metadata=good).scores


@pytest.fixture
def unreachable_store_api(connect: Any, closed_port: socket.socket) -> Iterator[Any]:
    """The API on its own gRPC server, over a ClickHouse URL where nothing listens."""
    location = parse_store(f"http://127.0.0.1:{closed_port.getsockname()[1]}/agenttrail")
    api = EvaluationApi(lambda: Store(location), authorize=lambda context: True)
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((api.handler(),))
    bound = server.add_insecure_port("127.0.0.1:0")
    server.start()
    _, stub = connect(f"127.0.0.1:{bound}")
    yield stub
    server.stop(None).wait()


def test_a_store_that_is_down_is_unavailable(unreachable_store_api: Any) -> None:
    """Reads against an unreachable store are UNAVAILABLE (retryable) with the store's message."""
    stub = unreachable_store_api
    for call, request in (
        (stub.ListScores, pb.ListScoresRequest()),
        (stub.GetRun, pb.GetRunRequest(trace_id="ab" * 16)),
        (stub.Evaluate, pb.EvaluateRequest(trajectory=pb.Trajectory(task="needs-the-store"))),
    ):
        with pytest.raises(grpc.RpcError) as caught:
            call(request, timeout=30)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "cannot reach" in caught.value.details()


def test_evaluate_with_an_inline_reference_needs_no_store(unreachable_store_api: Any) -> None:
    """Evaluate with everything inline answers even while the store is down."""
    request = pb.EvaluateRequest(
        trajectory=pb.Trajectory(task="t", tool_calls=[pb.ToolCall(name="a")]),
        reference=pb.Reference(tool_calls=[pb.ToolCall(name="a")]),
        metrics=["trajectory_exact_match"],
    )
    response = unreachable_store_api.Evaluate(request, timeout=30)
    assert response.results[0].score == 1.0
