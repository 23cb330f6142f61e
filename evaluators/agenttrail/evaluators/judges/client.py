"""The one judge client: structured JSON answers from any OpenAI-compatible chat endpoint.

``OpenAIJudgeClient.complete_json`` does, for every judge that shares the client:

- **budget**: checked before each request; when spent it raises ``BudgetExhausted`` saying which
  budget, how much was used and when judging resumes. Nothing is sent then.
- **concurrency**: at most ``concurrency`` requests in flight (a semaphore held per request,
  released while backing off).
- **retries**: on 408, 429, 5xx, timeouts and connection errors, up to ``max_retries`` more
  attempts with exponential backoff and jitter; ``Retry-After`` / ``retry-after-ms`` (seconds or an
  HTTP date) is honoured, capped at ``retry_after_max_s``. The ``openai`` package's own retries are
  off, so the waits are ours and visible on the span.
- **structured output**: ``response_format`` json_schema where the endpoint takes it. In ``auto``
  mode a 400/422 steps down to json_object, then to plain JSON instructions; the first mode that
  works is remembered. The answer is parsed, checked against the schema and the judge's
  validator; an invalid answer gets ONE repair request carrying the validation error, then the
  call ends as ``JudgeCall(error=...)``.
- **usage**: tokens and cost (prices per 1M tokens) summed over every request of the call.
- **tracing**: one ``chat {model}`` CLIENT span per call through the global tracer provider (or
  the one given), with gen_ai.* attributes and ``agenttrail.judge="true"`` so the collector
  never evaluates judge traffic. The span starts a trace of its own (linked to the caller's span)
  so that judging from inside an agent run does not mark the agent's trace as judge traffic.
"""

from __future__ import annotations

import email.utils
import json
import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Final, Literal, get_args
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, TracerProvider
from opentelemetry.util.types import AttributeValue

from agenttrail.collector.errors import AgentTrailError, ConfigError
from agenttrail.evaluators.judges.base import JudgeCall, Validator
from agenttrail.evaluators.judges.budget import BudgetTracker, JudgeBudget
from agenttrail.evaluators.judges.validation import check_schema, parse_json_answer
from agenttrail.instrumentation import attributes as attr

if TYPE_CHECKING:
    import openai

ResponseFormat = Literal["auto", "json_schema", "json_object", "prompt"]
_STEP_DOWN: Final[dict[str, str]] = {"json_schema": "json_object", "json_object": "prompt"}
_RETRYABLE_STATUS: Final = frozenset({408, 429})
_FORMAT_REJECTED_STATUS: Final = frozenset({400, 422})
TRACER_NAME: Final = "agenttrail.evaluators.judges"


