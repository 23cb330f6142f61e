"""Named row types: each type's fields are its table's columns, and any row inserted through
`Store.insert` reads back column by column as it was written."""

from __future__ import annotations

import itertools
import re
import time
import uuid
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agenttrail.collector.rows import ArrivalRow, AssemblyStateRow, MigrationRow, TrajectoryRow
from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.judges.criteria.sets import CriteriaSetRow
from agenttrail.evaluators.monitoring.alerts.schema import AlertHistoryRow, AlertStateRow
from agenttrail.evaluators.monitoring.drift_events import DriftEventRow
from agenttrail.evaluators.monitoring.hourly import RollupHourRow
from agenttrail.evaluators.scoring.run_queue import DecisionRow
from agenttrail.evaluators.scoring.schema import HeartbeatRow, ReferenceRow, ScoredRunRow, ScoreRow

# Every table written from Python with Store.insert, its row type, and a column that tells one
# test row from the others (given a fresh value per example). `otel_traces` is not here: the
# decoder's positional rows and ClickHouse's INSERT ... SELECT fill it (test_otlp_sql).
ROW_TYPES: dict[str, tuple[type[Any], str]] = {
    "trajectories": (TrajectoryRow, "TraceId"),
    "trace_arrivals": (ArrivalRow, "TraceId"),
    "assembled_traces": (AssemblyStateRow, "TraceId"),
    "schema_migrations": (MigrationRow, "Version"),
    "scores": (ScoreRow, "TraceId"),
    "evaluation_decisions": (DecisionRow, "TraceId"),
    "evaluator_heartbeats": (HeartbeatRow, "WorkerId"),
    "references": (ReferenceRow, "Task"),
    "criteria_sets": (CriteriaSetRow, "Name"),
    "drift_events": (DriftEventRow, "Agent"),
    "alert_state": (AlertStateRow, "Fingerprint"),
    "alert_history": (AlertHistoryRow, "Fingerprint"),
    "rollup_hours": (RollupHourRow, "Generation"),
}

TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
# UInt8 columns are flags (IsDeleted must be 0 or 1).
_INTEGERS = {"UInt8": 1, "UInt16": 2**16 - 1, "UInt32": 2**32 - 1, "UInt64": 2**63}
_FLOATS = st.floats(allow_nan=False, allow_infinity=False)
_DATETIME64 = re.compile(r"DateTime64\((\d)\)")


def fraction_text(units: int, digits: int) -> str:
    """`seconds.fraction` text of a count of 10**-digits seconds (how builders write DateTime64)."""
    return f"{units // 10**digits}.{units % 10**digits:0{digits}d}"


def column_values(column_type: str) -> st.SearchStrategy[Any]:
    """Values a row may carry for a column of this ClickHouse type (as the builders write them)."""
    bare = column_type.replace("LowCardinality(Nullable(String))", "Nullable(String)")
    bare = bare.replace("LowCardinality(String)", "String")
    if bare.startswith("Nullable("):
        return st.none() | column_values(bare.removeprefix("Nullable(").removesuffix(")"))
    if bare == "String":
        return TEXT
    if bare in _INTEGERS:
        return st.integers(0, _INTEGERS[bare])
    if bare == "Float64":
        return _FLOATS
    precision = _DATETIME64.fullmatch(bare)
    if precision:
        digits = int(precision.group(1))
        # From now to 2096: a row already past a table's TTL (arrivals, alert history) is dropped.
        units = st.integers(int(time.time()) * 10**digits, 4 * 10**9 * 10**digits)
        return units.map(lambda n: fraction_text(n, digits))
    if bare == "DateTime('UTC')":  # Unix seconds, from now (a row past its TTL is dropped)
        return st.integers(int(time.time()), 2**32 - 1)
    if bare == "Array(String)":
        return st.lists(TEXT, max_size=3)
    if bare == "Array(Tuple(String, String))":
        return st.lists(st.tuples(TEXT, TEXT), max_size=3)
    if bare == "Map(String, String)":
        return st.dictionaries(TEXT, TEXT, max_size=3)
    raise AssertionError(f"no values for column type {column_type}: add them here")


def read_back(column_type: str, name: str) -> str:
    """The SELECT expression for a column: a DateTime64 as its microseconds, to compare exactly
    (a DateTime as its seconds)."""
    if column_type.startswith("DateTime("):
        return f"toUnixTimestamp({name})"
    return f"toUnixTimestamp64Micro({name})" if "DateTime64" in column_type else name


