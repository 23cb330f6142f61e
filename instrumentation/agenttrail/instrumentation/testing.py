"""Test helper: record agenttrail's spans in memory with the real SDK.

    with capture_spans() as captured:
        run_my_agent()
    assert captured.one("execute_tool search").attributes["gen_ai.tool.name"] == "search"

The OpenTelemetry global provider can be set only once per process, so capture_spans() never
touches it: it swaps agenttrail's own provider and settings and puts them back afterwards.
"""

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Sampler

from agenttrail.instrumentation._capture import CaptureSettings
from agenttrail.instrumentation._state import STATE, TRACER_NAME

__all__ = ["CapturedSpans", "capture_spans"]


class CapturedSpans:
    """The spans finished while capture_spans() was active, oldest first."""

    def __init__(self, provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
        self.provider = provider
        self.exporter = exporter

    @property
    def spans(self) -> list[ReadableSpan]:
        """All finished spans, in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def by_name(self, name: str) -> list[ReadableSpan]:
        """Finished spans called ``name``."""
        return [s for s in self.spans if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        """The single finished span called ``name``; AssertionError if there are none or several."""
        found = self.by_name(name)
        assert len(found) == 1, f"expected one span {name!r}, got {[s.name for s in self.spans]}"
        return found[0]

    def clear(self) -> None:
        """Forget the spans captured so far."""
        self.exporter.clear()


@contextmanager
def capture_spans(sampler: Sampler | None = None) -> Iterator[CapturedSpans]:
    """Route agenttrail's spans to an in-memory exporter for the block, with default capture settings.

    Every span is sampled unless ``sampler`` says otherwise (e.g. ``ALWAYS_OFF`` to test
    unsampled runs), whatever OTEL_TRACES_SAMPLER says. Whatever
    configure() changes inside the block is undone at its end.
    """
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler or ALWAYS_ON, shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    saved = STATE.snapshot()
    STATE.tracer, STATE.provider = provider.get_tracer(TRACER_NAME), provider
    STATE.owns_provider, STATE.settings = False, CaptureSettings()
    try:
        yield CapturedSpans(provider, exporter)
    finally:
        STATE.restore(saved)
        provider.shutdown()
