"""Evaluate with LLM judges: configured by name or inline, against the local OpenAI-compatible server."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from google.protobuf import struct_pb2
from llm_server import LlmServer, Reply

from agenttrail.api.v1 import evaluation_pb2 as pb
from agenttrail.collector.errors import ConfigError
from agenttrail.evaluators.api import ApiJudges
from agenttrail.evaluators.judges import JudgeInput

Responder = Callable[[dict[str, Any]], Reply]


@pytest.fixture
def llm() -> Iterator[Callable[[Responder], LlmServer]]:
    servers: list[LlmServer] = []

    def start(responder: Responder) -> LlmServer:
        server = LlmServer(responder).__enter__()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def judged_api(
    start_sidecar: Callable[..., Any], connect: Any, tmp_path: Path, server: LlmServer, **judge: Any
) -> Any:
    """A sidecar whose config file has one judge, `accuracy`, on the local LLM server."""
    definition = {
        "name": "accuracy",
        "type": "trajectory_accuracy",
        "model": "judge-model",
        "base_url": server.base_url,
        "api_key": "test",
        "timeout_s": 10,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
        "sample_rate": 0.0,  # read only by the online scheduler
        **judge,
    }
    config = tmp_path / "agenttrail.yaml"
    config.write_text(yaml.safe_dump({"judges": [definition]}))
    sidecar = start_sidecar(str(config))
    return connect(sidecar.grpc_address)[1]


def evaluate_request(*judges: pb.JudgeSpec, **extra: Any) -> pb.EvaluateRequest:
    return pb.EvaluateRequest(
        trajectory=pb.Trajectory(
            task="weather",
            input_json=json.dumps("Weather in Paris?"),
            output_json=json.dumps("Sunny."),
            tool_calls=[
                pb.ToolCall(name="geocode", input_json='{"city": "Paris"}', output_json='{"lat": 48.85}'),
                pb.ToolCall(name="forecast", input_json='{"lat": 48.85}', output_json='"sunny"'),
            ],
        ),
        reference=pb.Reference(tool_calls=[pb.ToolCall(name="geocode"), pb.ToolCall(name="forecast")]),
        metrics=["trajectory_in_order_match"],
        judges=judges,
        **extra,
    )


def inline(**definition: Any) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(definition)
    return struct


def test_a_configured_judge_scores_the_run(
    start_sidecar: Callable[..., Any], connect: Any, tmp_path: Path, llm: Any
) -> None:
    """A judge named from the config answers beside the metrics, with model, tokens and pinned version."""
    server = llm(lambda request: Reply.chat_json({"reasoning": "sensible", "score": 0.75}, prompt_tokens=321))
    options = {"continuous": True, "use_reference": True}
    stub = judged_api(start_sidecar, connect, tmp_path, server, options=options, version="2026-11")
    response = stub.Evaluate(evaluate_request(pb.JudgeSpec(name="accuracy")), timeout=60)
    metrics = [r.metric for r in response.results]
    assert metrics == ["trajectory_in_order_match", "latency", "failure", "accuracy"]
    judged = response.results[-1]
    assert (judged.score, judged.explanation, judged.evaluator) == (0.75, "sensible", "accuracy")
    assert (judged.model, judged.prompt_tokens, judged.completion_tokens) == ("judge-model", 321, 20)
    assert judged.latency_ms > 0  # the model call's time, as stored results carry it
    assert judged.evaluator_version == "2026-11"  # the config's pin, as online results carry
    assert not judged.error
    (sent,) = server.chat_requests()
    prompt = sent["messages"][1]["content"]
    assert "geocode" in prompt
    assert "<<<DATA name=reference_trajectory>>>" in prompt
    assert "Weather in Paris?" in prompt


def test_an_inline_judge_uses_the_sidecars_connection(
    start_sidecar: Callable[..., Any], connect: Any, tmp_path: Path, llm: Any
) -> None:
    """An inline definition (type and options) runs on the configured judge's endpoint."""
    server = llm(lambda request: Reply.chat_json({"reasoning": "no", "score": False}))
    stub = judged_api(start_sidecar, connect, tmp_path, server)
    spec = pb.JudgeSpec(name="strict_accuracy", definition=inline(type="trajectory_accuracy"))
    judged = stub.Evaluate(evaluate_request(spec), timeout=60).results[-1]
    assert (judged.metric, judged.score, judged.label) == ("strict_accuracy", 0.0, "fail")
    assert len(server.chat_requests()) == 1


