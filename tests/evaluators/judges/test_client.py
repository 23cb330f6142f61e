"""The judge client against a local OpenAI-compatible server, through the real `openai` client."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from email.utils import formatdate
from typing import Any

import pytest
from llm_server import LlmServer, Reply
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from agenttrail.collector.errors import ConfigError
from agenttrail.evaluators.judges.base import BudgetExhausted
from agenttrail.evaluators.judges.budget import BudgetTracker, JudgeBudget
from agenttrail.evaluators.judges.client import JudgeSettings, OpenAIJudgeClient, _retry_after

SCHEMA = {
    "type": "object",
    "properties": {"reason": {"type": "string"}, "score": {"type": "number", "minimum": 0, "maximum": 1}},
    "required": ["reason", "score"],
}
MESSAGES = [{"role": "system", "content": "You grade."}, {"role": "user", "content": "Grade this."}]
GOOD = {"reason": "fine", "score": 0.75}

Serve = Callable[..., LlmServer]
ClientFor = Callable[..., OpenAIJudgeClient]


def ask(client: OpenAIJudgeClient, **kwargs: Any) -> Any:
    return client.complete_json(MESSAGES, SCHEMA, schema_name="verdict", judge="test_judge", **kwargs)


def test_correct_answer_is_parsed_with_usage_and_cost(serve: Serve, client_for: ClientFor) -> None:
    """A valid answer comes back as the value, with tokens and cost, asked for with json_schema."""
    llm = serve(Reply.chat_json(GOOD, prompt_tokens=1000, completion_tokens=200))
    client = client_for(llm, prompt_price_per_1m=2.0, completion_price_per_1m=10.0)
    call = ask(client)
    assert call.error == ""
    assert call.value == GOOD
    assert (call.prompt_tokens, call.completion_tokens) == (1000, 200)
    assert call.cost == pytest.approx((1000 * 2.0 + 200 * 10.0) / 1e6)
    assert call.model == "judge-model"
    assert call.latency_s > 0
    request = llm.chat_requests()[0]
    assert request["response_format"]["type"] == "json_schema"
    assert request["response_format"]["json_schema"]["schema"] == SCHEMA
    assert request["temperature"] == 0
    assert {k.lower(): v for k, v in request["_headers"].items()}["authorization"] == "Bearer test"


def test_malformed_json_is_repaired_once(serve: Serve, client_for: ClientFor) -> None:
    """A malformed answer gets one repair request carrying the error; usage sums both requests."""
    llm = serve(Reply.chat('{"reason": "fine", "score": '), Reply.chat_json(GOOD))
    call = ask(client_for(llm))
    assert call.value == GOOD
    assert call.error == ""
    assert call.prompt_tokens == 200
    repair = llm.chat_requests()[1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": '{"reason": "fine", "score": '}
    assert "not valid JSON" in repair[-1]["content"]


def test_schema_violation_is_repaired_with_the_path(serve: Serve, client_for: ClientFor) -> None:
    """An answer breaking the schema is sent back naming the bad field."""
    llm = serve(Reply.chat_json({"reason": "x", "score": 7}), Reply.chat_json(GOOD))
    assert ask(client_for(llm)).value == GOOD
    assert "$.score: 7 is above the maximum 1" in llm.chat_requests()[1]["messages"][-1]["content"]


def test_validator_error_triggers_the_repair(serve: Serve, client_for: ClientFor) -> None:
    """The judge's own validator (ValueError) is part of validation and its message is sent back."""

    def validate(value: Any) -> None:
        if value["score"] not in (0, 1):
            raise ValueError("score must be 0 or 1")

    llm = serve(Reply.chat_json(GOOD), Reply.chat_json({"reason": "ok", "score": 1}))
    assert ask(client_for(llm), validate=validate).value == {"reason": "ok", "score": 1}
    assert "score must be 0 or 1" in llm.chat_requests()[1]["messages"][-1]["content"]


