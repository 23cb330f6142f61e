"""Finding secrets in captured values and exception text, and replacing them with [REDACTED].

Cheapest check first:
- a pre-scan of the lower-cased text for hint words (one regex): most values hold none of them
  and cost nothing more;
- keys: the value under a secret-looking dict key, dataclass field or pydantic field is replaced
  whole (the value is walked, the text rendered again);
- text: ``name=value`` / ``name: value`` whose name is a secret key, and secret-shaped strings
  (bearer and basic credentials, URL passwords, vendor key formats). These run on the rendered
  text, so they find secrets in free text and in the repr() of any object alike.
Each finding is reported as ``"<attribute>: <what>"`` for the span's ``agenttrail.scrubbed``.
"""

import base64
import binascii
import dataclasses
import re
from collections.abc import Callable, Iterable
from typing import Any, Final

REDACTED: Final = "[REDACTED]"
CIRCULAR: Final = "[circular]"
TOO_DEEP: Final = "[too deep]"
MAX_DEPTH: Final = 100
# Bound on agenttrail.scrubbed entries per span: the record must not outgrow what it describes.
MAX_FINDINGS: Final = 32

# Searched (case-insensitively) in dict keys, field names and the names of name=value pairs in
# text; a match redacts the whole value. The look-aheads keep ordinary words visible: max_tokens,
# token_count, tokenizer, author, authentication, passwordless, secretary.
DEFAULT_KEY_PATTERNS: Final = (
    r"passw(?:or)?d(?!less)",
    r"pwd",
    r"secret(?!ar)",
    r"api[-_. ]?key",
    r"private[-_. ]?key",
    r"session[-_. ]?key",
    r"token(?!s|iz|_?count|_?limit|_?usage|_?budget)",
    r"authorization",
    r"auth(?!or|entica)",
    r"credential",
    r"cookie",
    r"jwt",
    r"[cx]srf",
    r"credit[-_. ]?card",
)
# Words one of which every default key pattern contains, searched in the lower-cased text: a
# literal scan is ten times cheaper than the patterns, and most values contain none of them.
_KEY_HINTS: Final = "passw|pwd|secret|key|token|auth|credential|cookie|jwt|srf|card"
# Grouped by first letter (see ANY_HINT): a third faster, and every hint word is scanned for.
KEY_HINT: Final = re.compile(r"p(?:assw|wd)|s(?:ecret|rf)|key|token|auth|c(?:redential|ookie|ard)|jwt")
# What the secret-shaped patterns below start with (lower-cased), for the same pre-scan. A URL
# counts only with a password in it, so ordinary links stay on the fast path.
_URL_PASSWORD_HINT: Final = r'://[^/\s"@]*:[^/\s"@]*@'
KEY_HINT_WORDS: Final = tuple(_KEY_HINTS.split("|"))
ANY_HINT_WORDS: Final = (
    *KEY_HINT_WORDS,
    *("earer", "basic", _URL_PASSWORD_HINT, "sk-", "gh[pousr]_", "github_pat_", "xox", "akia", "eyj"),
)
# The same words grouped by first letter: Python's regex engine tries every branch of an
# alternation at each position, so the grouped form scans text about twice as fast.
ANY_HINT: Final = re.compile(
    r"p(?:assw|wd)|s(?:ecret|rf|k-)|key|token|a(?:uth|kia)|c(?:redential|ookie|ard)|jwt|earer|basic"
    r"|g(?:h[pousr]_|ithub_pat_)|xox|eyj|" + _URL_PASSWORD_HINT
)

