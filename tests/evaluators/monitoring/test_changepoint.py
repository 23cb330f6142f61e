"""The array forms of the change-point detectors find what the online detectors find.

`detect_change` and `detect_rate_change` run Page-Hinkley and the Bernoulli CUSUM over a
whole window with numpy; `PageHinkley.update` and `BernoulliCusum.update`, one value at a
time, are the definition. Both must alarm at the same run, in the same direction, with the
same shift (to float rounding: the running mean is a cumulative sum here, an update there).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from agenttrail.evaluators.monitoring.changepoint import (
    BernoulliCusum,
    ChangePoint,
    PageHinkley,
    baseline_scale,
    detect_change,
    detect_rate_change,
)


def change_by_updates(
    baseline: Sequence[float], recent: Sequence[float], delta: float, threshold: float
) -> ChangePoint | None:
    detector = PageHinkley(delta=delta, threshold=threshold, min_instances=1)
    detector.count = len(baseline)
    standardised = baseline_scale(baseline, recent).tolist()
    for index, value in enumerate(standardised):
        if detector.update(value):
            after = standardised[index:]
            return ChangePoint(index, detector.direction(), sum(after) / len(after))
    return None


def rate_change_by_updates(
    baseline: Sequence[float], recent: Sequence[float], shift_h: float, threshold: float
) -> ChangePoint | None:
    n = len(baseline)
    p0 = min(max(sum(baseline) / n, 0.5 / n), 1 - 0.5 / n)
    detector = BernoulliCusum(p0, shift_h=shift_h, threshold=threshold)
    for index, value in enumerate(recent):
        if detector.update(value):
            after = recent[index:]
            rate = sum(after) / len(after)
            h = 2 * math.asin(math.sqrt(rate)) - 2 * math.asin(math.sqrt(sum(baseline) / n))
            return ChangePoint(index, 1 if h >= 0 else -1, h)
    return None


def assert_same(found: ChangePoint | None, expected: ChangePoint | None) -> None:
    if expected is None:
        assert found is None
        return
    assert found is not None, expected
    assert (found.index, found.direction) == (expected.index, expected.direction)
    assert math.isclose(found.shift, expected.shift, rel_tol=1e-9, abs_tol=1e-12)


def sliding(rng: random.Random, n: int, start: float, end: float, at: float) -> list[float]:
    """Lognormal values whose log-mean moves from `start` to `end` after position `at`."""
    return [rng.lognormvariate(start if i < at * n else end, 0.6) for i in range(n)]


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    n=st.integers(1, 3000),
    shift=st.floats(-1.5, 1.5),
    at=st.floats(0, 1),
    delta=st.sampled_from([0.0, 0.25, 0.5, 1.0]),
    threshold=st.sampled_from([2.0, 6.0, 12.0]),
)
def test_page_hinkley_array_form_alarms_as_the_updates(
    seed: int, n: int, shift: float, at: float, delta: float, threshold: float
) -> None:
    rng = random.Random(seed)
    baseline = sliding(rng, rng.randint(2, 2000), 0.0, 0.0, 1.0)
    recent = sliding(rng, n, 0.0, shift, at)
    assert_same(
        detect_change(baseline, recent, delta=delta, threshold=threshold),
        change_by_updates(baseline, recent, delta, threshold),
    )


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    n=st.integers(1, 3000),
    p0=st.floats(0.0, 1.0),
    p1=st.floats(0.0, 1.0),
    at=st.floats(0, 1),
    threshold=st.sampled_from([2.0, 8.0, 10.0]),
)
def test_bernoulli_cusum_array_form_alarms_as_the_updates(
    seed: int, n: int, p0: float, p1: float, at: float, threshold: float
) -> None:
    rng = random.Random(seed)
    baseline = [float(rng.random() < p0) for _ in range(rng.randint(1, 2000))]
    recent = [float(rng.random() < (p0 if i < at * n else p1)) for i in range(n)]
    assert_same(
        detect_rate_change(baseline, recent, shift_h=0.2, threshold=threshold),
        rate_change_by_updates(baseline, recent, 0.2, threshold),
    )


def test_both_forms_find_a_late_slide_and_stay_quiet_without_one() -> None:
    """The equivalence above is not vacuous: the streams it draws alarm and stay quiet."""
    rng = random.Random(7)
    baseline = sliding(rng, 2000, 0.0, 0.0, 1.0)
    slide = sliding(rng, 1000, 0.0, 1.0, 0.8)
    found = detect_change(baseline, slide)
    assert found is not None
    assert (found.direction, found.index >= 790) == (1, True)
    assert_same(found, change_by_updates(baseline, slide, 0.5, 12.0))
    assert detect_change(baseline, sliding(rng, 1000, 0.0, 0.0, 1.0)) is None
    rates = [float(rng.random() < 0.05) for _ in range(2000)]
    late = [float(rng.random() < (0.05 if i < 800 else 0.4)) for i in range(1000)]
    found = detect_rate_change(rates, late)
    assert found is not None
    assert (found.direction, found.index >= 800) == (1, True)
    assert_same(found, rate_change_by_updates(rates, late, 0.2, 10.0))


def scale_by_searches(baseline: Sequence[float], values: Sequence[float]) -> np.ndarray:
    """`baseline_scale` as it is defined: each value's mid-rank position in the sorted baseline
    from its left and right insertion points, standardised by the baseline's own positions."""
    ordered = np.sort(np.asarray(baseline, dtype=float))

    def positions(points: np.ndarray) -> np.ndarray:
        low = np.searchsorted(ordered, points, side="left")
        high = np.searchsorted(ordered, points, side="right")
        return (low + high) / 2 / len(ordered)

    reference = positions(ordered)
    scaled = positions(np.asarray(values, dtype=float)) - float(reference.mean())
    sd = float(reference.std())
    return np.sign(scaled) * 3.0 if sd == 0 else scaled / sd


_tied = st.sampled_from([0.0, -0.0, 0.5, 1.0, 2.0, 7.5, math.inf, -math.inf])
_values = st.lists(_tied | st.floats(-1e6, 1e6, allow_nan=False), max_size=80)


@settings(max_examples=300, deadline=None)
@given(baseline=_values.filter(len), recent=_values, nan=st.sampled_from(["", "baseline", "recent"]))
def test_baseline_scale_is_the_two_searches_to_the_bit(
    baseline: list[float], recent: list[float], nan: str
) -> None:
    """One search a recent value and the runs of equal baseline values give the positions that a
    left and a right search give, bit for bit: ties, signed zeros, infinities and NaN included."""
    baseline = [*baseline, math.nan] if nan == "baseline" else baseline
    recent = [*recent, math.nan] if nan == "recent" else recent
    with np.errstate(invalid="ignore"):
        found, expected = baseline_scale(baseline, recent), scale_by_searches(baseline, recent)
    assert found.tobytes() == expected.tobytes()
