"""Offline evaluation datasets: rows of JSONL, JSON or CSV files in the Vertex or GLLM/DeepEval format.

Both formats are read into one ``DatasetRow``; a row may mix them. Fields, the first present wins:

==================  =================================================================
predicted           ``predicted_trajectory`` (Vertex), ``tools_called``, ``agent_trajectory``
reference           ``reference_trajectory`` (Vertex), ``expected_tools``, ``expected_agent_trajectory``
latency_s           ``latency_in_seconds`` (number, or text holding one)
failure             ``failure``: 0, 1, true or false
query               ``query`` (GLLM), ``prompt`` (Vertex), ``input`` (DeepEval); a string
response            ``generated_response``, ``response``, ``actual_output``
expected_response   ``expected_response``, ``expected_output``, ``reference``
options             ``options``: metric parameters as a reference entry's (``{"arguments": "subset"}``)
==================  =================================================================

Every trajectory field is read with ``parse_trajectory`` (Vertex, DeepEval/GLLM or OpenAI
messages, or a JSON string of one). ``tools_called`` wins over ``agent_trajectory`` because it is
the explicit list DeepEval and GLLM score tool correctness from; the message list is the
conversation their trajectory judge reads, and stays available in ``extra``. Fields no rule used
(unknown ones, and the alternatives that lost) are kept in ``extra``.

Files:

- ``.jsonl`` / ``.ndjson``: one JSON object per line; blank lines are skipped.
- ``.json``: a list of rows; an object holding that list under ``rows``, ``data``, ``instances``,
  ``examples`` or ``records``; or columns (``{"field": [v0, v1, ...]}``, or pandas' default
  ``{"field": {"0": v0, ...}}``).
- ``.csv``: a header row, then one row per line; an empty cell is absent; a cell holding a JSON
  object or list is parsed (trajectories may also be JSON text, like in any format), while the
  query and response columns stay text.

A row may also be a run as agenttrail prints it (``agenttrail trajectories --format json``: it has
``trace_id`` and ``tool_calls``): ``DatasetRow.run`` is that run (``AgentRun.from_json``), its tool
calls read as the online scorer reads the stored ones (``predicted_calls``: arguments not captured
stay NOT_CAPTURED, a failed call or a null result has no output) are the predicted trajectory,
``latency_s`` and ``failure`` are read as such, ``input`` is the query (JSON text unless a string)
and ``output`` the response; ``trace_id``, ``agent``, ``task`` stay in ``extra``. So a run scores
the same online and from a file of it. Such a row has no reference unless the file adds
``reference_trajectory``.

A ``.json`` file whose text is JSON Lines (what ``--format json > runs.json`` writes) is read as
JSONL.

JSON null means absent in every format. Rows are numbered from 0 in file order, not counting
blank lines: ``DatasetRow.index`` and ``RowError.index`` are that number, the ``index`` of the
JSON report. Messages say ``row N`` with that same number and add the 1-based line for JSONL and
CSV files (``row 2 (line 4), field failure: ...``), since editors show lines. A bad row becomes a
``RowError`` naming its first bad field and the other rows are still read; a file that cannot be
read or parsed at all raises ``DatasetError``.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.runs import AgentRun, predicted_calls
from agenttrail.evaluators.metrics import ToolCall, TrajectoryFormatError, parse_trajectory
from agenttrail.evaluators.scoring.references import REFERENCE_FIELDS, ReferenceEntry, parse_options

PREDICTED_FIELDS: Final = ("predicted_trajectory", "tools_called", "agent_trajectory")
QUERY_FIELDS: Final = ("query", "prompt", "input")
RESPONSE_FIELDS: Final = ("generated_response", "response", "actual_output")
EXPECTED_RESPONSE_FIELDS: Final = ("expected_response", "expected_output", "reference")
LATENCY_FIELD: Final = "latency_in_seconds"
FAILURE_FIELD: Final = "failure"
OPTIONS_FIELD: Final = "options"

_LIST_KEYS: Final = ("rows", "data", "instances", "examples", "records")
# CSV columns that are text even when they look like JSON.
_TEXT_FIELDS: Final = frozenset((*QUERY_FIELDS, *RESPONSE_FIELDS, *EXPECTED_RESPONSE_FIELDS))
_FAILURE_TEXT: Final = {"0": False, "1": True, "false": False, "true": True}


class DatasetError(AgentTrailError, ValueError):
    """A dataset file that cannot be read or parsed at all; the message starts with its path."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class RowError:
    """A row that could not be read: its index, the field at fault (None: the whole row), why."""

    index: int
    field: str | None
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"row {self.index}" + (f" (line {self.line})" if self.line is not None else "")
        return f"{where}{f', field {self.field}' if self.field else ''}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        """The error as the JSON report carries it (the index is the instance's own)."""
        return {"field": self.field, "message": self.message, "line": self.line}


@dataclass(frozen=True, slots=True)
class DatasetRow:
    """One row in either format, normalised; None (or ``{}`` for ``extra``) where it had nothing."""

    index: int
    predicted: list[ToolCall] | None
    reference: list[ToolCall] | None
    latency_s: float | None = None
    failure: bool | None = None
    query: str | None = None
    response: Any = None
    expected_response: Any = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    line: int | None = None
    run: AgentRun | None = None  # the run scored: the row's own (``--format json``), or runnable mode's
    options: Mapping[str, str] = field(default_factory=dict)  # the row's own metric parameters
    task_settings: ReferenceEntry | None = None  # its task's stored reference (``--stored-references``)


class _FieldError(AgentTrailError):
    """Raised inside parse_row; becomes the row's RowError."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.message = message


@dataclass(frozen=True, slots=True)
class _BadRecord:
    """A record the file reader could not turn into fields (bad JSON line, too many CSV cells)."""

    message: str


def load_dataset(path: str | Path) -> list[DatasetRow | RowError]:
    """Every row of a ``.jsonl``, ``.json`` or ``.csv`` file, in file order; bad rows as RowError."""
    path = Path(path)
    readers: dict[str, Callable[[str, Path], list[tuple[int | None, object]]]] = {
        ".jsonl": _read_jsonl,
        ".ndjson": _read_jsonl,
        ".json": _read_json,
        ".csv": _read_csv,
    }
    reader = readers.get(path.suffix.lower())
    if reader is None:
        raise DatasetError(path, f"unsupported file type {path.suffix!r}: expected .jsonl, .json or .csv")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise DatasetError(path, "no such file") from None
    except OSError as exc:
        raise DatasetError(path, f"cannot read the file ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise DatasetError(path, f"not UTF-8 text (bad byte at offset {exc.start})") from exc
    return [parse_row(index, record, line=line) for index, (line, record) in enumerate(reader(text, path))]


def parse_row(index: int, record: object, *, line: int | None = None) -> DatasetRow | RowError:
    """One row (a mapping of field -> JSON value) in either format; RowError names the first bad field."""
    if isinstance(record, _BadRecord):
        return RowError(index, None, record.message, line)
    if not isinstance(record, Mapping):
        return RowError(index, None, f"expected an object of fields, got {_kind(record)}", line)
    run_document = record if is_agenttrail_run(record) else None
    if run_document is not None:
        record = run_fields(run_document)
    used: set[str] = {key for key, value in record.items() if value is None}
    try:
        predicted = _trajectory(record, PREDICTED_FIELDS, used)
        reference = _trajectory(record, REFERENCE_FIELDS, used)
        latency_s = _optional(record, LATENCY_FIELD, _latency, used)
        failure = _optional(record, FAILURE_FIELD, _failure, used)
        query_field = _first(record, QUERY_FIELDS, used)
        query = None if query_field is None else _string(query_field, record[query_field])
        response_field = _first(record, RESPONSE_FIELDS, used)
        expected_field = _first(record, EXPECTED_RESPONSE_FIELDS, used)
        options = _optional(record, OPTIONS_FIELD, _metric_options, used) or {}
    except _FieldError as exc:
        return RowError(index, exc.name, exc.message, line)
    run: AgentRun | None = None
    if run_document is not None:
        try:
            run = AgentRun.from_json(run_document)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            shape = "not a run as `agenttrail trajectories --format json` prints it"
            reason = f"{shape} ({type(exc).__name__}: {exc})"
            return RowError(index, None, reason, line)
    return DatasetRow(
        index=index,
        predicted=predicted,
        reference=reference,
        latency_s=latency_s,
        failure=failure,
        query=query,
        response=None if response_field is None else record[response_field],
        expected_response=None if expected_field is None else record[expected_field],
        extra={key: value for key, value in record.items() if key not in used},
        line=line,
        run=run,
        options=options,
    )


def is_agenttrail_run(record: Mapping[str, Any]) -> bool:
    """A run as `agenttrail trajectories --format json` prints it."""
    return "trace_id" in record and isinstance(record.get("tool_calls"), list)


def run_calls(calls: Sequence[object]) -> list[object]:
    """agenttrail's stored tool calls (name, input, output, input_captured, status, ...) as the
    online scorer compares them (``predicted_calls``); anything else (a DeepEval call with
    ``args``, a bad item) is passed on for ``parse_trajectory`` to read or report."""
    return [
        predicted_calls([call])[0]
        if isinstance(call, Mapping)
        and isinstance(call.get("name"), str)
        and call["name"]
        and "args" not in call
        else call
        for call in calls
    ]


def run_fields(record: Mapping[str, Any]) -> dict[str, Any]:
    """An agenttrail run's fields under the dataset names (see the module docstring)."""
    fields = dict(record)
    fields.setdefault("predicted_trajectory", run_calls(fields.pop("tool_calls")))
    if "latency_s" in fields:
        fields.setdefault(LATENCY_FIELD, fields.pop("latency_s"))
    query = fields.pop("input", None)
    if query is not None:
        fields.setdefault("query", query if isinstance(query, str) else json.dumps(query, ensure_ascii=False))
    if "output" in fields:
        fields.setdefault("response", fields.pop("output"))
    return fields


def _first(record: Mapping[str, Any], names: Sequence[str], used: set[str]) -> str | None:
    """The first of ``names`` the record has a value for, marked used."""
    for name in names:
        if record.get(name) is not None:
            used.add(name)
            return name
    return None


def _trajectory(record: Mapping[str, Any], names: Sequence[str], used: set[str]) -> list[ToolCall] | None:
    name = _first(record, names, used)
    if name is None:
        return None
    try:
        return parse_trajectory(record[name])
    except TrajectoryFormatError as exc:
        raise _FieldError(name, str(exc)) from exc


def _optional(
    record: Mapping[str, Any], name: str, parse: Callable[[str, object], Any], used: set[str]
) -> Any:
    if record.get(name) is None:
        return None
    used.add(name)
    return parse(name, record[name])


def _latency(name: str, value: object) -> float:
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None or not math.isfinite(number) or number < 0:
        raise _FieldError(name, f"expected a non-negative number of seconds, got {value!r}")
    return number


def _failure(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _FAILURE_TEXT:
        return _FAILURE_TEXT[value.strip().lower()]
    raise _FieldError(name, f"expected 0, 1, true or false, got {value!r}")


def _metric_options(name: str, value: object) -> dict[str, str]:
    try:
        return parse_options(value)
    except ValueError as exc:
        raise _FieldError(name, str(exc).removeprefix("options").lstrip(".: ")) from None


def _string(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise _FieldError(name, f"expected a string, got {_kind(value)}")
    return value


def _read_jsonl(text: str, path: Path) -> list[tuple[int | None, object]]:
    # Split on "\n" only: str.splitlines() would also break at U+2028 inside JSON strings.
    records: list[tuple[int | None, object]] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            records.append((number, json.loads(raw)))
        except ValueError as exc:
            records.append((number, _BadRecord(f"not valid JSON ({exc})")))
    return records


def _read_json(text: str, path: Path) -> list[tuple[int | None, object]]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" and text.lstrip().startswith("{"):
            return _read_jsonl(text, path)  # JSON Lines in a .json file: one object per line
        raise DatasetError(path, f"not valid JSON ({exc})") from exc
    except ValueError as exc:
        raise DatasetError(path, f"not valid JSON ({exc})") from exc
    return [(None, record) for record in _json_rows(document, path)]


def _json_rows(document: object, path: Path) -> list[object]:
    if isinstance(document, list):
        return document
    if isinstance(document, dict) and is_agenttrail_run(document):
        return [document]  # one run, as `trajectories --format json` prints it
    if not isinstance(document, dict) or not document:
        raise DatasetError(path, f"expected a list of rows or an object holding one, got {_kind(document)}")
    for key in _LIST_KEYS:
        if key in document:
            if not isinstance(document[key], list):
                raise DatasetError(path, f"'{key}' must be a list of rows, got {_kind(document[key])}")
            return list(document[key])
    columns = list(document.values())
    if all(isinstance(column, list) for column in columns):
        lengths = {len(column) for column in columns}
        if len(lengths) > 1:
            raise DatasetError(path, f"columns have different lengths {sorted(lengths)}")
        return [dict(zip(document, cells, strict=True)) for cells in zip(*columns, strict=True)]
    if all(isinstance(column, dict) for column in columns):  # pandas DataFrame.to_json() default
        keys = list(columns[0])
        if any(list(column) != keys for column in columns):
            raise DatasetError(path, "columns (pandas 'columns' orientation) have different row keys")
        return [{name: column[key] for name, column in document.items()} for key in keys]
    raise DatasetError(
        path,
        "expected a list of rows, an object with a list under "
        f"{', '.join(repr(key) for key in _LIST_KEYS)}, or an object of equal-length columns; "
        f"got an object with keys {sorted(document)[:10]}",
    )


def _read_csv(text: str, path: Path) -> list[tuple[int | None, object]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [name.strip() for name in next(reader, [])]
        if not any(header):
            raise DatasetError(path, "no header row: the first line must name the columns")
        repeated = sorted({name for name in header if header.count(name) > 1})
        if repeated:
            raise DatasetError(path, f"column {repeated[0]!r} appears more than once in the header")
        records: list[tuple[int | None, object]] = []
        while True:
            start = reader.line_num + 1
            cells = next(reader, None)
            if cells is None:
                return records
            if not any(cell.strip() for cell in cells):
                continue
            record: object
            if len(cells) > len(header):
                record = _BadRecord(f"has {len(cells)} cells but the header names {len(header)} columns")
            else:
                record = {
                    name: _cell(name, cell)
                    for name, cell in zip(header, cells, strict=False)
                    if cell.strip() and name
                }
            records.append((start, record))
    except csv.Error as exc:
        raise DatasetError(path, f"not valid CSV at line {reader.line_num} ({exc})") from exc


def _cell(name: str, cell: str) -> object:
    """A CSV cell: JSON objects and lists are parsed, except in the free-text columns."""
    stripped = cell.strip()
    if name not in _TEXT_FIELDS and stripped[:1] in ("{", "["):
        try:
            return json.loads(stripped)
        except ValueError:
            return cell  # a trajectory column then reports the JSON error with its field
    return cell


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__
