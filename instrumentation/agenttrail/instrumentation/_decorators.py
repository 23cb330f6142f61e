"""Agent-run, tool-call and chat spans: the decorators, the context managers and set_*().

Everything known before a call (span name, static attributes, signature) is worked out once in a
``_SpanSpec``; a call then costs one span start, one attach, one ``set_attributes`` and one end.
Arguments are only bound and serialised when the span is recording, and a positional call of
str/int/float/bool/None values is not bound at all: per-function JSON templates take its values.

Each attribute costs the SDK about 0.6 µs to validate, so a tool span carries only what the spec
lists (no OpenInference mime types: its GenAI attributes are JSON by definition); agent spans,
far fewer, also say ``application/json`` so OpenInference readers parse their input and output.
The GenAI attributes are given at span start, where samplers see them; their OpenInference
mirrors are stored at the end with the rendered values, without a second check
(``_rendered_attributes``).
"""

import functools
import inspect
import traceback
from collections.abc import Callable, Mapping
from contextvars import Token
from types import TracebackType
from typing import Any, Final, Self, TypeVar, cast, overload

from opentelemetry import context, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from agenttrail.instrumentation import attributes as attr
from agenttrail.instrumentation._capture import (
    CaptureSettings,
    arguments_templates,
    capture_arguments_into,
    capture_into,
    note_scrubbed,
)
from agenttrail.instrumentation._errors import internal_error, logger
from agenttrail.instrumentation._rendered_attributes import attribute_blind, set_rendered_attributes
from agenttrail.instrumentation._scrubbing import scrub_text
from agenttrail.instrumentation._state import STATE

F = TypeVar("F", bound=Callable[..., Any])

# Key of the innermost agent run in the OpenTelemetry context. Keeping it in the same context as
# the span costs no extra attach and follows the span wherever OTel context is propagated.
_RUN_KEY: Final = context.create_key("agenttrail-agent-run")


class _Unset:
    """Type of ``_UNSET``: no value given (None is a value that can be captured)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Final = _Unset()

# OpenInference copies of GenAI attributes (set at span end, with the captured values).
_MIRRORS: Final = frozenset({attr.OPENINFERENCE_SPAN_KIND, attr.TOOL_NAME, attr.SESSION_ID})


class _Parameters:
    """How one decorated function's calls are captured: arguments bound to parameter names.

    Worked out once per function: the names, whether a positional call can be bound with zip(),
    and the JSON templates that let such a call of simple values skip binding altogether
    (capture_arguments_into).
    """

    __slots__ = ("first", "names", "signature", "simple", "skip", "templates")

    def __init__(self, func: Callable[..., Any]) -> None:
        self.names: tuple[str, ...] = ()
        self.first, self.simple, self.skip = "", False, 0
        self.templates: tuple[str, ...] | None = None
        try:
            self.signature: inspect.Signature | None = inspect.signature(func)
        except (TypeError, ValueError):  # some builtins and C callables have no signature
            self.signature = None
            return
        params = list(self.signature.parameters.values())
        self.first = params[0].name if params else ""
        self.skip = 1 if self.first in ("self", "cls") else 0
        self.names = tuple(p.name for p in params[self.skip :])
        self.simple = all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
        self.templates = arguments_templates(self.names) if self.simple else None

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """Map a call's arguments to parameter names, without defaults and without self/cls."""
        if self.signature is None:
            return {"args": list(args), "kwargs": kwargs}
        skip = self.skip
        if self.simple and not kwargs and len(args) <= len(self.names) + skip:  # 5x faster than bind()
            # No strict=: fewer args than names is a call using defaults (zip is 40% faster without).
            return dict(zip(self.names, args[skip:] if skip else args))  # noqa: B905
        try:
            bound = self.signature.bind(*args, **kwargs).arguments
        except TypeError:  # the call itself will fail the same way; still show what was passed
            return {"args": list(args[skip:]), "kwargs": kwargs}
        if skip:
            bound.pop(self.first, None)
        return bound

    def fast_capture(
        self,
        attrs: dict[str, AttributeValue],
        settings: CaptureSettings,
        args: tuple[Any, ...],
        keys: tuple[str, ...],
    ) -> bool:
        """capture_arguments_into() for a call without keyword arguments; False if it does not apply."""
        templates = self.templates
        return templates is not None and capture_arguments_into(
            attrs, settings, self.names, templates, args[self.skip :], keys
        )


