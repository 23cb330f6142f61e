"""Rendered attributes skip the SDK's per-value check only where the SDK would store them as-is."""

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Sampler, SamplingResult

from agenttrail.instrumentation import attributes as attr
from agenttrail.instrumentation import configure, tool
from agenttrail.instrumentation._rendered_attributes import (
    _store_unchecked,
    attribute_blind,
    set_rendered_attributes,
)
from agenttrail.instrumentation._state import STATE
from agenttrail.instrumentation.testing import CapturedSpans


@pytest.fixture
def limited() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """A provider with tight span limits, installed as agenttrail's; the previous state restored."""
    saved = STATE.snapshot()
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=7, max_attribute_length=12))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    configure(tracer_provider=provider)
    yield provider, exporter
    STATE.restore(saved)
    provider.shutdown()


def test_sdk_spans_take_the_shortcut(captured: CapturedSpans) -> None:
    """With the SDK's default limits the shortcut applies (so its speed is not silently lost
    if the SDK's internals change), and the values arrive on the exported span."""
    span = STATE.tracer.start_span("s")
    assert _store_unchecked(span, {"k": "v"})
    set_rendered_attributes(span, {"flag": True, "keys": ("a", "b")})
    span.end()
    assert not _store_unchecked(span, {"late": "x"})  # an ended span takes the public path
    exported = captured.one("s").attributes or {}
    assert dict(exported) == {"k": "v", "flag": True, "keys": ("a", "b")}


def test_limits_are_applied_by_the_sdk(limited: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    """A value-length limit and a count limit make the decorator fall back to the SDK, which
    truncates the JSON and keeps at most the configured number of attributes."""
    _, exporter = limited

    @tool
    def search(query: str) -> str:
        return "a long result text"

    assert search("a long query text") == "a long result text"
    [span] = exporter.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert len(attributes) == 7
    assert attributes[attr.GEN_AI_TOOL_CALL_RESULT] == '"a long resu'
    assert all(len(value) <= 12 for value in attributes.values() if isinstance(value, str))


class RecordingSampler(Sampler):
    """A user sampler: it may decide on attributes, so it must see them at start."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
        attributes = kwargs.get("attributes", args[4] if len(args) > 4 else None)
        self.seen.append(dict(attributes or {}))
        return ALWAYS_ON.should_sample(*args, **kwargs)

    def get_description(self) -> str:
        return "RecordingSampler"


class StartWatcher(SpanProcessor):
    """A user processor that reads attributes when a span starts."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.seen.append(dict(span.attributes or {}))


def traced_span(provider: TracerProvider, exporter: InMemorySpanExporter) -> dict[str, Any]:
    """Attributes of one @tool span made with ``provider`` as agenttrail's provider."""
    saved = STATE.snapshot()
    configure(tracer_provider=provider)
    try:

        @tool(description="Look it up")
        def lookup(query: str) -> str:
            return "found"

        lookup("q")
    finally:
        STATE.restore(saved)
    [span] = exporter.get_finished_spans()
    attributes = dict(span.attributes or {})
    del attributes[attr.GEN_AI_TOOL_CALL_ID]  # the span id, different per span
    return attributes


def provider_with(sampler: Sampler | None = None) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler, shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_static_attributes_at_end_only_where_nobody_looks_at_start() -> None:
    """With the SDK's own sampler and processors, static attributes are stored at the end and the
    span is identical to one started with them; a user sampler or a processor added later makes
    the decorator give them at start again, where those see them."""
    fast_provider, fast_exporter = provider_with()
    fast_tracer = fast_provider.get_tracer("t")
    assert attribute_blind(fast_tracer)
    sampler = RecordingSampler()
    slow_provider, slow_exporter = provider_with(sampler)
    assert not attribute_blind(slow_provider.get_tracer("t"))

    fast, slow = traced_span(fast_provider, fast_exporter), traced_span(slow_provider, slow_exporter)
    assert fast == slow
    assert fast[attr.GEN_AI_TOOL_NAME] == "lookup"
    assert sampler.seen[0][attr.GEN_AI_TOOL_NAME] == "lookup"

    watcher = StartWatcher()
    assert attribute_blind(fast_tracer)
    fast_provider.add_span_processor(watcher)
    assert not attribute_blind(fast_tracer)  # the same tracer, judged again
    fast_exporter.clear()
    assert traced_span(fast_provider, fast_exporter) == slow
    assert watcher.seen[0][attr.GEN_AI_TOOL_DESCRIPTION] == "Look it up"
