"""Two-sample tests with their effect sizes, and Benjamini-Hochberg across them. Pure, no I/O.

Which test for which data (the drift module decides per metric):
- proportions (failure, pass/fail scores): two-proportion z-test (pooled), effect Cohen's h;
- continuous values (latency, scores): Mann-Whitney U (location, effect Cliff's delta, the
  rank-biserial correlation) and Kolmogorov-Smirnov (shape, effect the statistic D);
- categorical counts (tools used): chi-square test of homogeneity, effect Cramér's V.
Effect sizes are signed as recent minus baseline where a sign means something.
"""

from __future__ import annotations

import importlib
import math
import sys
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

Values = Sequence[float] | NDArray[np.float64]  # a window's values: a list, or the array drift loads


@dataclass(frozen=True, slots=True)
class TestOutcome:
    test: str
    p_value: float
    effect_size: float
    effect: str  # the name of the effect-size measure


def two_proportion_z(baseline: Values, recent: Values) -> TestOutcome:
    """Pooled two-proportion z-test on 0/1 values; Cohen's h = 2 asin sqrt(p2) - 2 asin sqrt(p1)."""
    n1, n2 = len(baseline), len(recent)
    p1, p2 = _ones(baseline) / n1, _ones(recent) / n2
    pooled = (p1 * n1 + p2 * n2) / (n1 + n2)
    variance = pooled * (1 - pooled) * (1 / n1 + 1 / n2)
    if variance <= 0:  # both windows all 0 or all 1: identical proportions
        p_value = 1.0
    else:
        from scipy import special  # imported when a test runs: scipy takes seconds, serve starts without it

        z = (p2 - p1) / math.sqrt(variance)
        p_value = float(2 * special.ndtr(-abs(z)))  # stats.norm.sf(|z|), without loading scipy.stats
    h = 2 * math.asin(math.sqrt(p2)) - 2 * math.asin(math.sqrt(p1))
    return TestOutcome("two_proportion_z", _clip(p_value), h, "cohens_h")


def mann_whitney(baseline: Values, recent: Values) -> TestOutcome:
    """Two-sided Mann-Whitney U (tie-corrected); Cliff's delta = P(recent > base) - P(recent < base).

    scipy's `mannwhitneyu(recent, baseline, method="asymptotic")` computed from the sorted
    windows: the rank sum and the tie term are sums of half-integers and integers far below
    2**53, exact in any order, and the rest is scipy's arithmetic step by step, so the p-value
    is scipy's to the bit (a test holds this) without ranking the pooled values by argsort.
    """
    if _constant_and_equal(baseline, recent):
        return TestOutcome("mann_whitney_u", 1.0, 0.0, "cliffs_delta")
    from scipy import special

    x, y = np.sort(np.asarray(recent, dtype=float)), np.sort(np.asarray(baseline, dtype=float))
    n1, n2 = len(x), len(y)
    values, counts = np.unique(np.concatenate((x, y)), return_counts=True)
    # How many of each distinct value are recent ones: each x is one of `values` (one search
    # of x among them, rather than two of them among x).
    in_x = np.bincount(np.searchsorted(values, x), minlength=len(values))
    mid_ranks = (np.cumsum(counts) - counts) + (counts + 1) / 2
    u1 = float(np.sum(in_x * mid_ranks)) - n1 * (n1 + 1) / 2
    u = max(u1, n1 * n2 - u1)
    ties = counts.astype(float)
    tie_term = float(np.sum(ties**3 - ties))
    n = n1 + n2
    with np.errstate(divide="ignore", invalid="ignore"):
        sd = np.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))
        z = (u - n1 * n2 / 2 - 0.5) / sd
    p_value = float(np.clip(special.ndtr(-z) * 2, 0.0, 1.0))
    delta = 2 * u1 / (n1 * n2) - 1
    return TestOutcome("mann_whitney_u", _clip(p_value), delta, "cliffs_delta")


