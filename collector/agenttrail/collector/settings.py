"""The settings model: one row per setting (file key, env var, type, default, help), one table
per config file section.

A config file has sections (`collector:`, `drift:`, `judges:`...). Each is a `Section` whose
`Setting` rows say everything about a key: its type (`Kind`: the Python type, how text or YAML
becomes it, what is accepted), its default, its help, its env var and whether it is a secret.
The collector declares its own section (config.py); the evaluators' composition root hands
theirs to the loader (`Wiring.config_sections`), so the collector knows them without importing
the evaluators. A section's own parser (`Section.check`) stays the judge of what the table
cannot say (rules, lists of judges, values that depend on each other).

Precedence for one setting: flag > environment > config file > default (the evaluators'
sections have no flag, and their lists and mappings no env var); each resolved value keeps its
source (`agenttrail config show`). Stdlib only: the CLI imports this at start.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agenttrail.collector.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Kind:
    """A setting's type: what it is in Python, how a YAML value or env text becomes it, and, in
    words, what is accepted (`parse` None: a structured value its section's parser checks)."""

    accepted: str
    python: type
    parse: Callable[[Any], Any] | None = None
    minimum: float | None = None  # numbers: the least accepted value (click shows a range)
    metavar: str | None = None
    path: str | None = None  # "file" or "dir": a path on disk

    @property
    def type_name(self) -> str:
        return self.python.__name__


def _number(value: Any, *, whole: bool) -> float | int:
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number")
    if isinstance(value, str):
        value = value.strip()
    number = float(value)
    if whole:
        if not number.is_integer():
            raise ValueError(f"{value!r} is not a whole number")
        return int(number)
    return number


def _at_least(minimum: float, message: str, *, whole: bool) -> Callable[[Any], Any]:
    def parse(value: Any) -> Any:
        number = _number(value, whole=whole)
        if number < minimum:
            raise ValueError(message)
        return number

    return parse


def _above_zero(value: Any) -> float:
    number = _number(value, whole=False)
    if not number > 0:
        raise ValueError("must be greater than 0")
    return number


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("must be true or false")


def _address(value: Any) -> str:
    text = str(value).strip()
    _, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError("must be host:port, e.g. 127.0.0.1:4317")
    return text


def _optional_text(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None


def choice(*values: str) -> Kind:
    """Text that must be one of `values`."""

    def parse(value: Any) -> str:
        text = str(value).strip()
        if text not in values:
            raise ValueError(f"must be one of {', '.join(values)}")
        return text

    return Kind(f"one of {', '.join(values)}", str, parse, metavar="|".join(values))


def _fraction(value: Any) -> float:
    number = _number(value, whole=False)
    if not 0.0 <= number <= 1.0:
        raise ValueError("must be from 0 to 1")
    return number


POSITIVE_INT = Kind(
    "a positive whole number", int, _at_least(1, "must be a positive whole number", whole=True), 1
)
DAYS = Kind(
    "a whole number of days >= 0 (0: for ever)",
    int,
    _at_least(0, "must be a whole number of days, 0 to keep for ever", whole=True),
    0,
)
COUNT = Kind("a whole number >= 0", int, _at_least(0, "must not be negative", whole=True), 0)
SECONDS = Kind("a number of seconds >= 0", float, _at_least(0, "must not be negative", whole=False), 0)
POSITIVE_SECONDS = Kind("a number of seconds > 0", float, _above_zero, 0)
NUMBER = Kind("a number >= 0", float, _at_least(0, "must not be negative", whole=False), 0)
FRACTION = Kind("a number from 0 to 1", float, _fraction, 0)
BOOL = Kind("true or false", bool, _bool)
ADDRESS = Kind("host:port, e.g. 127.0.0.1:4317", str, _address, metavar="HOST:PORT")
TEXT = Kind("text", str, str)
OPTIONAL_TEXT = Kind("text (empty: none)", str, _optional_text)
FILE = Kind("a file path (empty: none)", str, _optional_text, path="file")
DIRECTORY = Kind("a directory path (empty: none)", str, _optional_text, path="dir")
# Structured values: their section's parser checks them.
NAMES = Kind("a list of names", list)
MAPPING = Kind("a mapping", dict)
LIST = Kind("a list", list)


@dataclass(frozen=True, slots=True)
class Setting:
    """One key of a section: everything about it in one row."""

    name: str
    kind: Kind
    default: Any
    help: str
    secret: bool = False  # `config show` masks it
    env_var: bool = True  # False: file only (lists, mappings, rules: no one-line env form)
    env_prefix: str = "AGENTTRAIL_"  # another section's: AGENTTRAIL_<SECTION>_

    @property
    def env(self) -> str:
        """AGENTTRAIL_<NAME> for the collector's, AGENTTRAIL_<SECTION>_<NAME> for another
        section's (only read for settings with `env_var`)."""
        return self.env_prefix + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True, slots=True)
class Section:
    """A top-level section of the config file and its settings.

    `check(document, source)` is the section's own parser, given the whole file (judges read
    `judge_defaults:` too); it raises ConfigError naming the file, the section and the key.
    `open`: keys beyond the table are allowed and left to `check` (a judge's model options)."""

    name: str
    help: str
    settings: tuple[Setting, ...] = ()
    check: Callable[[Mapping[str, Any], str], object] | None = None
    open: bool = False
    is_list: bool = False  # the section is a list (judges:), not a mapping of settings

    def setting(self, name: str) -> Setting | None:
        return next((s for s in self.settings if s.name == name), None)


@dataclass(frozen=True, slots=True)
class Resolved:
    """One effective setting: its value and where it came from (flag --x, env VAR, file PATH, default)."""

    section: str
    name: str
    value: Any
    source: str
    setting: Setting | None = None  # None: a key of an open section, or a list section's items

    def shown(self) -> Any:
        """The value as `config show` prints it: secrets masked, also inside nested values."""
        if self.setting is not None and self.setting.secret and not _unset(self.value):
            return MASK
        return masked(self.value)


MASK = "****"
# Compiled on first use (`config show`), not at import: the CLI imports this module to start.
_SECRET_KEY = r"(token|secret|password|passwd|api_key|authorization|headers)$"
_USERINFO = r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^/@:]*):(?P<password>[^/@]*)@"


