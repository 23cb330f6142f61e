"""Turning captured values into span attributes: redact hook, JSON, scrubbing, size cap.

The order is fixed: the user's hook first, then secrets are scrubbed, then the text is cut, so
a secret is never half-kept by truncation. Rendering never raises for any input value.
"""

import math
import re
from _json import make_encoder
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any, Final

from opentelemetry.util.types import AttributeValue

from agenttrail.instrumentation import attributes as attr
from agenttrail.instrumentation._errors import internal_error

RedactHook = Callable[[str, str, Any], Any]
"""``redact(kind, name, value) -> value``: kind is arguments/result/input/output, name the tool or agent."""

REDACTED: Final = "[REDACTED]"
REDACTION_FAILED: Final = "[REDACTION FAILED]"
CIRCULAR: Final = "[circular]"
TOO_DEEP: Final = "[too deep]"
MAX_DEPTH: Final = 100

# Searched (case-insensitively) in dict keys and parameter names; a match redacts the whole value.
# The look-aheads keep LLM vocabulary such as max_tokens, token_count, tokenizer and author visible.
DEFAULT_KEY_PATTERNS: Final = (
    r"passw(?:or)?d",
    r"pwd",
    r"secret",
    r"api[-_. ]?key",
    r"private[-_. ]?key",
    r"session[-_. ]?key",
    r"token(?!s|iz|_?count|_?limit|_?usage|_?budget)",
    r"authorization",
    r"auth(?!or)",
    r"credential",
    r"cookie",
    r"jwt",
    r"[cx]srf",
    r"credit[-_. ]?card",
)
# Words one of which every default key pattern contains. Searched in the lower-cased text first,
# with the value hints below: one literal scan is ten times cheaper than the patterns, and most
# values contain none of them.
_KEY_HINTS: Final = "passw|pwd|secret|key|token|auth|credential|cookie|jwt|srf|card"
_KEY_HINT: Final = re.compile(_KEY_HINTS)

# Searched in the rendered text, so secrets inside repr() of arbitrary objects are caught too.
# Character classes exclude quotes and backslashes: replacing a match keeps JSON valid.
_SECRET_VALUE: Final = re.compile(
    "|".join(
        (
            r"\b[Bb]earer\s+[A-Za-z0-9\-._~+/]{16,}=*",
            r"\bsk-[A-Za-z0-9_\-]{16,}",
            r"\b(?:gh[pousr]_|github_pat_)[A-Za-z0-9_]{20,}",
            r"\bxox[abprs]-[A-Za-z0-9\-]{10,}",
            r"\bAKIA[0-9A-Z]{16}\b",
            r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]+",
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[^\"]*?-----END [A-Z ]*PRIVATE KEY-----",
        )
    )
)
# A literal from each value pattern (lower-cased), for the same first scan.
ANY_HINT_WORDS: Final = (
    *_KEY_HINTS.split("|"),
    *("earer", "sk-", "gh[pousr]_", "github_pat_", "xox", "akia", "eyj"),
)
# The same words grouped by first letter: Python's regex engine tries every branch of an
# alternation at each position, so the grouped form scans text about twice as fast.
_ANY_HINT: Final = re.compile(
    r"p(?:assw|wd)|s(?:ecret|rf|k-)|key|token|a(?:uth|kia)|c(?:redential|ookie|ard)|jwt|earer"
    r"|g(?:h[pousr]_|ithub_pat_)|xox|eyj"
)


def truncation_marker(cut: int) -> str:
    """The suffix that says how much of a value was dropped."""
    return f"…[truncated {cut} chars]"


@dataclass(frozen=True, slots=True)
class CaptureSettings:
    """What to record of arguments and results; replaced as a whole by configure()."""

    enabled: bool = True
    max_value_length: int = 8192
    redact: RedactHook | None = None
    key_pattern: re.Pattern[str] = re.compile("|".join(DEFAULT_KEY_PATTERNS), re.IGNORECASE)
    # User patterns may be anchored (``^pin$``), so the whole-text pre-check cannot stand in
    # for testing each key; with them every container is walked.
    walk_always: bool = False


