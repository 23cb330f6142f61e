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
