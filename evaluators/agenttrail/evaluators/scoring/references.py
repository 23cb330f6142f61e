"""Reference sets: what each task's agent run should have done, read from JSON, JSONL or YAML.

A reference set maps a task key (the ``agenttrail.task`` of a run) to an entry::

    refund:                                   # YAML; JSON is the same shape
      reference_trajectory:                   # or expected_tools / expected_agent_trajectory,
        - {tool_name: lookup_order, tool_input: {id: "42"}}   # in any trajectory format
        - {name: refund, args: {id: "42"}}
      expected_response: "Refunded order 42."
      metrics: [trajectory_exact_match, "tool_correctness:threshold=0.8"]
      arguments: subset                       # shorthand for options.arguments
      options: {tool_arguments.refund: ignore, threshold: 0.7}
    greet: [{tool_name: say_hello}]           # shorthand: just the reference trajectory

Shapes: an object of task -> entry (or -> trajectory), a list of entries each with a ``task``, or
JSONL with one entry per line. Only the trajectory is required: exactly one of the three
trajectory fields (unlike a dataset row, where the first present wins, a reference that gives two
is ambiguous about what it versions).

- ``metrics``: metric specs (``parse_metric`` syntax) to compute for the task instead of the
  evaluator's defaults.
- ``options``: metric parameters applied to every metric of the task that takes them, unless the
  metric's own spec sets them (``configured_metrics`` does the merge). Values may be strings,
  numbers, booleans, or lists (a list of keys for ``arguments`` means ``keys:K1|K2``; for
  ``evaluation_params`` the list of parameters). Every key and value is validated on load.
- Unknown fields are errors, so a misspelt ``metric:`` is caught instead of silently ignored;
  only ``version``, ``content_hash`` and ``source`` (what ``agenttrail references list --format
  json`` adds) are skipped, so a listing loads back as it is.

Every problem in the file is collected and raised together in one ``ReferenceSetError``, each
naming the row (0-based position in a list or JSONL file, with the 1-based line for JSONL), the
task where known, and the field. ``content_hash`` is the sha256 of the canonical JSON of the
normalised entries sorted by task: the same references hash the same whatever the file format,
key order, entry order or trajectory format, so it can version what is stored.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeAlias

import yaml

from agenttrail.collector.errors import AgentTrailError
from agenttrail.evaluators.metrics import (
    ABSENT,
    METRICS,
    ConfiguredMetric,
    ToolCall,
    TrajectoryFormatError,
    canonical_json,
    parse_metric,
    parse_trajectory,
)

# The names a reference trajectory goes by, in a reference entry and in a dataset row
# (offline/datasets.py reads the same aliases).
REFERENCE_FIELDS: Final = ("reference_trajectory", "expected_tools", "expected_agent_trajectory")
ENTRY_FIELDS: Final = ("task", *REFERENCE_FIELDS, "expected_response", "metrics", "arguments", "options")
# What `agenttrail references list --format json` adds to each entry; ignored on load, so that a
# listing loads back as it is.
LISTING_FIELDS: Final = ("version", "content_hash", "source")
_KEYS_PARAMS: Final = frozenset(("arguments", "tool_arguments"))

_Report: TypeAlias = Callable[[str | None, str], None]
"""``problem(field, message)``: record a problem of the entry being parsed."""


@dataclass(frozen=True, slots=True)
class ReferenceProblem:
    """One problem in a reference file: where (row, line, task, field; None where unknown) and why."""

    row: int | None
    line: int | None
    task: str | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = []
        if self.row is not None:
            where.append(f"row {self.row}" + (f" (line {self.line})" if self.line is not None else ""))
        elif self.line is not None:
            where.append(f"line {self.line}")
        if self.task is not None:
            where.append(f"task {self.task!r}")
        if self.field is not None:
            where.append(f"field {self.field}")
        return f"{', '.join(where)}: {self.message}" if where else self.message


class ReferenceSetError(AgentTrailError, ValueError):
    """A reference file that cannot be loaded; ``problems`` lists every problem found."""

    def __init__(self, source: str, problems: Sequence[ReferenceProblem]) -> None:
        self.source = source
        self.problems = tuple(problems)
        if len(self.problems) == 1:
            message = f"{source}: {self.problems[0]}"
        else:
            lines = "\n".join(f"  {problem}" for problem in self.problems)
            message = f"{source}: {len(self.problems)} problems:\n{lines}"
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class ReferenceEntry:
    """A task's reference: trajectory, optional expected response, metric specs and options.

    ``options`` holds metric parameters in spec syntax (``{"arguments": "subset"}``).
    """

    task: str
    reference: tuple[ToolCall, ...]
    expected_response: Any = None
    metrics: tuple[str, ...] = ()
    options: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON object ``from_json`` reads back into an equal entry (trajectory in DeepEval format)."""
        return {
            "task": self.task,
            "reference_trajectory": [_call_to_json(call) for call in self.reference],
            "expected_response": self.expected_response,
            "metrics": list(self.metrics),
            "options": dict(self.options),
        }

    @classmethod
    def from_json(cls, data: object) -> ReferenceEntry:
        """Read one entry (any accepted form, with its ``task``); ReferenceSetError if it is invalid."""
        problems: list[ReferenceProblem] = []
        entry = _parse_entry(data, None, None, None, problems)
        if entry is None:
            raise ReferenceSetError("reference entry", problems)
        return entry

    def configured_metrics(self, defaults: Iterable[str] = ()) -> list[ConfiguredMetric]:
        """The task's metrics (or ``defaults`` when it names none) with the task's options merged in."""
        configured = []
        for text in self.metrics or tuple(defaults):
            spec = parse_metric(text).spec  # a bad default raises here, naming what is valid
            name, _, own = text.partition(":")
            given = {item.partition("=")[0].strip() for item in own.split(",") if item.strip()}
            added = [
                f"{key}={value}"
                for key, value in self.options.items()
                if key not in given and _takes(spec.name, key)
            ]
            params = ",".join(part for part in (own.strip(), *added) if part)
            configured.append(parse_metric(f"{name}:{params}" if params else name))
        return configured

    def configured_for(self, text: str, overrides: Mapping[str, str] | None = None) -> ConfiguredMetric:
        """Metric spec ``text`` with this task's settings: its own parameters win, then
        ``overrides`` (a dataset row's options), then the task's own spec of that metric, then the
        task's options (``configured_metrics``' order, for a metric the caller chose)."""
        name, _, own = text.partition(":")
        name = name.strip()
        specs = (spec.partition(":") for spec in self.metrics)
        stored = next((params for spec_name, _, params in specs if spec_name.strip() == name), "")
        params: dict[str, str] = {}
        for source in (_pairs(own), overrides or {}, _pairs(stored), self.options):
            for key, value in source.items():
                if key not in params and _takes(name, key):
                    params[key] = value
        joined = ",".join(f"{key}={value}" for key, value in params.items())
        return parse_metric(f"{name}:{joined}" if joined else name)


