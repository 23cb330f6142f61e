"""Named row types: each type's fields are its table's columns, and any row inserted through
`Store.insert` reads back column by column as it was written."""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agenttrail.collector.rows import TrajectoryRow
from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.scoring.run_queue import DecisionRow
from agenttrail.evaluators.scoring.schema import ScoreRow

ROW_TYPES: dict[str, type[Any]] = {
    "trajectories": TrajectoryRow,
    "scores": ScoreRow,
    "evaluation_decisions": DecisionRow,
}

TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
# UInt8 columns are flags (IsDeleted must be 0 or 1).
_INTEGERS = {"UInt8": 1, "UInt32": 2**32 - 1, "UInt64": 2**63}
_FLOATS = st.floats(allow_nan=False, allow_infinity=False)


def micros_text(micros: int) -> str:
    return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"


def column_values(column_type: str) -> st.SearchStrategy[Any]:
    """Values a row may carry for a column of this ClickHouse type (as the builders write them)."""
    bare = column_type
    if bare.startswith("LowCardinality("):
        bare = bare.removeprefix("LowCardinality(").removesuffix(")")
    if bare == "String":
        return TEXT
    if bare in _INTEGERS:
        return st.integers(0, _INTEGERS[bare])
    if bare == "Float64":
        return _FLOATS
    if bare == "Nullable(Float64)":
        return st.none() | _FLOATS
    if bare.startswith("DateTime64"):
        return st.integers(10**15, 4 * 10**15).map(micros_text)  # 2001-2096
    if bare.startswith("Array("):
        return st.lists(TEXT, max_size=3)
    raise AssertionError(f"no values for column type {column_type}: add them here")


def described(store: Store, table: str) -> list[tuple[str, str]]:
    return [(row[0], row[1]) for row in store.query(f"DESCRIBE TABLE {table}")]


@pytest.fixture
def full_store(store: Store) -> Store:
    migrate(store, ALL_MIGRATIONS)
    return store


@pytest.mark.parametrize("table", sorted(ROW_TYPES))
def test_row_fields_are_the_table_columns(full_store: Store, table: str) -> None:
    """Field names are the columns, in the table's order (a migration's new column is appended to both)."""
    assert ROW_TYPES[table]._fields == tuple(name for name, _ in described(full_store, table))


@pytest.mark.parametrize("table", sorted(ROW_TYPES))
def test_a_row_reads_back_column_by_column(full_store: Store, table: str) -> None:
    """Random rows of the table's type, inserted by `Store.insert`, read back value by value."""
    columns = described(full_store, table)
    row_type = ROW_TYPES[table]
    rows = st.fixed_dictionaries({name: column_values(kind) for name, kind in columns}).map(
        lambda values: row_type(**values)
    )
    # A DateTime64 column reads back as its microseconds, compared with the text written.
    selected = ", ".join(
        f"toUnixTimestamp64Micro({name})" if kind.startswith("DateTime64") else name for name, kind in columns
    )

    @settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(rows)
    def check(row: NamedTuple) -> None:
        row = row._replace(TraceId=uuid.uuid4().hex)
        full_store.insert(table, [row])
        (stored,) = full_store.query(
            f"SELECT {selected} FROM {table} WHERE TraceId = {{t:String}}", {"t": row.TraceId}
        )
        for (name, kind), read in zip(columns, stored, strict=True):
            written = getattr(row, name)
            if kind.startswith("DateTime64"):
                seconds, micros = written.split(".")
                written = int(seconds) * 1_000_000 + int(micros)
            assert read == written, name

    check()


def test_insert_refuses_rows_without_names(full_store: Store) -> None:
    """A plain tuple, or rows of two types, cannot be inserted by name: an error says which."""
    with pytest.raises(TypeError, match="rows of one NamedTuple type, got tuple"):
        full_store.insert("trajectories", [("a" * 32, "b" * 16)])
    mixed = [TrajectoryRow(*[""] * 28), ScoreRow(*[""] * 15)]
    with pytest.raises(TypeError, match="got ScoreRow, TrajectoryRow"):
        full_store.insert("trajectories", mixed)