def test_malformed_twice_is_an_error_result(serve: Serve, client_for: ClientFor) -> None:
    """Two invalid answers end as an error result (no value), never as a made-up score."""
    llm = serve(Reply.chat("I think it is good."))
    call = ask(client_for(llm))
    assert call.value is None
    assert call.error.startswith("invalid answer after one repair")
    assert len(llm.chat_requests()) == 2
    assert call.prompt_tokens == 200


def test_fenced_json_is_accepted(serve: Serve, client_for: ClientFor) -> None:
    """A JSON answer inside a ```json fence is read without a repair."""
    llm = serve(Reply.chat(f"```json\n{json.dumps(GOOD)}\n```"))
    assert ask(client_for(llm)).value == GOOD
    assert len(llm.chat_requests()) == 1


def test_429_retry_after_is_honoured(serve: Serve, client_for: ClientFor) -> None:
    """A 429 with Retry-After: 1 waits about a second before the retry, which succeeds."""
    llm = serve(Reply.error(429, "slow down", {"Retry-After": "1"}), Reply.chat_json(GOOD))
    started = time.monotonic()
    call = ask(client_for(llm))
    assert call.value == GOOD
    assert time.monotonic() - started >= 0.9
    assert len(llm.chat_requests()) == 2


def test_retry_after_forms() -> None:
    """Retry-After in seconds, as an HTTP date and as retry-after-ms are all read."""
    assert _retry_after({"retry-after": "2.5"}) == 2.5
    assert _retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    in_ten = _retry_after({"retry-after": formatdate(time.time() + 10, usegmt=True)})
    assert in_ten is not None
    assert 8 <= in_ten <= 11
    assert _retry_after({"retry-after": "soon"}) is None
    assert _retry_after({}) is None


def test_retry_after_is_capped(serve: Serve, client_for: ClientFor) -> None:
    """An absurd Retry-After is capped at retry_after_max_s."""
    llm = serve(Reply.error(429, "later", {"Retry-After": "3600"}), Reply.chat_json(GOOD))
    started = time.monotonic()
    assert ask(client_for(llm, retry_after_max_s=0.2)).value == GOOD
    assert time.monotonic() - started < 5


def test_server_errors_are_retried_then_succeed(serve: Serve, client_for: ClientFor) -> None:
    """Two 500s then a good answer: the call succeeds on the third request."""
    llm = serve(Reply.error(500), Reply.error(503), Reply.chat_json(GOOD))
    call = ask(client_for(llm))
    assert call.value == GOOD
    assert len(llm.chat_requests()) == 3


def test_server_errors_beyond_retries_are_an_error(serve: Serve, client_for: ClientFor) -> None:
    """500s beyond max_retries end as an error result naming the status and the attempts."""
    llm = serve(Reply.error(500, "boom"))
    call = ask(client_for(llm, max_retries=2))
    assert call.value is None
    assert "HTTP 500 after 3 attempt(s): boom" in call.error
    assert len(llm.chat_requests()) == 3


def test_client_errors_are_not_retried(serve: Serve, client_for: ClientFor) -> None:
    """A 401 is not retried: it cannot get better by waiting."""
    llm = serve(Reply.error(401, "bad key"))
    call = ask(client_for(llm))
    assert "HTTP 401" in call.error
    assert len(llm.chat_requests()) == 1


def test_timeout_is_retried_then_an_error(serve: Serve, client_for: ClientFor) -> None:
    """A reply slower than timeout_s is retried, then recorded as an error saying it timed out."""
    llm = serve(Reply.chat_json(GOOD, delay_s=1.5))
    call = ask(client_for(llm, timeout_s=0.3, max_retries=1))
    assert call.value is None
    assert "timed out after 2 attempt(s)" in call.error
    assert len(llm.chat_requests()) == 2


def test_slow_answer_then_fast_answer_succeeds(serve: Serve, client_for: ClientFor) -> None:
    """After one timed-out request, a prompt answer is accepted."""
    llm = serve(Reply.chat_json(GOOD, delay_s=1.5), Reply.chat_json(GOOD))
    assert ask(client_for(llm, timeout_s=0.3)).value == GOOD


