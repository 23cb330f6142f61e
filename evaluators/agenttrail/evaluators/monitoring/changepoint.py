"""Online change-point detection for gradual drift: Page-Hinkley (continuous values) and a
Bernoulli CUSUM (pass/fail values).

A two-window test compares whole windows; a slow slide inside the recent window dilutes into
its average. Page-Hinkley follows the per-run stream in time order and alarms once the
cumulative deviation from the running mean, less a tolerance `delta` per step, exceeds
`threshold`. A constant stream never alarms (each step adds -delta or +delta away from it).

`detect_change` feeds it values standardised against the baseline window through the
baseline's empirical CDF, so one threshold works for any metric (latency in seconds, scores in
[0, 1]) and heavy tails do not trip it: under no change the standardised values have mean 0
and variance 1. With delta = 0.5 and threshold = 12 (the defaults), the detector behaves like
a CUSUM with k = 0.5, h = 12, whose in-control run length is ~10^5 runs for each side
(Siegmund's approximation), i.e. ~1 % false alarms over a 1,000-run recent window; the tests
measure it.

Pass/fail streams (failure, exact match) are too skewed for that: with a 5 % failure rate one
failure is +4.4 baseline sd, and a chance cluster of a few failures trips Page-Hinkley. They
get a two-sided Bernoulli CUSUM on log-likelihood ratios instead, designed for a shift of
Cohen's h = `shift_h` from the baseline rate; by Lorden's bound its in-control run length is at
least e^threshold per side (e^10 = 22,000 runs at the default 10). Measured at a 5 % rate over
1,000 recent runs: 0.7 % false alarms at threshold 10 (3 % at 8, 0.3 % at 12), and 78 % of
late slides from 5 % to 25 % over the last 200 runs caught (91 % at 8).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from agenttrail.evaluators.monitoring.significance import Values


class PageHinkley:
    """Two-sided Page-Hinkley: `update(x)` returns True when a change in mean is detected."""

    def __init__(self, *, delta: float = 0.5, threshold: float = 12.0, min_instances: int = 30) -> None:
        if delta < 0 or threshold <= 0:
            raise ValueError("Page-Hinkley needs delta >= 0 and threshold > 0")
        self.delta = delta
        self.threshold = threshold
        self.min_instances = min_instances
        self.count = 0
        self.mean = 0.0
        self._up = 0.0  # cumulative (x - mean - delta): grows when the mean rises
        self._up_min = 0.0
        self._down = 0.0  # cumulative (x - mean + delta): falls when the mean drops
        self._down_max = 0.0

    def update(self, value: float) -> bool:
        self.count += 1
        self.mean += (value - self.mean) / self.count
        self._up += value - self.mean - self.delta
        self._up_min = min(self._up_min, self._up)
        self._down += value - self.mean + self.delta
        self._down_max = max(self._down_max, self._down)
        if self.count < self.min_instances:
            return False
        return self.statistic() > self.threshold

    def statistic(self) -> float:
        """The larger of the upward and downward test statistics."""
        return max(self._up - self._up_min, self._down_max - self._down)

    def direction(self) -> int:
        """+1 if the upward statistic is the larger (the mean rose), else -1."""
        return 1 if self._up - self._up_min >= self._down_max - self._down else -1


@dataclass(frozen=True, slots=True)
class ChangePoint:
    index: int  # position in the recent stream where the alarm fired
    direction: int  # +1 the metric rose, -1 it fell
    shift: float  # mean of the standardised recent values from the alarm on (baseline sd units)


def baseline_scale(baseline: Values, values: Values) -> np.ndarray:
    """`values` as mid-rank positions in the baseline, standardised by the baseline's own positions
    (mean 0, sd 1); with a constant baseline, any other value is a full-scale (3 sd) change."""
    ordered = np.sort(np.asarray(baseline, dtype=float))
    size = len(ordered)
    if not size or np.isnan(ordered[-1]):  # NaN equals nothing: the searches are the definition
        return _searched_scale(ordered, values)
    # Each baseline value's run of equal values, [run_start, run_end): its left and right
    # insertion points (searchsorted's "left" and "right"), found in one pass over the sorted
    # values instead of two binary searches a value; a point of the recent window then needs
    # one search, its right insertion point being its run's end if it equals a baseline value.
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    bounds = np.append(starts, size)
    lengths = np.diff(bounds)
    run_start, run_end = np.repeat(starts, lengths), np.repeat(bounds[1:], lengths)
    reference = (run_start + run_end) / 2 / size
    mean, sd = float(reference.mean()), float(reference.std())
    points = np.asarray(values, dtype=float)
    low = np.searchsorted(ordered, points, side="left")
    inside = np.minimum(low, size - 1)
    high = np.where(ordered[inside] == points, run_end[inside], low)
    scaled = (low + high) / 2 / size - mean
    if sd == 0:
        return np.sign(scaled) * 3.0
    return scaled / sd


def _searched_scale(ordered: np.ndarray, values: Values) -> np.ndarray:
    """`baseline_scale` by two searches a point (the definition the fast form follows)."""

    def positions(points: np.ndarray) -> np.ndarray:
        low = np.searchsorted(ordered, points, side="left")
        high = np.searchsorted(ordered, points, side="right")
        return (low + high) / 2 / len(ordered)

    reference = positions(ordered)
    mean, sd = float(reference.mean()), float(reference.std())
    scaled = positions(np.asarray(values, dtype=float)) - mean
    if sd == 0:
        return np.sign(scaled) * 3.0
    return scaled / sd


def detect_change(
    baseline: Values, recent: Values, *, delta: float = 0.5, threshold: float = 12.0
) -> ChangePoint | None:
    """The first change in the recent stream (time order) relative to the baseline, if any.

    The detector starts as if it had read the whole baseline: its running mean is the
    baseline's (0 after standardising) with the baseline's weight, its sums at zero. This is
    `PageHinkley.update` over the stream in array form (running means from a cumulative sum,
    the minimum and maximum so far from `accumulate`): the loop took most of drift's time.
    """
    standardised = baseline_scale(baseline, recent)
    if not len(standardised):
        return None
    counts = np.arange(len(baseline) + 1, len(baseline) + len(standardised) + 1, dtype=float)
    means = np.cumsum(standardised) / counts
    steps = standardised - means
    up = np.cumsum(steps - delta)
    down = np.cumsum(steps + delta)
    rise = up - np.minimum(np.minimum.accumulate(up), 0.0)
    fall = np.maximum(np.maximum.accumulate(down), 0.0) - down
    alarms = np.flatnonzero(np.maximum(rise, fall) > threshold)
    if not len(alarms):
        return None
    index = int(alarms[0])
    after = standardised[index:].tolist()
    return ChangePoint(index, 1 if rise[index] >= fall[index] else -1, sum(after) / len(after))


class BernoulliCusum:
    """Two-sided CUSUM for a 0/1 stream with in-control rate `p0`; `update(x)` is True on alarm."""

    def __init__(self, p0: float, *, shift_h: float = 0.2, threshold: float = 10.0) -> None:
        angle = math.asin(math.sqrt(p0))
        self.sides: list[tuple[float, float]] = []  # (llr of a 1, llr of a 0) per side
        for target in (angle + shift_h / 2, angle - shift_h / 2):
            if 0 < target < math.pi / 2:
                p1 = math.sin(target) ** 2
                self.sides.append((math.log(p1 / p0), math.log((1 - p1) / (1 - p0))))
        self.threshold = threshold
        self._sums = [0.0] * len(self.sides)

    def update(self, value: float) -> bool:
        alarm = False
        for side, (if_one, if_zero) in enumerate(self.sides):
            self._sums[side] = max(0.0, self._sums[side] + (if_one if value >= 0.5 else if_zero))
            alarm = alarm or self._sums[side] > self.threshold
        return alarm


def detect_rate_change(
    baseline: Values, recent: Values, *, shift_h: float = 0.2, threshold: float = 10.0
) -> ChangePoint | None:
    """The first change of a 0/1 rate in the recent stream relative to the baseline rate, if any.

    `shift` is Cohen's h between the baseline rate and the recent rate from the alarm on.
    `BernoulliCusum.update` in array form: each side's sum max(0, s + llr) is the cumulative
    log-likelihood ratio less its lowest value so far (or 0).
    """
    n = len(baseline)
    ones = float(np.sum(np.asarray(baseline, dtype=float)))  # 0/1 values: exact in any order
    p0 = min(max(ones / n, 0.5 / n), 1 - 0.5 / n)  # a rate of exactly 0 or 1 has no LLR
    detector = BernoulliCusum(p0, shift_h=shift_h, threshold=threshold)
    values = np.asarray(recent, dtype=float)
    first: int | None = None
    for if_one, if_zero in detector.sides:
        sums = np.cumsum(np.where(values >= 0.5, if_one, if_zero))
        above = np.flatnonzero(sums - np.minimum(np.minimum.accumulate(sums), 0.0) > threshold)
        if len(above) and (first is None or above[0] < first):
            first = int(above[0])
    if first is None:
        return None
    after = values[first:]
    rate = float(np.sum(after)) / len(after)
    h = 2 * math.asin(math.sqrt(rate)) - 2 * math.asin(math.sqrt(ones / n))
    return ChangePoint(first, 1 if h >= 0 else -1, h)
