"""Aggregates of one metric over many runs.

A run whose metric could not be computed (None, e.g. no reference) is counted as missing, never as
0. The standard deviation is the sample one (n - 1), 0 for a single value; mean and std are None
when nothing was computed.

>>> aggregate([1.0, None, 0.0, 1.0])
Aggregate(count=3, mean=0.6666666666666666, std=0.5773502691896258, missing=1)
>>> aggregate([0.5]), aggregate([None])
(Aggregate(count=1, mean=0.5, std=0.0, missing=0), Aggregate(count=0, mean=None, std=None, missing=1))

Per time bucket, agent and task the same rule applies; those groupings are queries over stored
values, not this function.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Aggregate:
    """Count of computed values, their mean and sample std, and how many were missing."""

    count: int
    mean: float | None
    std: float | None
    missing: int


def aggregate(values: Iterable[float | None]) -> Aggregate:
    """Aggregate in one pass with Welford's update, which stays accurate for large, close values."""
    count = missing = 0
    mean = sum_of_squares = 0.0
    for value in values:
        if value is None:
            missing += 1
            continue
        if not math.isfinite(value):
            raise ValueError(f"expected finite metric values (None for missing), got {value!r}")
        count += 1
        delta = value - mean
        mean += delta / count
        sum_of_squares += delta * (value - mean)
    if count == 0:
        return Aggregate(0, None, None, missing)
    std = math.sqrt(sum_of_squares / (count - 1)) if count > 1 else 0.0
    return Aggregate(count, mean, std, missing)
