"""Aggregates over runs: missing values counted apart, sample standard deviation."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenttrail.evaluators.metrics import Aggregate, aggregate


def test_missing_is_not_zero() -> None:
    """None is counted as missing and leaves the mean of the computed values alone."""
    assert aggregate([1.0, None, 3.0]) == Aggregate(count=2, mean=2.0, std=math.sqrt(2), missing=1)


def test_single_value_has_zero_std() -> None:
    """One value has a standard deviation of 0, not an error."""
    assert aggregate([0.7]) == Aggregate(count=1, mean=0.7, std=0.0, missing=0)


@pytest.mark.parametrize(("values", "missing"), [([], 0), ([None, None], 2)])
def test_nothing_computed(values: list[float | None], missing: int) -> None:
    """With no computed value, mean and std are None rather than 0."""
    assert aggregate(values) == Aggregate(count=0, mean=None, std=None, missing=missing)


def test_sample_std() -> None:
    """The standard deviation divides by n - 1."""
    assert aggregate([0.0, 1.0, 0.0, 1.0]).std == pytest.approx(math.sqrt(1 / 3))


def test_stable_for_large_close_values() -> None:
    """Large values with small spread keep their exact deviation (naive sum of squares would not)."""
    result = aggregate([1e9 + 4, 1e9 + 7, 1e9 + 13, 1e9 + 16])
    assert result.mean == 1e9 + 10
    assert result.std == pytest.approx(math.sqrt(30), rel=1e-12)


def test_accepts_a_generator() -> None:
    """Values are read in one pass, so any iterable will do."""
    assert aggregate(float(i) for i in range(5)).mean == 2.0


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_rejected(value: float) -> None:
    """NaN or infinity raise ValueError instead of poisoning the mean; None is the way to say missing."""
    with pytest.raises(ValueError, match="None for missing"):
        aggregate([1.0, value])


@given(st.lists(st.one_of(st.none(), st.floats(0, 1))))
def test_matches_statistics(values: list[float | None]) -> None:
    """Mean and std agree with the statistics module over the computed values."""
    present = [v for v in values if v is not None]
    result = aggregate(values)
    assert (result.count, result.missing) == (len(present), len(values) - len(present))
    if len(present) >= 2:
        assert result.mean == pytest.approx(statistics.fmean(present), abs=1e-12)
        assert result.std == pytest.approx(statistics.stdev(present), abs=1e-9)