def _error_type(exc: BaseException) -> str:
    return getattr(type(exc), "__qualname__", None) or attr.ERROR_TYPE_OTHER


def _description(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return ""


def _exception_type(exc: BaseException) -> str:
    """``module.qualname`` (builtins by bare name), as the SDK's record_exception() writes it."""
    cls = type(exc)
    module = getattr(cls, "__module__", None)
    return f"{module}.{cls.__qualname__}" if module and module != "builtins" else cls.__qualname__


def _stacktrace(exc: BaseException) -> str:
    try:
        return "".join(traceback.format_exception(exc))
    except Exception:  # a broken __str__ or traceback object; the message still says what happened
        return ""


def _record_failure(span: Span, attrs: dict[str, AttributeValue], exc: BaseException) -> None:
    """The exception event and ERROR status, with secrets scrubbed from the message and stack trace.

    The SDK's record_exception() would store ``str(exc)`` and the trace (source lines included,
    with any literal in them) as they are; findings go to ``attrs`` (agenttrail.scrubbed).
    """
    settings = STATE.settings
    event: dict[str, AttributeValue] = {"exception.type": _exception_type(exc)}
    for key, text in (("exception.message", _description(exc)), ("exception.stacktrace", _stacktrace(exc))):
        event[key], findings = scrub_text(text, settings.key_pattern, settings.walk_always, in_json=False)
        if findings:
            note_scrubbed(attrs, (key,), findings)
    event["exception.escaped"] = "False"
    attrs[attr.ERROR_TYPE] = _error_type(exc)
    set_rendered_attributes(span, attrs)
    span.add_event("exception", event)
    span.set_status(Status(StatusCode.ERROR, str(event["exception.message"])))


class _SpanSpec:
    """What is fixed for every span of one decorated function or one context-manager use."""

    __slots__ = (
        "capture",
        "error_key",
        "in_keys",
        "in_kind",
        "is_agent",
        "kind",
        "label",
        "mirrors",
        "name",
        "needs_call_id",
        "out_keys",
        "out_kind",
        "parameters",
        "static",
        "static_at_end",
    )

    def __init__(
        self,
        operation: str,
        label: str,
        static: dict[str, AttributeValue],
        capture: bool | None,
        error_key: str,
        parameters: _Parameters | None = None,
    ) -> None:
        self.label = label
        # Set for decorated functions: open() then receives (args, kwargs) to bind, lazily.
        self.parameters = parameters
        self.capture = capture
        self.error_key = error_key
        self.is_agent = operation == attr.OPERATION_INVOKE_AGENT
        is_tool = operation == attr.OPERATION_EXECUTE_TOOL
        self.needs_call_id = is_tool and attr.GEN_AI_TOOL_CALL_ID not in static
        self.name = f"{operation} {label}"
        self.kind = SpanKind.CLIENT if operation == attr.OPERATION_CHAT else SpanKind.INTERNAL
        everything: dict[str, AttributeValue] = {attr.GEN_AI_OPERATION_NAME: operation, **static}
        # Only str mirrors skip the SDK's check (always valid); anything else a caller passed
        # stays with the start attributes, which the SDK cleans.
        self.mirrors: dict[str, AttributeValue] = {
            k: v for k, v in everything.items() if k in _MIRRORS and isinstance(v, str)
        }
        self.static = {k: v for k, v in everything.items() if k not in self.mirrors}
        # Where nothing reads attributes at start (attribute_blind), all of them are stored at
        # the end, unchecked; only possible when every value is a str, valid by construction.
        self.static_at_end: dict[str, AttributeValue] | None = (
            everything if all(isinstance(v, str) for v in everything.values()) else None
        )
        self.in_keys: tuple[str, ...]
        self.out_keys: tuple[str, ...]
        if is_tool:
            self.in_kind, self.out_kind = "arguments", "result"
            self.in_keys = (attr.GEN_AI_TOOL_CALL_ARGUMENTS, attr.INPUT_VALUE)
            self.out_keys = (attr.GEN_AI_TOOL_CALL_RESULT, attr.OUTPUT_VALUE)
        else:
            self.in_kind, self.out_kind = "input", "output"
            self.in_keys, self.out_keys = (attr.INPUT_VALUE,), (attr.OUTPUT_VALUE,)

    def open(self, value: Any = _UNSET, kwargs: dict[str, Any] | None = None) -> "_Active | None":
        """Start the span, capture the input, make the span current; None if that failed.

        The input is ``value``, or for a decorated function its call arguments bound by name.
        """
        try:
            tracer = STATE.tracer
            at_end = self.static_at_end
            if at_end is not None and attribute_blind(tracer):
                span = tracer.start_span(self.name, kind=self.kind)
            else:
                span = tracer.start_span(self.name, kind=self.kind, attributes=self.static)
                at_end = self.mirrors
            active = _Active(self, span)
            if span.is_recording():
                attrs = at_end.copy()
                active.attrs = attrs
                try:  # a failure here costs the input, not the span
                    if self.needs_call_id:
                        attrs[attr.GEN_AI_TOOL_CALL_ID] = format(span.get_span_context().span_id, "016x")
                    settings = STATE.settings
                    if settings.enabled if self.capture is None else self.capture:
                        active.capture = True
                        if self.is_agent and (value is not _UNSET or self.parameters is not None):
                            attrs[attr.INPUT_MIME_TYPE] = attr.MIME_TYPE_JSON
                        params = self.parameters
                        if params is None:
                            if value is not _UNSET:
                                capture_into(attrs, settings, self.in_kind, self.label, value, self.in_keys)
                        # A decorated function: value is the positional arguments, bound only if
                        # the fast path does not apply.
                        elif kwargs or not params.fast_capture(attrs, settings, value, self.in_keys):
                            bound = params.bind(value, kwargs or {})
                            capture_into(attrs, settings, self.in_kind, self.label, bound, self.in_keys)
                except Exception as exc:
                    internal_error(self.error_key, exc)
            ctx = trace.set_span_in_context(span)
            if self.is_agent:
                ctx = context.set_value(_RUN_KEY, active, ctx)
            active.token = context.attach(ctx)
            return active
        except Exception as exc:
            internal_error(self.error_key, exc)
            return None


class _Active:
    """One span in flight: attributes are collected here and set in one call at the end."""

    __slots__ = ("attrs", "capture", "output", "span", "spec", "token")

    def __init__(self, spec: _SpanSpec, span: Span) -> None:
        self.spec = spec
        self.span = span
        # Pending attributes; None when the span is not recording (then nothing is computed).
        self.attrs: dict[str, AttributeValue] | None = None
        self.capture = False
        self.output: object = _UNSET
        self.token: Token[Context]  # set by _SpanSpec.open() once the span is current

    def succeed(self, result: object) -> None:
        """End the span after a normal return; ``result`` is the fallback output."""
        try:
            attrs = self.attrs
            if attrs is not None:
                output = result if self.output is _UNSET else self.output
                if self.capture and output is not _UNSET:
                    spec = self.spec
                    try:  # a failure here costs the output, not the other attributes
                        if spec.is_agent:
                            attrs[attr.OUTPUT_MIME_TYPE] = attr.MIME_TYPE_JSON
                        capture_into(attrs, STATE.settings, spec.out_kind, spec.label, output, spec.out_keys)
                    except Exception as exc:
                        internal_error(spec.error_key, exc)
                if attrs:
                    set_rendered_attributes(self.span, attrs)
        except Exception as exc:
            internal_error(self.spec.error_key, exc)
        finally:
            self._close()

    def fail(self, exc: BaseException) -> None:
        """End the span as failed by ``exc``; the caller re-raises it untouched."""
        try:
            span = self.span
            attrs = self.attrs
            if attrs is not None:
                _record_failure(span, attrs, exc)
        except Exception as internal:
            internal_error(self.spec.error_key, internal)
        finally:
            self._close()

    def _close(self) -> None:
        try:
            context.detach(self.token)
            self.span.end()
        except Exception as exc:
            internal_error(self.spec.error_key, exc)


def _refuse_generators(decorator: str, func: Callable[..., Any]) -> None:
    if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
        raise TypeError(
            f"@{decorator} cannot wrap the generator function {func.__qualname__}: its span would "
            f"end at the first yield. Return a list instead, or open `with "
            f"{'agent_run' if decorator == 'agent' else 'tool_call'}(...)` inside the generator."
        )


def _wrap(func: Callable[..., Any], spec: _SpanSpec) -> Callable[..., Any]:
    """The per-call wrapper: sync and async kept apart so neither pays for the other."""
    opened = spec.open

    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            active = opened(args, kwargs)
            if active is None:
                return await func(*args, **kwargs)
            try:
                result = await func(*args, **kwargs)
            except BaseException as exc:
                active.fail(exc)
                raise
            active.succeed(result)
            return result

        return async_wrapper

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        active = opened(args, kwargs)
        if active is None:
            return func(*args, **kwargs)
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            active.fail(exc)
            raise
        active.succeed(result)
        return result

    return wrapper


def _instrument(decorator: str, func: Any, make_spec: Callable[[Callable[..., Any]], _SpanSpec]) -> Any:
    # A staticmethod/classmethod object (decorator stacked above it): wrap the function inside.
    if isinstance(func, staticmethod | classmethod):
        return type(func)(_instrument(decorator, func.__func__, make_spec))
    if not callable(func):
        raise TypeError(f"@{decorator} expects a function, got {func!r}")
    _refuse_generators(decorator, func)
    return _wrap(func, make_spec(func))


def _doc_line(func: Callable[..., Any]) -> str | None:
    doc = inspect.getdoc(func)
    return doc.strip().splitlines()[0] if doc and doc.strip() else None


def _where(func: Callable[..., Any]) -> str:
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"


def _label(func: Callable[..., Any], name: str | None) -> str:
    return name if name is not None else getattr(func, "__name__", type(func).__name__)


def _tool_attributes(
    name: str, description: str | None, call_id: str | None = None
) -> dict[str, AttributeValue]:
    static: dict[str, AttributeValue] = {
        attr.GEN_AI_TOOL_NAME: name,
        attr.GEN_AI_TOOL_TYPE: attr.TOOL_TYPE_FUNCTION,
        attr.OPENINFERENCE_SPAN_KIND: attr.SPAN_KIND_TOOL,
        attr.TOOL_NAME: name,
    }
    if description:
        static[attr.GEN_AI_TOOL_DESCRIPTION] = description
    if call_id is not None:
        static[attr.GEN_AI_TOOL_CALL_ID] = call_id
    return static


def _agent_attributes(
    name: str,
    task: str | None,
    version: str | None,
    agent_id: str | None,
    description: str | None,
    conversation_id: str | None = None,
) -> dict[str, AttributeValue]:
    static: dict[str, AttributeValue] = {
        attr.GEN_AI_AGENT_NAME: name,
        attr.OPENINFERENCE_SPAN_KIND: attr.SPAN_KIND_AGENT,
    }
    optional = {
        attr.GEN_AI_AGENT_ID: agent_id,
        attr.GEN_AI_AGENT_VERSION: version,
        attr.GEN_AI_AGENT_DESCRIPTION: description,
        attr.AGENTTRAIL_TASK: task,
        attr.GEN_AI_CONVERSATION_ID: conversation_id,
        attr.SESSION_ID: conversation_id,
    }
    static.update({k: v for k, v in optional.items() if v is not None})
    return static


@overload
def tool(func: F, /) -> F: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None, capture: bool | None = None
) -> Callable[[F], F]: ...
def tool(
    func: F | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    capture: bool | None = None,
) -> F | Callable[[F], F]:
    """Trace each call of a function the agent uses as a tool as an ``execute_tool`` span.

    ``name`` defaults to the function name, ``description`` to the docstring's first line.
    ``capture`` overrides configure(capture=...) for this tool's arguments and result.
    Works on sync and async functions and methods; generator functions are refused.
    """

    def decorate(f: F) -> F:
        def make_spec(fn: Callable[..., Any]) -> _SpanSpec:
            label = _label(fn, name)
            static = _tool_attributes(label, description if description is not None else _doc_line(fn))
            return _SpanSpec(attr.OPERATION_EXECUTE_TOOL, label, static, capture, _where(fn), _Parameters(fn))

        return cast(F, _instrument("tool", f, make_spec))

    return decorate if func is None else decorate(func)