@pytest.mark.parametrize(
    ("spec", "detail"),
    [
        (pb.JudgeSpec(name="nope"), "no judge named 'nope' (configured: accuracy)"),
        (pb.JudgeSpec(name="x", definition=inline(type="nope")), "unknown type 'nope'"),
        (
            pb.JudgeSpec(name="x", definition=inline(type="rubric", base_url="http://elsewhere/v1")),
            "only type and options",
        ),
        (
            pb.JudgeSpec(name="x", definition=inline(type="trajectory_accuracy", options={"bogus": 1})),
            "bogus",
        ),
        (pb.JudgeSpec(name="latency", definition=inline(type="trajectory_accuracy")), "reported twice"),
    ],
)
def test_bad_judges_are_invalid_argument(
    start_sidecar: Callable[..., Any], connect: Any, tmp_path: Path, llm: Any, spec: pb.JudgeSpec, detail: str
) -> None:
    """An unknown judge, a bad inline definition, or one that sets the endpoint is refused before any call."""
    server = llm(lambda request: Reply.chat_json({"reasoning": "x", "score": True}))
    stub = judged_api(start_sidecar, connect, tmp_path, server)
    with pytest.raises(grpc.RpcError) as caught:
        stub.Evaluate(evaluate_request(spec), timeout=60)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details().startswith("judges")
    assert detail in caught.value.details()
    assert not server.chat_requests()


def test_a_failed_judge_call_is_an_error_result_not_a_zero(
    start_sidecar: Callable[..., Any], connect: Any, tmp_path: Path, llm: Any
) -> None:
    """An answer that stays invalid after the repair retry is a result with an error and no score."""
    server = llm(lambda request: Reply.chat("not json at all"))
    stub = judged_api(start_sidecar, connect, tmp_path, server)
    judged = stub.Evaluate(evaluate_request(pb.JudgeSpec(name="accuracy")), timeout=60).results[-1]
    assert judged.metric == "accuracy"
    assert not judged.HasField("score")
    assert judged.error


def test_judging_beyond_the_slots_is_refused_not_queued(
    start_sidecar: Callable[..., Any], connect: Any, tmp_path: Path, llm: Any
) -> None:
    """While two judged evaluations wait on the model, a third is RESOURCE_EXHAUSTED; metrics still answer."""
    release = threading.Event()

    def respond(request: dict[str, Any]) -> Reply:
        release.wait(30)
        return Reply.chat_json({"reasoning": "ok", "score": True})

    server = llm(respond)
    stub = judged_api(start_sidecar, connect, tmp_path, server)
    judged = evaluate_request(pb.JudgeSpec(name="accuracy"))
    waiting = [stub.Evaluate.future(judged, timeout=60) for _ in range(2)]
    deadline = time.monotonic() + 30
    while len(server.chat_requests()) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        with pytest.raises(grpc.RpcError) as caught:
            stub.Evaluate(judged, timeout=30)
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert stub.Evaluate(evaluate_request(), timeout=30).results[0].score == 1.0
    finally:
        release.set()
    assert [future.result().results[-1].score for future in waiting] == [1.0, 1.0]


def test_available_tools_reach_the_judge(
    start_sidecar: Callable[..., Any], connect: Any, tmp_path: Path, llm: Any
) -> None:
    """The request's available tools are shown to a tool-selection judge."""
    server = llm(lambda request: Reply.chat_json({"score": 1.0, "reason": "right tools"}))
    stub = judged_api(start_sidecar, connect, tmp_path, server)
    tools = [
        pb.AvailableTool(
            name="geocode", description="City to coordinates", parameters_json='{"type": "object"}'
        ),
        pb.AvailableTool(name="send_email", description="Send an email"),
    ]
    spec = pb.JudgeSpec(name="selection", definition=inline(type="tool_selection"))
    results = stub.Evaluate(evaluate_request(spec, available_tools=tools), timeout=60).results
    [judged] = [result for result in results if result.metric == "selection"]
    assert judged.score == 1.0
    prompt = server.chat_requests()[0]["messages"][1]["content"]
    assert "send_email" in prompt
    assert "City to coordinates" in prompt


def test_a_bad_judges_section_stops_the_sidecar_naming_the_file(
    start_sidecar: Callable[..., Any], tmp_path: Path
) -> None:
    """A judge definition the API cannot use is a ConfigError at start-up, naming the file and judge."""
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump({"judges": [{"name": "a", "type": "nope", "model": "m"}]}))
    with pytest.raises(ConfigError, match=r"bad\.yaml.*unknown type 'nope'"):
        start_sidecar(str(config))


def test_inline_judges_use_judge_defaults(llm: Any, tmp_path: Path) -> None:
    """With no judges configured, inline ones run on judge_defaults; with neither, the error says so."""
    server = llm(lambda request: Reply.chat_json({"reasoning": "fine", "score": True}))
    config = tmp_path / "agenttrail.yaml"
    defaults = {"model": "default-model", "base_url": server.base_url, "api_key": "test"}
    config.write_text(yaml.safe_dump({"judge_defaults": defaults}))
    judge = ApiJudges.from_config_file(str(config))("acc", {"type": "trajectory_accuracy"})
    (result,) = judge.evaluate(JudgeInput(tool_calls=({"name": "geocode", "input": {}},)))
    assert (result.metric, result.score) == ("acc", 1.0)
    assert server.chat_requests()[0]["model"] == "default-model"
    with pytest.raises(ConfigError, match="judge_defaults"):
        ApiJudges.from_config_file(None)("acc", {"type": "trajectory_accuracy"})
