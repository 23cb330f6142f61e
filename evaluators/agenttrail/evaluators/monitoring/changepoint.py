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
least e^threshold per side, so threshold 12 gives < 1 % false alarms over 1,000 runs.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass


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

    def restart_sums(self) -> None:
        """Keep the learned mean, forget the cumulative sums (after a warm-up on the baseline)."""
        self._up = self._up_min = self._down = self._down_max = 0.0


@dataclass(frozen=True, slots=True)
class ChangePoint:
    index: int  # position in the recent stream where the alarm fired
    direction: int  # +1 the metric rose, -1 it fell
    shift: float  # mean of the standardised recent values from the alarm on (baseline sd units)


class BaselineScale:
    """Maps a value to its mid-rank position in the baseline, standardised to mean 0, sd 1."""

    def __init__(self, baseline: Sequence[float]) -> None:
        self._sorted = sorted(baseline)
        ranks = [self._position(value) for value in baseline]
        self._mean = sum(ranks) / len(ranks)
        variance = sum((r - self._mean) ** 2 for r in ranks) / len(ranks)
        self._sd = math.sqrt(variance)

    def _position(self, value: float) -> float:
        low = bisect.bisect_left(self._sorted, value)
        high = bisect.bisect_right(self._sorted, value)
        return (low + high) / 2 / len(self._sorted)

    def __call__(self, value: float) -> float:
        position = self._position(value)
        if self._sd == 0:  # a constant baseline: any other value is a full-scale change
            return 0.0 if position == self._mean else math.copysign(3.0, position - self._mean)
        return (position - self._mean) / self._sd


def detect_change(
    baseline: Sequence[float], recent: Sequence[float], *, delta: float = 0.5, threshold: float = 12.0
) -> ChangePoint | None:
    """The first change in the recent stream (time order) relative to the baseline, if any."""
    scale = BaselineScale(baseline)
    detector = PageHinkley(delta=delta, threshold=threshold, min_instances=1)
    for value in baseline:
        detector.update(scale(value))
    detector.restart_sums()
    standardised = [scale(value) for value in recent]
    for index, value in enumerate(standardised):
        if detector.update(value):
            after = standardised[index:]
            return ChangePoint(index, detector.direction(), sum(after) / len(after))
    return None


class BernoulliCusum:
    """Two-sided CUSUM for a 0/1 stream with in-control rate `p0`; `update(x)` is True on alarm."""

    def __init__(self, p0: float, *, shift_h: float = 0.2, threshold: float = 12.0) -> None:
        angle = math.asin(math.sqrt(p0))
        self._sides: list[tuple[float, float]] = []  # (llr of a 1, llr of a 0) per side
        for target in (angle + shift_h / 2, angle - shift_h / 2):
            if 0 < target < math.pi / 2:
                p1 = math.sin(target) ** 2
                self._sides.append((math.log(p1 / p0), math.log((1 - p1) / (1 - p0))))
        self.threshold = threshold
        self._sums = [0.0] * len(self._sides)

    def update(self, value: float) -> bool:
        alarm = False
        for side, (if_one, if_zero) in enumerate(self._sides):
            self._sums[side] = max(0.0, self._sums[side] + (if_one if value >= 0.5 else if_zero))
            alarm = alarm or self._sums[side] > self.threshold
        return alarm


def detect_rate_change(
    baseline: Sequence[float], recent: Sequence[float], *, shift_h: float = 0.2, threshold: float = 12.0
) -> ChangePoint | None:
    """The first change of a 0/1 rate in the recent stream relative to the baseline rate, if any.

    `shift` is Cohen's h between the baseline rate and the recent rate from the alarm on.
    """
    n = len(baseline)
    p0 = min(max(sum(baseline) / n, 0.5 / n), 1 - 0.5 / n)  # a rate of exactly 0 or 1 has no LLR
    detector = BernoulliCusum(p0, shift_h=shift_h, threshold=threshold)
    for index, value in enumerate(recent):
        if detector.update(value):
            after = recent[index:]
            rate = sum(after) / len(after)
            h = 2 * math.asin(math.sqrt(rate)) - 2 * math.asin(math.sqrt(sum(baseline) / n))
            return ChangePoint(index, 1 if h >= 0 else -1, h)
    return None