@overload
def agent(func: F, /) -> F: ...
@overload
def agent(
    *,
    name: str | None = None,
    task: str | None = None,
    version: str | None = None,
    agent_id: str | None = None,
    description: str | None = None,
    capture: bool | None = None,
) -> Callable[[F], F]: ...
def agent(
    func: F | None = None,
    /,
    *,
    name: str | None = None,
    task: str | None = None,
    version: str | None = None,
    agent_id: str | None = None,
    description: str | None = None,
    capture: bool | None = None,
) -> F | Callable[[F], F]:
    """Trace each call of an agent's entry point as an ``invoke_agent`` span, the root of a trajectory.

    ``task`` names the reference trajectory evaluators compare the run with (also settable
    during the run with set_task()). The bound arguments are the run's input and the return
    value its output, unless set_output() is called. Generator functions are refused.
    """

    def decorate(f: F) -> F:
        def make_spec(fn: Callable[..., Any]) -> _SpanSpec:
            label = _label(fn, name)
            static = _agent_attributes(label, task, version, agent_id, description)
            return _SpanSpec(attr.OPERATION_INVOKE_AGENT, label, static, capture, _where(fn), _Parameters(fn))

        return cast(F, _instrument("agent", f, make_spec))

    return decorate if func is None else decorate(func)