@dataclass(frozen=True, slots=True)
class JudgeSettings:
    """How a judge reaches its model. Judges with equal settings can share one client."""

    model: str
    base_url: str | None = None  # None: api.openai.com
    api_key: str | None = field(default=None, repr=False)
    api_key_env: str = "OPENAI_API_KEY"  # read when api_key is not given
    timeout_s: float = 60.0
    temperature: float = 0.0
    max_tokens: int | None = 1024
    max_retries: int = 3
    concurrency: int = 4
    response_format: ResponseFormat = "auto"
    prompt_price_per_1m: float = 0.0  # currency per 1M prompt tokens
    completion_price_per_1m: float = 0.0
    budget: JudgeBudget = field(default_factory=JudgeBudget)
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    retry_after_max_s: float = 120.0

    def __post_init__(self) -> None:
        if not self.model:
            raise ConfigError("judge model: required (set model:, --judge-model or AGENTTRAIL_JUDGE_MODEL)")
        if self.response_format not in get_args(ResponseFormat):
            raise ConfigError(
                f"response_format: expected one of {get_args(ResponseFormat)}, got {self.response_format!r}"
            )
        positive = ("timeout_s", "concurrency", "backoff_max_s", "retry_after_max_s")
        for name in positive:
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name}: expected a positive number, got {getattr(self, name)!r}")
        for name in ("max_retries", "temperature", "prompt_price_per_1m", "completion_price_per_1m"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}: expected a number >= 0, got {getattr(self, name)!r}")
        if self.max_tokens is not None and self.max_tokens <= 0:
            raise ConfigError(f"max_tokens: expected a positive integer, got {self.max_tokens!r}")

    @classmethod
    def setting_names(cls) -> frozenset[str]:
        """The setting names a judge definition may carry."""
        return frozenset(item.name for item in fields(cls))

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any], source: str) -> JudgeSettings:
        """Settings from a config mapping; unknown keys or bad values raise ConfigError naming them."""
        unknown = sorted(set(mapping) - cls.setting_names())
        if unknown:
            raise ConfigError(
                f"{source}: unknown judge setting(s) {unknown}; known: {sorted(cls.setting_names())}"
            )
        values: dict[str, Any] = {}
        for key, value in mapping.items():
            try:
                values[key] = _CONVERT[key](value)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"{source}: {key}: {exc}") from exc
        if "budget" in mapping:
            values["budget"] = JudgeBudget.from_mapping(mapping["budget"], source)
        values.setdefault("model", "")  # so a missing model gets the message saying where to set it
        try:
            return cls(**values)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from exc

    def resolved_api_key(self, environ: Mapping[str, str] | None = None) -> str:
        """The key to send; local endpoints (vLLM, Ollama) take any, api.openai.com needs one."""
        environ = os.environ if environ is None else environ
        key = self.api_key or environ.get(self.api_key_env, "")
        if not key and self.base_url is None:
            raise ConfigError(
                f"judge model {self.model}: no API key; set api_key, or the {self.api_key_env} "
                "environment variable, or base_url for a local endpoint"
            )
        return key or "unused"

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens * self.prompt_price_per_1m + completion_tokens * self.completion_price_per_1m
        ) / 1e6