def kolmogorov_smirnov(baseline: Values, recent: Values) -> TestOutcome:
    """Two-sided two-sample KS test; the effect is D, the largest gap between the two CDFs."""
    if _constant_and_equal(baseline, recent):
        return TestOutcome("kolmogorov_smirnov", 1.0, 0.0, "ks_d")
    from scipy import stats

    with warnings.catch_warnings():  # "exact calculation unsuccessful": scipy falls back, as we want
        warnings.simplefilter("ignore", RuntimeWarning)
        result = stats.ks_2samp(recent, baseline, alternative="two-sided", method="auto")
    return TestOutcome("kolmogorov_smirnov", _clip(float(result.pvalue)), float(result.statistic), "ks_d")


def chi_square_counts(
    baseline: Mapping[str, int], recent: Mapping[str, int], *, min_expected: float = 5.0
) -> TestOutcome:
    """Chi-square homogeneity test of two count vectors; categories expected < 5 times are pooled."""
    names = sorted(set(baseline) | set(recent))
    table = np.array([[baseline.get(n, 0) for n in names], [recent.get(n, 0) for n in names]], dtype=float)
    table = _pool_rare(table, min_expected)
    if table.shape[1] < 2 or table.sum(axis=1).min() == 0:
        return TestOutcome("chi_square", 1.0, 0.0, "cramers_v")
    from scipy import stats

    chi2, p_value, _, _ = stats.chi2_contingency(table, correction=False)
    total = table.sum()
    cramers_v = math.sqrt(float(chi2) / (total * (min(table.shape) - 1))) if total else 0.0
    return TestOutcome("chi_square", _clip(float(p_value)), cramers_v, "cramers_v")


def _pool_rare(table: np.ndarray, min_expected: float) -> np.ndarray:
    """Merge the rarest columns into one until every expected count reaches `min_expected`."""
    table = table[:, table.sum(axis=0) > 0]
    order = np.argsort(table.sum(axis=0))
    table = table[:, order]
    total, rows = table.sum(), table.sum(axis=1)
    while table.shape[1] > 2:
        expected = np.outer(rows, table.sum(axis=0)) / total
        if expected.min() >= min_expected:
            break
        table = np.column_stack([table[:, 0] + table[:, 1], table[:, 2:]])
        table = table[:, np.argsort(table.sum(axis=0))]
    return table


def warm_up() -> threading.Thread | None:
    """Start importing scipy.stats in a thread (KS and chi-square need it): it takes a second or
    more, which a command can spend while ClickHouse reads the windows (chDB releases the GIL).
    None when it is already imported."""
    if "scipy.stats" in sys.modules:
        return None
    thread = threading.Thread(target=importlib.import_module, args=("scipy.stats",), daemon=True)
    thread.start()
    return thread


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """BH-adjusted p-values (q-values), in input order; calling q <= alpha controls the FDR at alpha."""
    count = len(p_values)
    order = sorted(range(count), key=lambda i: p_values[i])
    adjusted = [1.0] * count
    running = 1.0
    for rank in range(count, 0, -1):
        index = order[rank - 1]
        running = min(running, p_values[index] * count / rank)
        adjusted[index] = min(1.0, max(running, p_values[index]))  # max: float rounding of p*m/m
    return adjusted


def _ones(values: Values) -> float:
    """The sum of 0/1 values (exact in any order, so numpy's pairwise sum is Python's sum)."""
    return float(np.sum(np.asarray(values, dtype=float)))


def _constant_and_equal(baseline: Values, recent: Values) -> bool:
    first = baseline[0]
    return bool(np.all(np.asarray(baseline) == first) and np.all(np.asarray(recent) == first))


def _clip(p_value: float) -> float:
    """scipy can return nan for degenerate samples; that is 'no evidence', and p stays in [0, 1]."""
    if math.isnan(p_value):
        return 1.0
    return min(1.0, max(0.0, p_value))