class _Block:
    """Base of the context-manager forms, for code that is not one function; ``async with`` too."""

    __slots__ = ("_active", "_input", "_spec")

    def __init__(self, spec: _SpanSpec, value: object = _UNSET) -> None:
        self._spec = spec
        self._input = value
        self._active: _Active | None = None

    @property
    def span(self) -> Span:
        """The OpenTelemetry span, to add attributes or events of your own."""
        return trace.INVALID_SPAN if self._active is None else self._active.span

    def __enter__(self) -> Self:
        self._active = self._spec.open(self._input)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        active, self._active = self._active, None
        if active is None:
            return
        if exc is None:
            active.succeed(_UNSET)
        else:
            active.fail(exc)

    async def __aenter__(self) -> Self:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)


class AgentRun(_Block):
    """An agent run opened with agent_run()."""

    __slots__ = ()

    def set_output(self, value: object) -> None:
        """Record the run's final output (captured when the block exits without error)."""
        if self._active is not None:
            self._active.output = value

    def set_task(self, task: str) -> None:
        """Name the reference trajectory that applies to this run."""
        _set_run_attributes(self._active, {attr.AGENTTRAIL_TASK: task})

    def set_conversation_id(self, conversation_id: str) -> None:
        """Tie this run to a conversation (also the OpenInference session)."""
        _set_run_attributes(self._active, _conversation_attributes(conversation_id))

    def end_conversation(self) -> None:
        """Mark this run as its conversation's last (see `end_conversation`)."""
        _set_run_attributes(self._active, {attr.AGENTTRAIL_CONVERSATION_ENDED: True})