def _optional(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else convert(value)


def _int(value: Any) -> int:
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(f"expected an integer, got {value!r}")
    return int(value)


def _float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    return float(value)


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


_CONVERT: Final[dict[str, Callable[[Any], Any]]] = {
    "model": _str,
    "base_url": _optional(_str),
    "api_key": _optional(_str),
    "api_key_env": _str,
    "timeout_s": _float,
    "temperature": _float,
    "max_tokens": _optional(_int),
    "max_retries": _int,
    "concurrency": _int,
    "response_format": _str,
    "prompt_price_per_1m": _float,
    "completion_price_per_1m": _float,
    "budget": lambda value: value,  # parsed by JudgeBudget.from_mapping
    "backoff_base_s": _float,
    "backoff_max_s": _float,
    "retry_after_max_s": _float,
}
assert set(_CONVERT) == JudgeSettings.setting_names(), "converters and settings differ"


@dataclass(slots=True)
class _Tally:
    """Usage summed over the requests of one call."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    model: str = ""

    def call(self, started: float, value: Any = None, error: str = "") -> JudgeCall:
        return JudgeCall(
            value=value,
            error=error,
            model=self.model,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            latency_s=time.monotonic() - started,
            cost=self.cost,
        )


class _Failed(AgentTrailError):
    """A request that cannot succeed (retries spent, or refused); becomes JudgeCall.error."""


class OpenAIJudgeClient:
    """`ChatJudgeClient` over the `openai` package; see the module docstring for what it adds."""

    def __init__(
        self,
        settings: JudgeSettings,
        *,
        tracer_provider: TracerProvider | None = None,
        budget: BudgetTracker | None = None,
        environ: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self.budget = budget or BudgetTracker(settings.budget)
        import openai  # here, not at import: it takes seconds, and serve without judges never needs it

        self._openai = openai.OpenAI(
            base_url=settings.base_url,
            api_key=settings.resolved_api_key(environ),
            timeout=settings.timeout_s,
            max_retries=0,
        )
        self._slots = threading.BoundedSemaphore(settings.concurrency)
        self._tracer = trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)
        self._sleep = sleep
        # The response_format that worked (auto mode learns it once); fixed when configured.
        self._mode: str | None = None if settings.response_format == "auto" else settings.response_format
        server = urlsplit(settings.base_url or "https://api.openai.com/v1")
        self._span_attributes: dict[str, AttributeValue] = {
            attr.GEN_AI_OPERATION_NAME: attr.OPERATION_CHAT,
            attr.GEN_AI_PROVIDER_NAME: "openai",
            attr.GEN_AI_REQUEST_MODEL: settings.model,
            "gen_ai.request.temperature": settings.temperature,
            "server.address": server.hostname or "",
            "server.port": server.port or (443 if server.scheme == "https" else 80),
            attr.AGENTTRAIL_JUDGE: "true",
        }
        if settings.max_tokens:
            self._span_attributes["gen_ai.request.max_tokens"] = settings.max_tokens

    def complete_json(
        self,
        messages: Sequence[Mapping[str, Any]],
        schema: Mapping[str, Any],
        *,
        schema_name: str,
        validate: Validator | None = None,
        judge: str = "",
    ) -> JudgeCall:
        """One validated JSON answer (or an error result); BudgetExhausted before any request."""
        self.budget.check()  # before the span: a paused judge makes no traffic at all
        started = time.monotonic()
        tally = _Tally(model=self.settings.model)
        caller = trace.get_current_span().get_span_context()
        with self._tracer.start_as_current_span(
            f"chat {self.settings.model}",
            context=Context(),  # a trace of its own, see the module docstring
            kind=SpanKind.CLIENT,
            links=[Link(caller)] if caller.is_valid else None,
            attributes={**self._span_attributes, attr.AGENTTRAIL_JUDGE_NAME: judge},
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                call = self._complete(list(messages), schema, schema_name, validate, tally, span, started)
            except BaseException as exc:
                span.set_status(Status(StatusCode.ERROR, str(exc)))
                span.set_attribute(attr.ERROR_TYPE, type(exc).__name__)
                raise
            finally:
                span.set_attribute(attr.GEN_AI_USAGE_INPUT_TOKENS, tally.prompt_tokens)
                span.set_attribute(attr.GEN_AI_USAGE_OUTPUT_TOKENS, tally.completion_tokens)
                span.set_attribute("gen_ai.response.model", tally.model)
            if call.error:
                span.set_status(Status(StatusCode.ERROR, call.error))
                span.set_attribute(attr.ERROR_TYPE, "judge_call_failed")
            return call

    def _complete(
        self,
        conversation: list[Mapping[str, Any]],
        schema: Mapping[str, Any],
        schema_name: str,
        validate: Validator | None,
        tally: _Tally,
        span: Span,
        started: float,
    ) -> JudgeCall:
        for repair in (False, True):
            try:
                content = self._request(conversation, schema, schema_name, tally, span)
            except _Failed as exc:
                return tally.call(started, error=str(exc))
            try:
                value = parse_json_answer(content)
                check_schema(value, schema)
                if validate is not None:
                    validate(value)
            except ValueError as exc:
                if repair:
                    return tally.call(started, error=f"invalid answer after one repair: {exc}")
                span.add_event("repair", {"error": str(exc)[:500]})
                conversation = [
                    *conversation,
                    {"role": "assistant", "content": content},
                    {
                        "role": "user",
                        "content": f"Your answer was not valid: {exc}. Answer again with only the "
                        f"JSON object that matches the {schema_name} schema.",
                    },
                ]
                continue
            return tally.call(started, value=value)
        raise AssertionError("unreachable: the repair round returns")

    def _request(
        self,
        conversation: list[Mapping[str, Any]],
        schema: Mapping[str, Any],
        schema_name: str,
        tally: _Tally,
        span: Span,
    ) -> str:
        """The answer text of one chat request, after retries and response_format step-downs."""
        import openai

        auto = self.settings.response_format == "auto"
        mode = self._mode or "json_schema"
        retries = 0
        while True:
            self.budget.check()
            try:
                with self._slots:
                    response = self._openai.chat.completions.create(
                        **self._request_body(conversation, mode, schema, schema_name)
                    )
            except openai.APIStatusError as exc:
                status = exc.status_code
                if auto and status in _FORMAT_REJECTED_STATUS and mode in _STEP_DOWN:
                    span.add_event("response_format.step_down", {"from": mode, "to": _STEP_DOWN[mode]})
                    mode = _STEP_DOWN[mode]
                    continue
                if (status in _RETRYABLE_STATUS or status >= 500) and retries < self.settings.max_retries:
                    retries += 1
                    self._back_off(retries, f"HTTP {status}", _retry_after(exc.response.headers), span)
                    continue
                raise _Failed(
                    f"model endpoint answered HTTP {status} after {retries + 1} attempt(s): {_message(exc)}"
                ) from exc
            except openai.APIConnectionError as exc:  # includes APITimeoutError
                what = "timed out" if isinstance(exc, openai.APITimeoutError) else "connection failed"
                if retries < self.settings.max_retries:
                    retries += 1
                    self._back_off(retries, what, None, span)
                    continue
                raise _Failed(
                    f"model request {what} after {retries + 1} attempt(s) "
                    f"(timeout_s={self.settings.timeout_s}): {exc}"
                ) from exc
            self._count(response, tally)
            if auto and self._mode is None:
                self._mode = mode
            span.set_attribute("agenttrail.judge.response_format", mode)
            choices = response.choices
            return (choices[0].message.content or "") if choices else ""

    def _request_body(
        self, conversation: list[Mapping[str, Any]], mode: str, schema: Mapping[str, Any], schema_name: str
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.settings.model,
            "messages": _with_format(conversation, mode, schema, schema_name),
            "temperature": self.settings.temperature,
        }
        if self.settings.max_tokens:
            body["max_tokens"] = self.settings.max_tokens
        if mode == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": schema},
            }
        elif mode == "json_object":
            body["response_format"] = {"type": "json_object"}
        return body

    def _count(self, response: Any, tally: _Tally) -> None:
        usage = response.usage
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        cost = self.settings.cost(prompt, completion)
        tally.prompt_tokens += prompt
        tally.completion_tokens += completion
        tally.cost += cost
        tally.model = response.model or tally.model
        self.budget.record(prompt + completion, cost)

    def _back_off(self, retry: int, reason: str, retry_after: float | None, span: Span) -> None:
        settings = self.settings
        if retry_after is not None:
            delay = min(max(retry_after, 0.0), settings.retry_after_max_s)
        else:  # exponential, with "equal jitter": never less than half the step
            step = min(settings.backoff_max_s, settings.backoff_base_s * 2 ** (retry - 1))
            delay = step / 2 + random.uniform(0, step / 2)
        span.add_event("retry", {"attempt": retry + 1, "reason": reason, "delay_s": delay})
        self._sleep(delay)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return float(millis) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return when.timestamp() - time.time()


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping) and error.get("message"):
            return str(error["message"])
    return str(exc)


def _with_format(
    messages: list[Mapping[str, Any]], mode: str, schema: Mapping[str, Any], schema_name: str
) -> list[Mapping[str, Any]]:
    """Without json_schema the schema goes into the system message (json_object needs "JSON" there)."""
    if mode == "json_schema":
        return messages
    instruction = (
        f"Answer with one JSON object ({schema_name}) and nothing else: no prose, no code fence. "
        f"It must match this JSON schema:\n{json.dumps(schema, sort_keys=True)}"
    )
    if messages and messages[0].get("role") == "system" and isinstance(messages[0].get("content"), str):
        first = messages[0]
        return [{**first, "content": f"{first['content']}\n\n{instruction}"}, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]