# Secret-shaped strings: (name agenttrail.scrubbed reports, literal in the lower-cased text
# without which the pattern cannot match, pattern). Each pattern runs only where its literal is
# found: one regex scan with all of them tried at every position cost 150 µs per KB of text.
# Character classes exclude quotes and backslashes, so replacing a match inside rendered JSON
# keeps it valid.
_SHAPES: Final = tuple(
    (name, hint, re.compile(pattern))
    for name, hint, pattern in (
        # RFC 6750 b64token: short tokens count if they hold a digit or symbol ("Bearer bonds" stays).
        (
            "bearer token",
            "bearer",
            r"\b[Bb]earer\s+(?:(?=[A-Za-z]*[0-9\-._~+/])[A-Za-z0-9\-._~+/]{6,}|[A-Za-z]{24,})=*",
        ),
        ("basic auth", "basic", r"\b[Bb]asic\s+[A-Za-z0-9+/]{4,}={0,2}(?![A-Za-z0-9+/=])"),
        ("url password", "://", r"://[^/\s:@\"'\\]*:[^/\s@\"'\\]+(?=@)"),
        ("OpenAI key", "sk-", r"\bsk-[A-Za-z0-9_\-]{16,}"),
        ("GitHub token", "gh", r"\b(?:gh[pousr]_|github_pat_)[A-Za-z0-9_]{20,}"),
        ("Slack token", "xox", r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"),
        ("AWS key", "akia", r"\bAKIA[0-9A-Z]{16}\b"),
        ("JWT", "eyj", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]+"),
        (
            "private key",
            "private key-----",
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[^\"]*?-----END [A-Z ]*PRIVATE KEY-----",
        ),
    )
)

# ``name=value`` / ``name: value`` in text, the name optionally quoted (JSON or a printed dict).
_NAME: Final = r"(?<![\w.-])(?P<name>[A-Za-z_][\w.-]{0,63})"
_SEPARATOR: Final = r"(?:\\?[\"'])?\s{0,3}[:=]\s{0,3}"
# An auth scheme is part of the value: "Authorization: Basic dXNlcjpw" loses both words.
_SCHEME: Final = r"(?:(?i:basic|bearer|digest|negotiate|token|apikey)\s+)?"
_PLAIN: Final = r"[^\s\"'\\,;&]+"
# In rendered JSON a raw double quote ends the string, so quoted values are \"...\" or '...'
# without a raw quote inside: a replacement never crosses out of the JSON string it is in.
_VALUE_IN_JSON: Final = (
    r"(?P<value>\\\"(?:[^\"\\]|\\[^\"])*\\\"|'(?:[^'\"\\]|\\.)*'|" + _SCHEME + _PLAIN + ")"
)
_VALUE_IN_TEXT: Final = r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|" + _SCHEME + _PLAIN + ")"
# After a name found through a hint word: the separator and the value.
_AFTER_NAME: Final = {
    True: re.compile(_SEPARATOR + _VALUE_IN_JSON),
    False: re.compile(_SEPARATOR + _VALUE_IN_TEXT),
}
# Every name=value pair, for user key patterns, which need not contain a hint word. The value
# sits in a look-ahead, so the scan resumes after the separator and also finds pairs inside a
# value that is not secret (a URL's query string after ``https:``).
_ANY_PAIR: Final = {
    True: re.compile(_NAME + _SEPARATOR + "(?=" + _VALUE_IN_JSON + ")"),
    False: re.compile(_NAME + _SEPARATOR + "(?=" + _VALUE_IN_TEXT + ")"),
}
_NAME_CHARS: Final = re.compile(r"[\w.-]*")


def compile_key_pattern(extra: Iterable[object] = (), source: str = "scrub_patterns") -> re.Pattern[str]:
    """The default key patterns plus ``extra``, as one case-insensitive pattern.

    ValueError names ``source``, the index and the pattern, and says what is wrong with it.
    """
    wrapped = [f"(?:{p})" for p in DEFAULT_KEY_PATTERNS]
    for index, pattern in enumerate(extra):
        where = f"{source}[{index}]"
        if not isinstance(pattern, str):
            raise ValueError(f"{where} must be a str (a regular expression), got {pattern!r}")
        try:
            compiled = re.compile(f"(?:{pattern})", re.IGNORECASE)
        except re.error as exc:
            if "global flags" in str(exc):
                raise ValueError(
                    f"{where} {pattern!r} uses a global flag such as (?i) inside the pattern; "
                    "names are matched case-insensitively already, and (?i:...) flags a part"
                ) from exc
            raise ValueError(f"{where} {pattern!r} is not a valid regular expression: {exc}") from exc
        if compiled.search(""):
            raise ValueError(
                f"{where} {pattern!r} matches the empty string, so it would scrub every key; "
                "make it require at least one character"
            )
        wrapped.append(f"(?:{pattern})")
    return re.compile("|".join(wrapped), re.IGNORECASE)


DEFAULT_KEY_PATTERN: Final = compile_key_pattern()


def fields_of(value: object) -> dict[str, Any] | None:
    """The fields of a dataclass instance or a pydantic model as a dict (shallow); else None.

    Pydantic is recognised by duck typing (``model_fields`` and ``model_dump`` on the class), so
    it is never imported here. Fields declared with ``repr=False`` are left out, as repr() does.
    """
    cls = type(value)
    if hasattr(cls, "__dataclass_fields__") and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.repr}  # type: ignore[arg-type]
    model_fields = getattr(cls, "model_fields", None)
    if isinstance(model_fields, dict) and callable(getattr(cls, "model_dump", None)):
        fields = {n: getattr(value, n) for n, info in model_fields.items() if getattr(info, "repr", True)}
        extra = getattr(value, "__pydantic_extra__", None)
        if isinstance(extra, dict):
            fields.update((k, v) for k, v in extra.items() if isinstance(k, str))
        return fields
    return None


def scrub_keys(value: object, pattern: re.Pattern[str], found: dict[str, None]) -> object:
    """Copy of ``value`` with the values under secret keys replaced; their paths added to ``found``.

    Dataclasses and pydantic models become dicts of their fields. ``value`` itself is unchanged.
    """
    return _walk(value, pattern, found, "$", 0, set())