def written_micros(text: str) -> int:
    seconds, fraction = text.split(".")
    return int(seconds) * 1_000_000 + int(fraction.ljust(6, "0"))


def described(store: Store, table: str) -> list[tuple[str, str]]:
    """The columns an insert writes: not those ClickHouse computes (MATERIALIZED, ALIAS)."""
    rows = store.query(f"DESCRIBE TABLE {table}")
    return [(row[0], row[1]) for row in rows if row[2] not in ("MATERIALIZED", "ALIAS")]


@pytest.fixture
def full_store(store: Store) -> Store:
    migrate(store, ALL_MIGRATIONS)
    return store


@pytest.mark.parametrize("table", sorted(ROW_TYPES))
def test_row_fields_are_the_table_columns(full_store: Store, table: str) -> None:
    """Field names are the columns, in the table's order (a migration's new column is appended to both)."""
    assert ROW_TYPES[table][0]._fields == tuple(name for name, _ in described(full_store, table))


@pytest.mark.parametrize("table", sorted(ROW_TYPES))
def test_a_row_reads_back_column_by_column(full_store: Store, table: str) -> None:
    """Random rows of the table's type, inserted by `Store.insert`, read back value by value."""
    columns = described(full_store, table)
    row_type, key = ROW_TYPES[table]
    key_type = dict(columns)[key]
    rows = st.fixed_dictionaries({name: column_values(kind) for name, kind in columns}).map(
        lambda values: row_type(**values)
    )
    selected = ", ".join(read_back(kind, name) for name, kind in columns)
    numbers = itertools.count(10**6)  # migration versions no list uses

    @settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(rows)
    def check(row: NamedTuple) -> None:
        row = row._replace(**{key: next(numbers) if key_type.startswith("UInt") else uuid.uuid4().hex})
        full_store.insert(table, [row])
        (stored,) = full_store.query(
            f"SELECT {selected} FROM {table} WHERE {key} = {{k:{key_type}}}", {"k": getattr(row, key)}
        )
        for (name, kind), read in zip(columns, stored, strict=True):
            written = getattr(row, name)
            if "DateTime64" in kind and written is not None:
                written = written_micros(written)
            assert read == written, name

    check()


def test_insert_refuses_rows_without_names(full_store: Store) -> None:
    """A plain tuple, or rows of two types, cannot be inserted by name: an error says which."""
    with pytest.raises(TypeError, match="rows of one NamedTuple type, got tuple"):
        full_store.insert("trajectories", [("a" * 32, "b" * 16)])
    mixed = [TrajectoryRow(*[""] * 28), ScoreRow(*[""] * 15)]
    with pytest.raises(TypeError, match="got ScoreRow, TrajectoryRow"):
        full_store.insert("trajectories", mixed)


def test_a_scored_run_row_is_stored_as_a_score_row_a_metric(full_store: Store) -> None:
    """`scores_runs` (the evaluator's entry, a Null table) has ScoredRunRow's columns, and its
    view stores a row of it in `scores` as one row a metric, the run's columns on each."""
    assert ScoredRunRow._fields == tuple(name for name, _ in described(full_store, "scores_runs"))
    trace = uuid.uuid4().hex
    run = ScoredRunRow(
        *(trace, "root", "trajectory", "trajectory-v", "bot", "refund", "1700000000.250000", 2, 3),
        *("1700000001.500000", "v7", ["exact", "recall"], [1.0, 0.5], ["pass", ""]),
    )
    full_store.insert("scores_runs", [run])
    rows = full_store.query(
        "SELECT Metric, Score, Label, RootSpanId, Evaluator, EvaluatorVersion, Agent, Task, "
        "toUnixTimestamp64Micro(RunStart), Revision, ReferenceVersion, "
        "toUnixTimestamp64Micro(CreatedAt), AgentVersion, Explanation, Error, Model, PromptTokens "
        "FROM scores WHERE TraceId = {t:String} ORDER BY Metric",
        {"t": trace},
    )
    run_columns = ("root", "trajectory", "trajectory-v", "bot", "refund", 1700000000250000, 2, 3)
    stored = (1700000001500000, "v7", "", "", "", 0)
    assert rows == [("exact", 1.0, "pass", *run_columns, *stored), ("recall", 0.5, "", *run_columns, *stored)]