def test_budget_exhaustion_raises_before_any_request(serve: Serve, client_for: ClientFor) -> None:
    """Once the hourly token budget is spent, the next call raises BudgetExhausted and sends nothing."""
    llm = serve(Reply.chat_json(GOOD, prompt_tokens=100, completion_tokens=30))
    client = client_for(llm)
    # A fixed clock 10 minutes into an hour: the wall clock could cross the top of the hour
    # between the two calls and open a fresh window.
    client.budget = BudgetTracker(JudgeBudget(tokens_per_hour=100), clock=lambda: 5 * 3600 + 600.0)
    assert ask(client).value == GOOD
    with pytest.raises(BudgetExhausted) as raised:
        ask(client)
    assert len(llm.chat_requests()) == 1
    message = str(raised.value)
    assert "130 of 100 tokens per hour" in message
    assert "resumes at" in message
    assert raised.value.resume_at == 6 * 3600


def test_cost_budget_per_day_names_the_cost() -> None:
    """A spent daily cost budget says so, and resumes at the next UTC midnight."""
    tracker = BudgetTracker(JudgeBudget(cost_per_day=1.0), clock=lambda: 86400 * 3 + 5000.0)
    tracker.record(tokens=10, cost=1.25)
    with pytest.raises(BudgetExhausted, match=r"cost 1\.2500 of 1 per day") as raised:
        tracker.check()
    assert raised.value.resume_at == 86400 * 4


def test_budget_window_rolls_over() -> None:
    """Spend from the previous hour does not count against the next one."""
    now = [3600.0 * 10 + 10]
    tracker = BudgetTracker(JudgeBudget(tokens_per_hour=50), clock=lambda: now[0])
    tracker.record(tokens=60, cost=0.0)
    with pytest.raises(BudgetExhausted):
        tracker.check()
    now[0] += 3600
    tracker.check()
    assert tracker.spent()["hour"]["tokens"] == 0
    assert tracker.spent()["day"]["tokens"] == 60


def test_judge_span_is_marked_and_a_trace_of_its_own(
    serve: Serve, client_for: ClientFor, provider: TracerProvider, spans: InMemorySpanExporter
) -> None:
    """A call exports one `chat {model}` CLIENT span marked agenttrail.judge, outside the caller's trace."""
    llm = serve(Reply.error(500), Reply.chat_json(GOOD, prompt_tokens=11, completion_tokens=7))
    client = client_for(llm)
    with provider.get_tracer("caller").start_as_current_span("invoke_agent caller") as outer:
        ask(client)
    judge_span = next(span for span in spans.get_finished_spans() if span.name == "chat judge-model")
    attributes = dict(judge_span.attributes or {})
    assert judge_span.kind is SpanKind.CLIENT
    assert attributes["agenttrail.judge"] == "true"
    assert attributes["agenttrail.judge.name"] == "test_judge"
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.request.model"] == "judge-model"
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (11, 7)
    assert [event.name for event in judge_span.events] == ["retry"]
    assert judge_span.context is not None
    assert judge_span.context.trace_id != outer.get_span_context().trace_id
    assert [link.context.span_id for link in judge_span.links] == [outer.get_span_context().span_id]


def test_failed_call_span_has_error_status(
    serve: Serve, client_for: ClientFor, spans: InMemorySpanExporter
) -> None:
    """A call that ends in an error result marks its span as an error."""
    llm = serve(Reply.chat("nope"))
    ask(client_for(llm))
    (judge_span,) = spans.get_finished_spans()
    assert judge_span.status.status_code is StatusCode.ERROR