def _pairs(params: str) -> dict[str, str]:
    """``KEY=VALUE,...`` of a metric spec as a mapping (the spec was validated when parsed)."""
    pairs = (item.partition("=") for item in params.split(",") if item.strip())
    return {key.strip(): value.strip() for key, _, value in pairs}


def parse_options(value: object) -> dict[str, str]:
    """Metric options as a reference entry's ``options`` holds them (spec syntax); ValueError
    naming the first bad one."""
    problems: list[str] = []
    options = _options({"options": value}, lambda where, message: problems.append(f"{where}: {message}"))
    if problems:
        raise ValueError(problems[0])
    return options


@dataclass(frozen=True, slots=True)
class ReferenceSet:
    """Entries by task and the content hash that versions them."""

    entries: Mapping[str, ReferenceEntry]
    content_hash: str

    @classmethod
    def from_entries(cls, entries: Iterable[ReferenceEntry]) -> ReferenceSet:
        """A set of distinct tasks; ValueError naming a task given twice."""
        by_task: dict[str, ReferenceEntry] = {}
        for entry in entries:
            if entry.task in by_task:
                raise ValueError(f"task {entry.task!r} given twice")
            by_task[entry.task] = entry
        return cls(by_task, content_hash(by_task.values()))

    def to_json(self) -> list[dict[str, Any]]:
        """The entries sorted by task: what ``content_hash`` hashes."""
        return [self.entries[task].to_json() for task in sorted(self.entries)]


def content_hash(entries: Iterable[ReferenceEntry]) -> str:
    """sha256 hex of the canonical JSON of the entries sorted by task (1 and 1.0 hash the same)."""
    document = sorted((entry.to_json() for entry in entries), key=lambda item: str(item["task"]))
    return hashlib.sha256(canonical_json(document).encode("utf-8")).hexdigest()


