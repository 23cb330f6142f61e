"""Turning captured values into span attributes: redact hook, JSON, scrubbing, size cap.

The order is fixed: the user's hook first, then secrets are scrubbed, then the text is cut, so
a secret is never half-kept by truncation. Rendering never raises for any input value.
"""

import math
import re
from _json import make_encoder
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any, Final

from opentelemetry.util.types import AttributeValue

from agenttrail.instrumentation import attributes as attr
from agenttrail.instrumentation._errors import internal_error
from agenttrail.instrumentation._scrubbing import (
    ANY_HINT,
    CIRCULAR,
    DEFAULT_KEY_PATTERN,
    DEFAULT_KEY_PATTERNS,
    KEY_HINT,
    MAX_DEPTH,
    MAX_FINDINGS,
    REDACTED,
    TOO_DEEP,
    compile_key_pattern,
    fields_of,
    scrub_keys,
    scrub_text,
)

__all__ = [
    "CIRCULAR",
    "DEFAULT_KEY_PATTERNS",
    "REDACTED",
    "REDACTION_FAILED",
    "TOO_DEEP",
    "CaptureSettings",
    "RedactHook",
    "arguments_templates",
    "capture_arguments_into",
    "capture_into",
    "make_settings",
    "note_scrubbed",
    "to_json",
    "truncation_marker",
]

RedactHook = Callable[[str, str, Any], Any]
"""``redact(kind, name, value) -> value``: kind is arguments/result/input/output, name the tool or agent."""

REDACTION_FAILED: Final = "[REDACTION FAILED]"


def truncation_marker(cut: int) -> str:
    """The suffix that says how much of a value was dropped."""
    return f"…[truncated {cut} chars]"


@dataclass(frozen=True, slots=True)
class CaptureSettings:
    """What to record of arguments and results; replaced as a whole by configure()."""

    enabled: bool = True
    max_value_length: int = 8192
    redact: RedactHook | None = None
    key_pattern: re.Pattern[str] = DEFAULT_KEY_PATTERN
    # User patterns may be anchored (``^pin$``), so the whole-text pre-check cannot stand in
    # for testing each key; with them every container is walked and every name=value looked at.
    walk_always: bool = False


def make_settings(
    *,
    enabled: bool = True,
    max_value_length: int = 8192,
    redact: RedactHook | None = None,
    scrub_patterns: Iterable[str] | None = None,
    scrub_source: str = "scrub_patterns",
) -> CaptureSettings:
    """Validate and compile capture settings; ValueError names the bad parameter.

    ``scrub_source`` is what errors about a pattern call the list (an argument or a variable).
    """
    if not isinstance(enabled, bool):
        raise ValueError(f"capture must be True or False, got {enabled!r}")
    if isinstance(max_value_length, bool) or not isinstance(max_value_length, int) or max_value_length < 1:
        raise ValueError(f"max_value_length must be a positive int, got {max_value_length!r}")
    if redact is not None and not callable(redact):
        raise ValueError(f"redact must be a callable (kind, name, value) -> value, got {redact!r}")
    if isinstance(scrub_patterns, str | bytes) or not isinstance(scrub_patterns, Iterable | None):
        raise ValueError(f"{scrub_source} must be a list of regular expressions, got {scrub_patterns!r}")
    extra = [] if scrub_patterns is None else list(scrub_patterns)
    key_pattern = compile_key_pattern(extra, scrub_source) if extra else DEFAULT_KEY_PATTERN
    return CaptureSettings(enabled, max_value_length, redact, key_pattern, walk_always=bool(extra))


def safe_repr(value: object) -> str:
    """repr() that cannot raise: a broken ``__repr__`` gives a placeholder naming the type."""
    try:
        return repr(value)
    except Exception:
        return f"<unrepresentable {type(value).__qualname__}>"


