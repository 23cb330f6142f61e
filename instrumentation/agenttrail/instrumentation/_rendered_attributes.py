"""Setting attributes agenttrail rendered itself, without the SDK checking each value again.

The SDK validates every attribute value it is given (about 0.6 µs each). The values a call
collects (JSON text, the call id, error.type, the scrubbed/truncated flags) are str, bool or
tuples of str by construction, and on a tool span re-checking them was the largest part of the
decorators' overhead. The shortcut stores them only where the SDK would store them unchanged:
the SDK's own span, still open, with no value-length limit and room under the count limit.
Anything else, a user's values, or SDK internals that ever look different, takes the public
`set_attributes`.
"""

import sys
from collections.abc import Mapping
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

# The SDK's span class, looked up once the SDK is loaded: importing the instrumentation does
# not load the SDK (configure() does), and a span can only be the SDK's if the SDK is loaded.
_sdk_span: type | None = None


def set_rendered_attributes(span: Span, attrs: Mapping[str, AttributeValue]) -> None:
    """``span.set_attributes(attrs)`` for values agenttrail rendered (valid attribute values)."""
    global _sdk_span
    if _sdk_span is None:
        _sdk_span = getattr(sys.modules.get("opentelemetry.sdk.trace"), "Span", None)
    if _sdk_span is not None and isinstance(span, _sdk_span) and _store_unchecked(span, attrs):
        return
    span.set_attributes(attrs)


def _store_unchecked(span: Any, attrs: Mapping[str, AttributeValue]) -> bool:
    try:
        bounded = span._attributes
        if type(bounded) is not BoundedAttributes or bounded.max_value_len is not None:
            return False
        with span._lock, bounded._lock:
            stored = bounded._dict
            if span._end_time is not None:
                return False
            if bounded.maxlen is not None and len(stored) + len(attrs) > bounded.maxlen:
                return False
            stored.update(attrs)
        return True
    except AttributeError:  # another SDK layout: the public path is always right
        return False


# The last tracer attribute_blind() judged, with its processor tuple and the verdict. The SDK
# replaces that tuple when a processor is added, so the identity check notices it.
_judged: tuple[object, object, bool] = (None, None, False)
_PARENT_DELEGATES = (
    "_root",
    "_remote_parent_sampled",
    "_remote_parent_not_sampled",
    "_local_parent_sampled",
    "_local_parent_not_sampled",
)


def attribute_blind(tracer: object) -> bool:
    """True if nothing reads a span's attributes before it ends: an SDK tracer whose sampler is
    one of the SDK's attribute-blind ones and whose processors are the SDK's export processors.

    Then a decorator's static attributes (valid str values) can be stored unchecked with the
    rendered ones at the end, instead of checked one by one at start: nobody could tell the
    difference, and the check was a fifth of a bare span's cost. Any other sampler or processor
    (one that may look at attributes at start) gets them at start, as before.
    """
    global _judged
    processors = getattr(getattr(tracer, "span_processor", None), "_span_processors", None)
    judged_tracer, judged_processors, verdict = _judged
    if judged_tracer is tracer and judged_processors is processors:
        return verdict
    verdict = _judge(tracer, processors)
    _judged = (tracer, processors, verdict)
    return verdict


def _judge(tracer: object, processors: object) -> bool:
    sdk = sys.modules.get("opentelemetry.sdk.trace")
    export = sys.modules.get("opentelemetry.sdk.trace.export")
    if sdk is None or export is None or type(tracer) is not sdk.Tracer or not isinstance(processors, tuple):
        return False
    blind_processors = (export.BatchSpanProcessor, export.SimpleSpanProcessor)
    return all(type(p) in blind_processors for p in processors) and _blind_sampler(
        getattr(tracer, "sampler", None), sys.modules["opentelemetry.sdk.trace.sampling"], 0
    )


def _blind_sampler(sampler: object, sampling: Any, depth: int) -> bool:
    if type(sampler) in (sampling.StaticSampler, sampling.TraceIdRatioBased):
        return True
    if type(sampler) in (sampling.ParentBased, sampling.ParentBasedTraceIdRatio) and depth < 4:
        return all(_blind_sampler(getattr(sampler, n, None), sampling, depth + 1) for n in _PARENT_DELEGATES)
    return False