def _walk(
    value: object, pattern: re.Pattern[str], found: dict[str, None], where: str, depth: int, path: set[int]
) -> object:
    if isinstance(value, dict | list | tuple):
        items: Any = value
    else:
        try:
            items = fields_of(value)
        except Exception:  # a field that cannot be read: rendered as a placeholder anyway
            return value
        if items is None:
            return value
    if id(value) in path:
        return CIRCULAR
    if depth >= MAX_DEPTH:  # fail closed: deeper levels are not checked, so not shown
        return TOO_DEEP
    path.add(id(value))
    try:
        if isinstance(items, dict):
            out: dict[object, object] = {}
            for k, v in items.items():
                if isinstance(k, str) and pattern.search(k):
                    out[k] = REDACTED
                    found[f"{where}.{k}"] = None
                elif v is None or isinstance(v, str | int | float):  # leaves: no path to build
                    out[k] = v
                else:
                    out[k] = _walk(v, pattern, found, f"{where}.{k}", depth + 1, path)
            return out
        return [
            v
            if v is None or isinstance(v, str | int | float)
            else _walk(v, pattern, found, f"{where}[{i}]", depth + 1, path)
            for i, v in enumerate(items)
        ]
    finally:
        path.discard(id(value))


def _basic_credentials(match: str) -> bool:
    """True if the word after "Basic" is base64 of printable ``user:password`` (not an English word)."""
    try:
        decoded = base64.b64decode(match.split()[-1], validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in decoded and decoded.isascii() and decoded.decode().isprintable()


def _replace_shape(name: str, found: dict[str, None]) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        text = match.group()
        if name == "basic auth" and not _basic_credentials(text):
            return text
        found[name] = None
        if name == "url password":  # keep the user: "postgres://admin:[REDACTED]@db"
            return text[: text.index(":", 3) + 1] + REDACTED
        return REDACTED

    return replace


def scrub_text(
    text: str, key_pattern: re.Pattern[str], keys_always: bool, in_json: bool, lower: str | None = None
) -> tuple[str, list[str]]:
    """``text`` with secret name=value pairs and secret-shaped strings replaced, and what was found.

    ``in_json``: ``text`` is rendered JSON, whose structure replacements must keep valid.
    ``keys_always``: look at every name=value pair, not only names holding a hint word (user key
    patterns need not contain one). ``lower``: ``text.lower()`` if the caller has it already.
    """
    found: dict[str, None] = {}
    if lower is None:
        lower = text.lower()
    if keys_always or len(lower) != len(text):  # lower() changed some lengths: no index mapping
        text = _scrub_every_pair(text, key_pattern, _ANY_PAIR[in_json], found)
    elif KEY_HINT.search(lower):
        text = _scrub_hinted_pairs(text, lower, key_pattern, _AFTER_NAME[in_json], found)
    if found:
        lower = text.lower()
    for name, hint, pattern in _SHAPES:
        if hint in lower:
            text = pattern.sub(_replace_shape(name, found), text)
    return text, list(found)


def _scrub_hinted_pairs(
    text: str, lower: str, key_pattern: re.Pattern[str], after_name: re.Pattern[str], found: dict[str, None]
) -> str:
    """Pairs whose name holds a hint word, found from the hint words instead of trying a pattern
    at every position of the text (the names of the default key patterns all hold one)."""
    parts: list[str] = []
    copied = 0  # text[:copied] is in parts
    seen = 0  # hint words before this index are in a name already looked at, or a replaced value
    for hint in KEY_HINT.finditer(lower):
        if hint.start() < seen:
            continue
        start = hint.start()
        while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_.-"):
            start -= 1
        name_end = _NAME_CHARS.match(text, hint.end())
        seen = hint.end() if name_end is None else name_end.end()
        pair = after_name.match(text, seen)
        if pair is None:
            continue
        name = text[start:seen]
        if not key_pattern.search(name):
            continue
        parts += (text[copied : pair.start("value")], REDACTED)
        copied = seen = pair.end("value")
        found[f'key "{name}" in text'] = None
    if not parts:
        return text
    parts.append(text[copied:])
    return "".join(parts)


def _scrub_every_pair(
    text: str, key_pattern: re.Pattern[str], any_pair: re.Pattern[str], found: dict[str, None]
) -> str:
    """Every name=value pair looked at: for user key patterns, which need not hold a hint word."""
    parts: list[str] = []
    copied = 0
    for match in any_pair.finditer(text):
        start = match.start("value")
        if start < copied:  # inside a value already replaced
            continue
        name = match.group("name")
        if not key_pattern.search(name):
            continue
        parts += (text[copied:start], REDACTED)
        copied = match.end("value")
        found[f'key "{name}" in text'] = None
    if not parts:
        return text
    parts.append(text[copied:])
    return "".join(parts)