def test_global_tracer_provider_is_the_default(serve: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a tracer_provider the client uses the global one (not a private SDK): its judge span
    is exported by the provider the application installed globally."""
    exporter = InMemorySpanExporter()
    installed = TracerProvider()
    installed.add_span_processor(SimpleSpanProcessor(exporter))
    # The global provider can be set once per process; this stands in for the application's.
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: installed)
    llm = serve(Reply.chat_json(GOOD))
    client = OpenAIJudgeClient(JudgeSettings(model="m", base_url=llm.base_url, api_key="k"))
    assert ask(client).value == GOOD
    assert [span.kind for span in exporter.get_finished_spans()] == [SpanKind.CLIENT]


def test_auto_mode_steps_down_when_json_schema_is_rejected(serve: Serve, client_for: ClientFor) -> None:
    """An endpoint refusing json_schema (400) gets json_object, remembered for later calls."""

    def no_json_schema(request: dict[str, Any]) -> Reply:
        if request.get("response_format", {}).get("type") == "json_schema":
            return Reply.error(400, "response_format json_schema is not supported")
        return Reply.chat_json(GOOD)

    llm = serve(no_json_schema)
    client = client_for(llm)
    assert ask(client).value == GOOD
    assert ask(client).value == GOOD
    kinds = [request.get("response_format", {}).get("type") for request in llm.chat_requests()]
    assert kinds == ["json_schema", "json_object", "json_object"]
    assert '"required": ["reason", "score"]' in llm.chat_requests()[1]["messages"][0]["content"]


def test_prompt_mode_sends_no_response_format(serve: Serve, client_for: ClientFor) -> None:
    """response_format=prompt puts the schema into the system message only."""
    llm = serve(Reply.chat_json(GOOD))
    assert ask(client_for(llm, response_format="prompt")).value == GOOD
    request = llm.chat_requests()[0]
    assert "response_format" not in request
    assert request["messages"][0]["content"].startswith("You grade.")
    assert "JSON schema" in request["messages"][0]["content"]


def test_concurrency_limit_holds(serve: Serve, client_for: ClientFor) -> None:
    """No more than `concurrency` requests are in flight at once, across threads."""
    in_flight, peak, lock = [0], [0], threading.Lock()

    def slow(request: dict[str, Any]) -> Reply:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.15)
        with lock:
            in_flight[0] -= 1
        return Reply.chat_json(GOOD)

    client = client_for(serve(slow), concurrency=2)
    threads = [threading.Thread(target=ask, args=(client,)) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert peak[0] == 2


def test_settings_reject_unknown_keys_and_bad_values() -> None:
    """Config mistakes name the key and the source."""
    with pytest.raises(ConfigError, match=r"judges.yaml: unknown judge setting\(s\) \['modle'\]"):
        JudgeSettings.from_mapping({"model": "m", "modle": "x"}, "judges.yaml")
    with pytest.raises(ConfigError, match=r"unknown budget setting\(s\) \['tokens_per_week'\]"):
        JudgeSettings.from_mapping({"model": "m", "budget": {"tokens_per_week": 5}}, "judges.yaml")
    with pytest.raises(ConfigError, match="response_format"):
        JudgeSettings.from_mapping({"model": "m", "response_format": "xml"}, "judges.yaml")
    with pytest.raises(ConfigError, match="timeout_s"):
        JudgeSettings.from_mapping({"model": "m", "timeout_s": "soon"}, "judges.yaml")
    with pytest.raises(ConfigError, match="model"):
        JudgeSettings.from_mapping({}, "judges.yaml")


def test_api_key_comes_from_the_named_environment_variable() -> None:
    """api_key_env names where the key is read; api.openai.com without a key is a config error."""
    settings = JudgeSettings(model="m", api_key_env="MY_KEY")
    assert settings.resolved_api_key({"MY_KEY": "secret"}) == "secret"
    with pytest.raises(ConfigError, match="MY_KEY"):
        settings.resolved_api_key({})
    assert JudgeSettings(model="m", base_url="http://127.0.0.1:1/v1").resolved_api_key({}) == "unused"
    assert "secret" not in repr(JudgeSettings(model="m", api_key="secret"))
