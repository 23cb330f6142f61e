"""Rendered attributes skip the SDK's per-value check only where the SDK would store them as-is."""

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agenttrail.instrumentation import attributes as attr
from agenttrail.instrumentation import configure, tool
from agenttrail.instrumentation._rendered_attributes import _store_unchecked, set_rendered_attributes
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
