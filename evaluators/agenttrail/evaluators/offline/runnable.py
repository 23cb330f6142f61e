"""Runnable mode: run the user's agent over a dataset's prompts, traced, and evaluate what it did.

Like Vertex's ``runnable``: for each row, ``agent(query)`` is called inside
``agenttrail.instrumentation.testing.capture_spans()`` and the spans it produced are rebuilt into
a run by the collector's own ``build_runs``, so offline and online evaluation see the same
trajectory. The row's predicted trajectory, latency, failure, response and run are replaced by the
run's.

Rules:

- Each call is wrapped in an ``agent_run`` span, which is the run: its duration is the latency
  of the call, it fails when the call raises, and every tool call below it counts, including
  those of ``@agent`` functions inside (nested agents belong to the run that contains them) and
  of an undecorated function's ``@tool`` calls, which would otherwise be traces of their own.
- An exception from the agent makes the row a failure (``failure`` 1, response None), logged as a
  warning; the other rows still run. KeyboardInterrupt and SystemExit are not caught.
- An ``async def`` agent (or one returning an awaitable) runs on one event loop kept for the
  whole dataset, so clients bound to a loop keep working between rows; it cannot be used from
  inside a running event loop.
- The response is the function's return value itself, not the span's captured copy, which may
  have been scrubbed or cut to the capture size limit.
- Tool inputs and outputs are what the spans captured, read as the online scorer reads them
  (``ToolCall.as_predicted``): an input that is not a JSON object (cut by the size limit) is
  absent, one not captured is NOT_CAPTURED, and a failed call or a null result has no output.
- A row without a query (``query``, ``prompt`` or ``input``) becomes a RowError.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import importlib
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.trajectory import STATUS_ERROR, SpanEvent, SpanRecord, build_runs
from agenttrail.evaluators.offline.datasets import QUERY_FIELDS, DatasetRow, RowError
from agenttrail.instrumentation import agent_run
from agenttrail.instrumentation.testing import capture_spans

log = logging.getLogger("agenttrail.evaluators.offline.runnable")

T = TypeVar("T")

_STATUS_TEXT = {StatusCode.UNSET: "Unset", StatusCode.OK: "Ok", StatusCode.ERROR: STATUS_ERROR}


class AgentLoadError(AgentTrailError, ValueError):
    """A ``module:function`` spec that names no importable callable; the message says which part."""


def load_agent(spec: str) -> Callable[..., Any]:
    """Import ``module:function`` (the function may be a dotted path such as ``Class.method``)."""
    module_name, colon, path = spec.partition(":")
    if not colon or not module_name.strip() or not path.strip():
        raise AgentLoadError(f"expected MODULE:FUNCTION (e.g. my_agent:run), got {spec!r}")
    module_name, path = module_name.strip(), path.strip()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name == exc.name or module_name.startswith(f"{exc.name}.")):
            raise AgentLoadError(
                f"no module named {module_name!r} (is it on the Python path? run from its directory)"
            ) from exc
        raise AgentLoadError(f"importing {module_name!r} failed: {exc}") from exc
    except Exception as exc:
        raise AgentLoadError(f"importing {module_name!r} raised {type(exc).__name__}: {exc}") from exc
    target: object = module
    for part in path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise AgentLoadError(f"{module_name}:{path}: {module_name!r} has no attribute {path!r}") from None
    if not callable(target):
        raise AgentLoadError(f"{module_name}:{path} is a {type(target).__name__}, not a callable")
    return target


def run_agent_over_dataset(
    agent: str | Callable[..., Any], rows: Sequence[DatasetRow | RowError]
) -> list[DatasetRow | RowError]:
    """Each row with the agent's run of its query as predicted trajectory, latency, failure, response.

    ``agent`` is a callable or a ``module:function`` spec (AgentLoadError if it names none).
    RowErrors pass through unchanged.
    """
    function = load_agent(agent) if isinstance(agent, str) else agent
    label = agent if isinstance(agent, str) else getattr(agent, "__qualname__", repr(agent))
    if inspect.iscoroutinefunction(function) and _loop_running():
        raise RuntimeError("an async agent cannot be run from inside a running event loop")
    runner: asyncio.Runner | None = None

    def wait(awaitable: Awaitable[T]) -> T:
        nonlocal runner
        runner = runner or asyncio.Runner()
        # A Runner reuses the context it copied on first use; this row's span must be current.
        return runner.run(_awaited(awaitable), context=contextvars.copy_context())

    try:
        return [row if isinstance(row, RowError) else _run_row(function, label, row, wait) for row in rows]
    finally:
        if runner is not None:
            runner.close()


def _run_row(
    function: Callable[..., Any], label: str, row: DatasetRow, wait: Callable[[Awaitable[Any]], Any]
) -> DatasetRow | RowError:
    if row.query is None:
        fields = ", ".join(QUERY_FIELDS)
        return RowError(row.index, "query", f"no prompt to run the agent on: give one of {fields}", row.line)
    response: Any = None
    root_span_id = 0
    with capture_spans() as captured:
        try:
            with agent_run(label, input=row.query) as run:
                root_span_id = run.span.get_span_context().span_id
                response = function(row.query)
                if inspect.isawaitable(response):
                    response = wait(response)
                run.set_output(response)
        except Exception as exc:
            log.warning("row %d: the agent raised %s: %s", row.index, type(exc).__name__, exc)
            response = None
        records = spans_to_records(captured.spans)
    runs = [run for run in build_runs(records) if run.root_span_id == format(root_span_id, "016x")]
    if not runs:  # only when the capture itself failed; then nothing is known about the call
        return RowError(row.index, None, "the agent run left no trace to evaluate", row.line)
    traced = runs[0]
    return dataclasses.replace(
        row,
        predicted=[call.as_predicted() for call in traced.tool_calls],
        latency_s=traced.latency_s,
        failure=traced.failure,
        response=response,
        run=traced,
    )


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def spans_to_records(spans: Iterable[ReadableSpan]) -> list[SpanRecord]:
    """Finished SDK spans as the collector's SpanRecords, attributes rendered as the OTLP decoder does."""
    records = []
    for span in spans:
        context = span.context
        if context is None or span.start_time is None:
            continue
        start = span.start_time
        end = span.end_time if span.end_time is not None else start
        service = span.resource.attributes.get("service.name", "")
        records.append(
            SpanRecord(
                trace_id=format(context.trace_id, "032x"),
                span_id=format(context.span_id, "016x"),
                parent_span_id=format(span.parent.span_id, "016x") if span.parent is not None else "",
                name=span.name,
                service_name=attribute_text(service),
                start_ns=start,
                duration_ns=end - start,
                status_code=_STATUS_TEXT[span.status.status_code],
                status_message=span.status.description or "",
                attributes=_attribute_map(span.attributes),
                events=tuple(
                    SpanEvent(event.name, event.timestamp, _attribute_map(event.attributes))
                    for event in span.events
                ),
            )
        )
    return records


def _attribute_map(attributes: Mapping[str, object] | None) -> dict[str, str]:
    return {key: attribute_text(value) for key, value in (attributes or {}).items()}


def attribute_text(value: object) -> str:
    """An attribute value as stored text: strings as they are, ``true``/``false``, numbers as
    written (``2.0`` -> ``2``, like the decoder), sequences as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text.removesuffix(".0")
    if isinstance(value, Sequence):
        return json.dumps(list(value), ensure_ascii=False, separators=(",", ":"))
    return str(value)