def make_settings(
    *,
    enabled: bool = True,
    max_value_length: int = 8192,
    redact: RedactHook | None = None,
    scrub_patterns: Iterable[str] | None = None,
) -> CaptureSettings:
    """Validate and compile capture settings; ValueError names the bad parameter."""
    if not isinstance(enabled, bool):
        raise ValueError(f"capture must be True or False, got {enabled!r}")
    if isinstance(max_value_length, bool) or not isinstance(max_value_length, int) or max_value_length < 1:
        raise ValueError(f"max_value_length must be a positive int, got {max_value_length!r}")
    if redact is not None and not callable(redact):
        raise ValueError(f"redact must be a callable (kind, name, value) -> value, got {redact!r}")
    extra = [] if scrub_patterns is None else list(scrub_patterns)
    if isinstance(scrub_patterns, str) or not all(isinstance(p, str) for p in extra):
        raise ValueError(f"scrub_patterns must be a list of regular expressions, got {scrub_patterns!r}")
    try:
        key_pattern = re.compile("|".join((*DEFAULT_KEY_PATTERNS, *extra)), re.IGNORECASE)
    except re.error as exc:
        raise ValueError(f"scrub_patterns contains an invalid regular expression: {exc}") from exc
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
_encode: Final = make_encoder(None, safe_repr, encode_basestring, None, ":", ",", False, False, False)


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
    return safe_repr(value)


def _int_prints(value: int) -> bool:
    """False for ints past Python's int-to-str digit limit, which json cannot encode."""
    try:
        int.__repr__(value)
    except ValueError:
        return False
    return True


def _scrub_keys(value: object, pattern: re.Pattern[str], depth: int, path: set[int]) -> tuple[object, bool]:
    """Copy of ``value`` with the values under secret-looking keys replaced; and whether any were."""
    if not isinstance(value, dict | list | tuple):
        return value, False
    if id(value) in path:
        return CIRCULAR, False
    if depth >= MAX_DEPTH:  # fail closed: deeper levels are not checked, so not shown
        return TOO_DEEP, False
    path.add(id(value))
    scrubbed = False
    try:
        if isinstance(value, dict):
            out: dict[object, object] = {}
            for k, v in value.items():
                if isinstance(k, str) and pattern.search(k):
                    out[k] = REDACTED
                    scrubbed = True
                else:
                    out[k], hit = _scrub_keys(v, pattern, depth + 1, path)
                    scrubbed |= hit
            return out, scrubbed
        items = []
        for v in value:
            item, hit = _scrub_keys(v, pattern, depth + 1, path)
            items.append(item)
            scrubbed |= hit
        return items, scrubbed
    finally:
        path.discard(id(value))


def _scrub(settings: CaptureSettings, value: object, text: str, attrs: dict[str, AttributeValue]) -> str:
    """``text`` with secrets replaced: values under secret keys, then secret-looking strings."""
    scrubbed = False
    # Walking the structure is only needed if a key word appears anywhere in the text.
    if settings.walk_always or _KEY_HINT.search(text.lower()):
        value, scrubbed = _scrub_keys(value, settings.key_pattern, 0, set())
        text = to_json(value)
    text, hits = _SECRET_VALUE.subn(REDACTED, text)
    if scrubbed or hits:
        attrs[attr.AGENTTRAIL_SCRUBBED] = True
    return text


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
    try:  # to_json() inlined: this runs twice per tool call
        text = "".join(_encode(value, 0))
    except Exception:
        text = to_json(value)
    if settings.walk_always or _ANY_HINT.search(text.lower()):
        text = _scrub(settings, value, text, attrs)
    cut = len(text) - settings.max_value_length
    if cut > 0:
        text = text[: settings.max_value_length] + truncation_marker(cut)
        previous = attrs.get(attr.AGENTTRAIL_TRUNCATED)
        attrs[attr.AGENTTRAIL_TRUNCATED] = (*(previous if isinstance(previous, tuple) else ()), *keys)
    for key in keys:
        attrs[key] = text