# The C encoder behind json.dumps, built once: JSONEncoder.encode() builds a new one per call,
# which is most of its cost for small values. Without a markers dict it skips cycle detection;
# a cycle ends in RecursionError and takes the slow path like every other failure.
def _default(value: object) -> object:
    """What the encoder writes for a value JSON has no type for: a dataclass or pydantic model's
    fields as an object (so secret fields are found by name), anything else its repr()."""
    try:
        fields = fields_of(value)
    except Exception:
        fields = None
    return safe_repr(value) if fields is None else fields


_encode: Final = make_encoder(None, _default, encode_basestring, None, ":", ",", False, False, False)


def to_json(value: object) -> str:
    """Compact JSON of any value; what JSON cannot hold becomes its repr(). Never raises."""
    try:
        return "".join(_encode(value, 0))
    except Exception:  # cycles, NaN, unprintable ints, non-string keys, very deep nesting
        return "".join(_encode(_jsonable(value, 0, set()), 0))


def _jsonable(value: object, depth: int, path: set[int]) -> object:
    """Rebuild ``value`` from JSON-native types only; the slow path behind to_json."""
    if value is None or isinstance(value, str | bool):
        return value
    if isinstance(value, int):
        return value if _int_prints(value) else safe_repr(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else float.__repr__(value)
    if isinstance(value, dict | list | tuple):
        if id(value) in path:
            return CIRCULAR
        if depth >= MAX_DEPTH:
            return TOO_DEEP
        path.add(id(value))
        try:
            if isinstance(value, dict):
                return {
                    k if isinstance(k, str) else safe_repr(k): _jsonable(v, depth + 1, path)
                    for k, v in value.items()
                }
            return [_jsonable(v, depth + 1, path) for v in value]
        finally:
            path.discard(id(value))
    fields = _default(value)
    if isinstance(fields, dict):
        if id(value) in path:
            return CIRCULAR
        path.add(id(value))
        try:
            return _jsonable(fields, depth, path)
        finally:
            path.discard(id(value))
    return fields


def _int_prints(value: int) -> bool:
    """False for ints past Python's int-to-str digit limit, which json cannot encode."""
    try:
        int.__repr__(value)
    except ValueError:
        return False
    return True


def _scrub(settings: CaptureSettings, value: object, text: str, lower: str) -> tuple[str, list[str]]:
    """``text`` with secrets replaced, and what was found: values under secret keys first (by
    walking ``value``), then secret name=value pairs and secret-shaped strings in the text."""
    found: dict[str, None] = {}
    # Walking the structure is only needed if a key word appears anywhere in the text.
    if settings.walk_always or KEY_HINT.search(lower):
        value = scrub_keys(value, settings.key_pattern, found)
        if found:
            text = to_json(value)
            lower = text.lower()
    text, in_text = scrub_text(text, settings.key_pattern, settings.walk_always, True, lower)
    return text, [*found, *in_text]


def note_scrubbed(attrs: dict[str, AttributeValue], keys: Iterable[str], findings: list[str]) -> None:
    """Add ``"<attribute>: <finding>"`` entries to the span's agenttrail.scrubbed list (bounded)."""
    new = tuple([f"{key}: {finding}" for key in keys for finding in findings])
    previous = attrs.get(attr.AGENTTRAIL_SCRUBBED)
    if isinstance(previous, tuple):
        new = tuple(dict.fromkeys((*previous, *new)))
    attrs[attr.AGENTTRAIL_SCRUBBED] = new[:MAX_FINDINGS]


def capture_into(
    attrs: dict[str, AttributeValue],
    settings: CaptureSettings,
    kind: str,
    name: str,
    value: object,
    keys: tuple[str, ...],
) -> None:
    """Render ``value`` and store the text under each of ``keys``, noting scrubbing and truncation.

    ``kind`` (arguments/result/input/output) and ``name`` (tool or agent) go to the redact hook.
    """
    if settings.redact is not None:
        try:
            value = settings.redact(kind, name, value)
        except Exception as exc:  # fail closed: the raw value may hold what the hook should hide
            internal_error(f"redact hook ({kind} of {name})", exc)
            value = REDACTION_FAILED
    # A str (the commonest result) is what the encoder would write for it, without the call and
    # the join around it; anything else goes through the encoder (to_json() inlined).
    try:
        text = encode_basestring(value) if type(value) is str else "".join(_encode(value, 0))
    except Exception:
        text = to_json(value)
    lower = text.lower()
    if settings.walk_always or ANY_HINT.search(lower):
        text, findings = _scrub(settings, value, text, lower)
        if findings:
            note_scrubbed(attrs, keys, findings)
    if len(text) > settings.max_value_length:
        text = _truncate(attrs, settings, text, keys)
    for key in keys:
        attrs[key] = text


def _truncate(
    attrs: dict[str, AttributeValue], settings: CaptureSettings, text: str, keys: tuple[str, ...]
) -> str:
    """``text`` cut to the size cap with the marker, and ``keys`` added to agenttrail.truncated."""
    cut = len(text) - settings.max_value_length
    previous = attrs.get(attr.AGENTTRAIL_TRUNCATED)
    attrs[attr.AGENTTRAIL_TRUNCATED] = (*(previous if isinstance(previous, tuple) else ()), *keys)
    return text[: settings.max_value_length] + truncation_marker(cut)


# The fast path for a call's positional arguments. The encoder writes these exact types (not
# subclasses: an IntEnum or a str subclass may look different) with these functions; NaN and
# infinities are no JSON, so they leave the fast path (ValueError) for the encoder's fallback.
def _finite_float_json(value: float) -> str:
    if value - value == 0.0:
        return float.__repr__(value)
    raise ValueError(value)


def _null_json(value: None) -> str:
    return "null"


_SCALAR_JSON: Final[dict[type, Callable[[Any], str]]] = {
    str: encode_basestring,
    int: int.__repr__,  # ValueError past the int-to-str digit limit, as in the encoder
    float: _finite_float_json,
    bool: {True: "true", False: "false"}.__getitem__,
    type(None): _null_json,
}


def arguments_templates(names: Sequence[str]) -> tuple[str, ...] | None:
    """For each n up to ``len(names)``, the JSON object the encoder writes for a dict of the first
    n names, with ``%s`` where each value goes; None if a name holds a hint word.

    A hint word never contains a quote, so in the object's text it lies inside one key or one
    value: with keys free of them, scanning the values alone finds what scanning the text does.
    """
    keys = [encode_basestring(n) for n in names]
    if any("%" in k for k in keys) or ANY_HINT.search(",".join(keys).lower()):
        return None
    return tuple("{" + ",".join(f"{k}:%s" for k in keys[:n]) + "}" for n in range(len(keys) + 1))


def capture_arguments_into(
    attrs: dict[str, AttributeValue],
    settings: CaptureSettings,
    names: tuple[str, ...],
    templates: tuple[str, ...],
    args: tuple[Any, ...],
    keys: tuple[str, ...],
) -> bool:
    """capture_into() of ``dict(zip(names, args))`` for the common call: positional str, int,
    float, bool or None values, no redact hook and no user patterns. The text and everything
    stored are the same; False (nothing stored) for any other call, which then binds its
    arguments and takes capture_into(). ``templates`` come from arguments_templates(names).
    """
    if settings.redact is not None or settings.walk_always or len(args) >= len(templates):
        return False
    try:
        values = [_SCALAR_JSON[type(a)](a) for a in args]
    except (KeyError, ValueError):
        return False
    text = templates[len(values)] % tuple(values)
    # The keys hold no hint word (arguments_templates), so the values decide: where they hold
    # one, the text does, and it is scrubbed as capture_into() would, without a second scan.
    if ANY_HINT.search(",".join(values).lower()):
        text, findings = _scrub(settings, dict(zip(names, args)), text, text.lower())  # noqa: B905
        if findings:
            note_scrubbed(attrs, keys, findings)
    if len(text) > settings.max_value_length:
        text = _truncate(attrs, settings, text, keys)
    for key in keys:
        attrs[key] = text
    return True