class ToolCall(_Block):
    """A tool call opened with tool_call()."""

    __slots__ = ()

    @property
    def call_id(self) -> str:
        """The ``gen_ai.tool.call.id`` of this call: the one given, else the span id in hex."""
        static = self._spec.static.get(attr.GEN_AI_TOOL_CALL_ID)
        return str(static) if static is not None else format(self.span.get_span_context().span_id, "016x")

    def set_result(self, value: object) -> None:
        """Record the tool's result (captured when the block exits without error)."""
        if self._active is not None:
            self._active.output = value


class ChatCall(_Block):
    """A model call opened with chat()."""

    __slots__ = ()

    def set_usage(self, input_tokens: int | None = None, output_tokens: int | None = None) -> None:
        """Record the token usage the model reported."""
        usage = {attr.GEN_AI_USAGE_INPUT_TOKENS: input_tokens, attr.GEN_AI_USAGE_OUTPUT_TOKENS: output_tokens}
        try:
            self.span.set_attributes({k: v for k, v in usage.items() if v is not None})
        except Exception as exc:
            internal_error(self._spec.error_key, exc)


def agent_run(
    name: str,
    *,
    task: str | None = None,
    input: object = _UNSET,
    conversation_id: str | None = None,
    agent_id: str | None = None,
    version: str | None = None,
    description: str | None = None,
    capture: bool | None = None,
) -> AgentRun:
    """Context manager for an agent run that is not one function: ``with agent_run("planner") as run:``."""
    static = _agent_attributes(name, task, version, agent_id, description, conversation_id)
    spec = _SpanSpec(attr.OPERATION_INVOKE_AGENT, name, static, capture, f"agent_run {name}")
    return AgentRun(spec, input)