def _unset(value: Any) -> bool:
    """Nothing given: a secret that shows as such, not as a mask that reads as if it were set."""
    return value is None or value == "" or (isinstance(value, Mapping | list | tuple) and not value)


def masked(value: Any, key: str = "") -> Any:
    """`value` with secrets hidden: keys that name a token, password, API key or headers, a
    URL's password, and a webhook URL's path (Slack puts its secret there)."""
    if key and re.search(_SECRET_KEY, key, re.IGNORECASE) and not _unset(value):
        return MASK
    if isinstance(value, Mapping):
        return {str(k): masked(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [masked(item) for item in value]
    if isinstance(value, str):
        value = re.sub(_USERINFO, lambda m: f"{m['scheme']}{m['user']}:{MASK}@", value, flags=re.IGNORECASE)
        if key == "url":
            scheme, sep, rest = value.partition("://")
            host, _, path = rest.partition("/")
            if sep and path:
                return f"{scheme}://{host}/{MASK}"
    return value


def parse_value(setting: Setting, raw: Any, source: str, section: str, file: str | None = None) -> Any:
    """`raw` as the setting's type; a ConfigError naming the key, the section, where it came from
    (and the file) and what is accepted."""
    if setting.kind.parse is None:
        return raw
    try:
        return setting.kind.parse(raw)
    except (TypeError, ValueError) as exc:
        where = source if file is None or str(file) in source else f"{source} (config file {file})"
        accepted = "" if setting.kind.accepted in str(exc) else f"; accepted: {setting.kind.accepted}"
        raise ConfigError(
            f"{where}: {section}.{setting.name}: bad value {raw!r} ({exc}){accepted} - {setting.help}"
        ) from exc


def unknown_keys_error(
    source: str, section: str, unknown: Sequence[str], known: Sequence[str]
) -> ConfigError:
    """The error for keys a section does not have: names them, the section and the file, a close
    known key when there is one, and every known key."""
    return ConfigError(
        f"{source}: unknown setting(s) {sorted(unknown)} in section {section!r}"
        f"{did_you_mean(unknown, known)}; known: {sorted(known)}"
    )


def did_you_mean(unknown: Sequence[str], known: Sequence[str]) -> str:
    """' (did you mean 'drift' for 'dirft'?)' for the unknown names close to a known one, else ''."""
    import difflib  # only on error paths

    hints = [
        f"{close[0]!r} for {key!r}"
        for key in unknown
        if (close := difflib.get_close_matches(key, known, n=1, cutoff=0.6))
    ]
    return f" (did you mean {', '.join(hints)}?)" if hints else ""