def load_reference_set(path: str | Path) -> ReferenceSet:
    """Read and validate a ``.json``, ``.jsonl`` or ``.yaml``/``.yml`` reference file."""
    path = Path(path)
    source = str(path)
    suffix = path.suffix.lower()
    if suffix not in (".json", ".jsonl", ".ndjson", ".yaml", ".yml"):
        raise _file_error(source, f"unsupported file type {path.suffix!r}: expected .json, .jsonl or .yaml")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise _file_error(source, "no such file") from None
    except OSError as exc:
        raise _file_error(source, f"cannot read the file ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise _file_error(source, f"not UTF-8 text (bad byte at offset {exc.start})") from exc
    if suffix in (".jsonl", ".ndjson"):
        return _parse_jsonl(text, source)
    if suffix == ".json":
        try:
            document = json.loads(text, object_pairs_hook=_unique_keys)
        except ValueError as exc:
            raise _file_error(source, f"not valid JSON ({exc})") from exc
    else:
        try:
            document = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader
        except yaml.YAMLError as exc:
            raise _file_error(source, f"not valid YAML ({exc})") from exc
    return parse_reference_set(document, source=source)


def parse_reference_set(document: object, *, source: str = "reference set") -> ReferenceSet:
    """Validate an already-parsed document: an object of task -> entry, or a list of entries."""
    records: list[tuple[int | None, int | None, object, object]]
    if isinstance(document, Mapping):
        records = [(None, None, key, value) for key, value in document.items()]
    elif isinstance(document, list):
        records = [(row, None, None, value) for row, value in enumerate(document)]
    else:
        kind = "nothing" if document is None else type(document).__name__
        raise _file_error(source, f"expected an object of task -> entry or a list of entries, got {kind}")
    return _build(records, source)


def _parse_jsonl(text: str, source: str) -> ReferenceSet:
    records: list[tuple[int | None, int | None, object, object]] = []
    problems: list[ReferenceProblem] = []
    lines = [(number, raw) for number, raw in enumerate(text.split("\n"), start=1) if raw.strip()]
    for row, (number, raw) in enumerate(lines):
        try:
            records.append((row, number, None, json.loads(raw)))
        except ValueError as exc:
            problems.append(ReferenceProblem(row, number, None, None, f"not valid JSON ({exc})"))
    return _build(records, source, problems)


def _build(
    records: Sequence[tuple[int | None, int | None, object, object]],
    source: str,
    problems: list[ReferenceProblem] | None = None,
) -> ReferenceSet:
    problems = [] if problems is None else problems
    entries: dict[str, ReferenceEntry] = {}
    first_seen: dict[str, int | None] = {}  # only list rows can repeat a task: keys are unique
    for row, line, key, value in records:
        if key is not None and not isinstance(key, str):  # YAML keys can be numbers or booleans
            problems.append(ReferenceProblem(row, line, str(key), None, "task keys must be strings"))
            continue
        entry = _parse_entry(value, row, line, key, problems)
        if entry is None:
            continue
        if entry.task in entries:
            message = f"task already defined at row {first_seen[entry.task]}"
            problems.append(ReferenceProblem(row, line, entry.task, "task", message))
            continue
        entries[entry.task] = entry
        first_seen[entry.task] = row
    if not entries and not problems:
        problems.append(ReferenceProblem(None, None, None, None, "no entries"))
    if problems:
        raise ReferenceSetError(source, sorted(problems, key=_problem_order))
    return ReferenceSet(entries, content_hash(entries.values()))


def _problem_order(problem: ReferenceProblem) -> tuple[int, int]:
    return (problem.row if problem.row is not None else -1, problem.line or 0)


def _parse_entry(
    value: object, row: int | None, line: int | None, key: str | None, problems: list[ReferenceProblem]
) -> ReferenceEntry | None:
    """One entry, or None after adding its problems (all of them, not just the first)."""
    if key is not None and isinstance(value, list):
        value = {"reference_trajectory": value}
    raw_task = value.get("task") if isinstance(value, Mapping) else None
    task = key if key is not None else raw_task if isinstance(raw_task, str) else None
    before = len(problems)

    def problem(field_name: str | None, message: str) -> None:
        problems.append(ReferenceProblem(row, line, task, field_name, message))

    if not isinstance(value, Mapping):
        shape = "an entry object or a trajectory list" if key is not None else "an entry object"
        kind = "null" if value is None else type(value).__name__
        problem(None, f"expected {shape}, got {kind}")
        return None
    for name in value:
        if name not in ENTRY_FIELDS and name not in LISTING_FIELDS:
            problem(str(name), f"unknown field; valid fields: {', '.join(ENTRY_FIELDS)}")
    if key is None and (not isinstance(raw_task, str) or not raw_task.strip()):
        problem("task", f"expected a non-empty task name, got {raw_task!r}")
    elif key is not None and raw_task is not None and raw_task != key:
        problem("task", f"{raw_task!r} differs from the key {key!r} it is listed under")
    elif key is not None and not key.strip():
        problem("task", "the task key is empty")
    reference = _reference(value, problem)
    expected = value.get("expected_response")
    if expected is not None and not _is_json(expected):
        problem("expected_response", f"expected a JSON value, got {type(expected).__name__}")
    metrics = _metrics(value.get("metrics"), problem)
    options = _options(value, problem)
    if len(problems) > before or task is None or reference is None:
        return None
    return ReferenceEntry(task, tuple(reference), expected, metrics, options)


def _reference(value: Mapping[str, Any], problem: _Report) -> list[ToolCall] | None:
    given = [name for name in REFERENCE_FIELDS if value.get(name) is not None]
    if not given:
        problem("reference_trajectory", f"missing: give one of {', '.join(REFERENCE_FIELDS)}")
        return None
    if len(given) > 1:
        problem(given[1], f"give one reference trajectory, not both {given[0]} and {given[1]}")
        return None
    try:
        return parse_trajectory(value[given[0]])
    except TrajectoryFormatError as exc:
        problem(given[0], str(exc))
        return None


def _metrics(value: object, problem: _Report) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        problem("metrics", f"expected a list of metric specs, got {type(value).__name__}")
        return ()
    texts: list[str] = []
    names: dict[str, int] = {}
    for i, text in enumerate(value):
        if not isinstance(text, str):
            problem(f"metrics[{i}]", f"expected a metric spec string, got {type(text).__name__}")
            continue
        try:
            name = parse_metric(text).spec.name
        except ValueError as exc:
            problem(f"metrics[{i}]", str(exc))
            continue
        if name in names:
            problem(f"metrics[{i}]", f"metric {name!r} already given at metrics[{names[name]}]")
            continue
        names[name] = i
        texts.append(text.strip())
    return tuple(texts)


def _options(value: Mapping[str, Any], problem: _Report) -> dict[str, str]:
    raw: dict[str, tuple[str, object]] = {}
    options = value.get("options")
    if options is not None and not isinstance(options, Mapping):
        problem("options", f"expected an object of metric parameters, got {type(options).__name__}")
    elif options is not None:
        raw.update({str(key): (f"options.{key}", item) for key, item in options.items()})
    if value.get("arguments") is not None:
        if "arguments" in raw:
            problem("arguments", "given both as arguments and as options.arguments")
        raw["arguments"] = ("arguments", value["arguments"])
    result: dict[str, str] = {}
    for key, (where, item) in raw.items():
        try:
            result[key] = _option_text(key, item)
        except ValueError as exc:
            problem(where, str(exc))
    return result


def _option_text(key: str, value: object) -> str:
    """The option in spec syntax, validated by parsing it for a metric that takes it."""
    base = key.partition(".")[0]
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int | float):
        text = repr(value)
    elif isinstance(value, str):
        text = value.strip()
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        text = ("keys:" if base in _KEYS_PARAMS else "") + "|".join(value)
    else:
        raise ValueError(f"expected a string, number, boolean or list of strings, got {type(value).__name__}")
    if "," in text:
        raise ValueError(f"values cannot contain ',', got {text!r}")
    metric = next((name for name in METRICS if _takes(name, key)), None)
    if metric is None:
        valid = sorted({param.usage for spec in METRICS.values() for param in spec.params})
        raise ValueError(f"no metric takes this parameter; valid parameters: {', '.join(valid)}")
    try:
        parse_metric(f"{metric}:{key}={text}")
    except ValueError as exc:
        raise ValueError(str(exc).removeprefix(f"{metric}: ").removeprefix(f"{key}: ")) from None
    return text


def _takes(metric: str, key: str) -> bool:
    """Whether the metric has parameter ``key`` (``NAME`` or ``NAME.KEY`` for per-key parameters)."""
    base, dot, sub_key = key.partition(".")
    return any(
        param.name == base and (param.keyed_by is not None) == bool(dot) and (not dot or bool(sub_key))
        for param in METRICS[metric].params
    )


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """JSON objects with a repeated key are rejected: json would silently keep the last task."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"key {key!r} appears twice in one object")
        result[key] = value
    return result


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects a repeated mapping key, which PyYAML would silently overwrite."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str):
                continue
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice in one mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _call_to_json(call: ToolCall) -> dict[str, Any]:
    item: dict[str, Any] = {"name": call.name}
    if call.input is not ABSENT:
        item["args"] = call.input
    if call.output is not ABSENT:
        item["output"] = call.output
    return item


def _is_json(value: object) -> bool:
    try:
        canonical_json(value)
    except (TypeError, ValueError):
        return False
    return True


def _file_error(source: str, message: str) -> ReferenceSetError:
    return ReferenceSetError(source, [ReferenceProblem(None, None, None, None, message)])