def tool_call(
    name: str,
    *,
    arguments: object = _UNSET,
    description: str | None = None,
    call_id: str | None = None,
    capture: bool | None = None,
) -> ToolCall:
    """Context manager for a tool call that is not one function: ``with tool_call("search") as call:``.

    ``call_id`` is the id the model gave the call; by default the span id in hex.
    """
    static = _tool_attributes(name, description, call_id)
    spec = _SpanSpec(attr.OPERATION_EXECUTE_TOOL, name, static, capture, f"tool_call {name}")
    return ToolCall(spec, arguments)


def chat(model: str, provider: str | None = None) -> ChatCall:
    """Context manager for one model call: a ``chat {model}`` CLIENT span; report tokens with set_usage()."""
    static: dict[str, AttributeValue] = {
        attr.GEN_AI_REQUEST_MODEL: model,
        attr.OPENINFERENCE_SPAN_KIND: attr.SPAN_KIND_LLM,
    }
    if provider is not None:
        static[attr.GEN_AI_PROVIDER_NAME] = provider
    return ChatCall(_SpanSpec(attr.OPERATION_CHAT, model, static, False, f"chat {model}"))


def _conversation_attributes(conversation_id: str) -> dict[str, AttributeValue]:
    return {attr.GEN_AI_CONVERSATION_ID: conversation_id, attr.SESSION_ID: conversation_id}


def _current_run(what: str) -> _Active | None:
    run = context.get_value(_RUN_KEY)
    if isinstance(run, _Active):
        return run
    logger.debug("agenttrail: %s() called outside any agent run; ignored", what)
    return None


def _set_run_attributes(run: _Active | None, attributes: Mapping[str, AttributeValue]) -> None:
    if run is None:
        return
    try:
        run.span.set_attributes(attributes)
    except Exception as exc:
        internal_error(run.spec.error_key, exc)


def set_task(task: str) -> None:
    """Name the reference trajectory for the innermost agent run, from anywhere inside it."""
    _set_run_attributes(_current_run("set_task"), {attr.AGENTTRAIL_TASK: task})


def set_conversation_id(conversation_id: str) -> None:
    """Tie the innermost agent run to a conversation, from anywhere inside it."""
    _set_run_attributes(_current_run("set_conversation_id"), _conversation_attributes(conversation_id))


def end_conversation() -> None:
    """Mark the innermost agent run as its conversation's last: session judges judge the
    conversation as soon as this run is stored, without waiting for its idle time."""
    _set_run_attributes(_current_run("end_conversation"), {attr.AGENTTRAIL_CONVERSATION_ENDED: True})


def set_output(value: object) -> None:
    """Record the final output of the innermost agent run, instead of its return value."""
    run = _current_run("set_output")
    if run is not None:
        run.output = value
