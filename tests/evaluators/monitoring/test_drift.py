"""Drift calling on seeded synthetic streams: found where injected, quiet on stable streams."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from agenttrail.evaluators.monitoring import significance
from agenttrail.evaluators.monitoring.changepoint import BernoulliCusum, PageHinkley
from agenttrail.evaluators.monitoring.drift import (
    DEFAULT_MIN_EFFECT,
    DriftContext,
    DriftResult,
    DriftSettings,
    Samples,
    compare,
)

CONTEXT = DriftContext(
    "bot", "", datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 1, tzinfo=UTC), "24h"
)
TOOLS = ("search", "lookup", "refund", "email")
NO_MIN_EFFECT = dict.fromkeys(DEFAULT_MIN_EFFECT, 0.0)


def stream(
    rng: random.Random,
    n: int,
    *,
    failure: Callable[[float], float] = lambda t: 0.05,
    score: Callable[[float], float] = lambda t: 0.7,
    exact: Callable[[float], float] = lambda t: 0.8,
    latency_mu: Callable[[float], float] = lambda t: 0.0,
    tool_weights: tuple[float, ...] = (4, 3, 2, 1),
    length_mean: float = 3.0,
) -> Samples:
    """n runs in time order; each generator takes t in [0, 1) (position in the window)."""
    samples = Samples()
    for i in range(n):
        t = i / n
        samples.runs += 1
        samples.add("failure_rate", float(rng.random() < failure(t)))
        samples.add("latency", rng.lognormvariate(latency_mu(t), 0.6))
        samples.add("trajectory_precision", min(1.0, max(0.0, rng.gauss(score(t), 0.15))))
        samples.add("trajectory_exact_match", float(rng.random() < exact(t)))
        length = max(0, round(rng.gauss(length_mean, 1.2)))
        samples.add("trajectory_length", float(length))
        samples.tools.update(rng.choices(TOOLS, weights=tool_weights, k=length))
    return samples


def drifted(results: list[DriftResult]) -> set[tuple[str, str]]:
    return {(r.metric, r.test) for r in results if r.drifted}


INJECTED = {
    "failure-rate jump": ({"failure": lambda t: 0.15}, {("failure_rate", "two_proportion_z")}),
    "score mean drop": ({"score": lambda t: 0.6}, {("trajectory_precision", "mann_whitney_u")}),
    "exact-match drop": ({"exact": lambda t: 0.65}, {("trajectory_exact_match", "two_proportion_z")}),
    "latency shift": ({"latency_mu": lambda t: 0.35}, {("latency", "mann_whitney_u")}),
    "tool distribution change": ({"tool_weights": (1, 3, 2, 4)}, {("tool_distribution", "chi_square")}),
    "longer trajectories": ({"length_mean": 4.0}, {("trajectory_length", "mann_whitney_u")}),
}


@pytest.mark.parametrize("case", sorted(INJECTED))
def test_injected_drift_is_found_and_nothing_else(case: str) -> None:
    """A shift injected into one metric is called drift by that metric's test, and only that
    metric drifts (window tests; 600 baseline runs against 400 recent, alpha 0.01, BH)."""
    change, expected = INJECTED[case]
    rng = random.Random(case)
    baseline, recent = stream(rng, 600), stream(rng, 400, **change)  # type: ignore[arg-type]
    results = compare(CONTEXT, baseline, recent, DriftSettings())
    found = drifted(results)
    assert expected <= found
    assert {metric for metric, _ in found} == {metric for metric, _ in expected}


def test_every_result_reports_effect_p_value_and_sizes() -> None:
    """Each two-sample result carries its p-value, BH-adjusted p, signed effect size and both n."""
    rng = random.Random(3)
    results = compare(CONTEXT, stream(rng, 200), stream(rng, 100, failure=lambda t: 0.3), DriftSettings())
    failure = next(r for r in results if r.metric == "failure_rate" and r.test == "two_proportion_z")
    assert failure.drifted
    assert failure.effect == "cohens_h"
    assert failure.effect_size is not None
    assert failure.effect_size > 0  # the rate rose
    assert failure.p_value is not None
    assert failure.p_adjusted is not None
    assert failure.p_value <= failure.p_adjusted <= 1
    assert (failure.baseline_n, failure.recent_n) == (200, 100)
    assert failure.recent_value is not None
    assert failure.baseline_value is not None
    assert failure.recent_value > failure.baseline_value


def test_gradual_score_drift_is_caught_by_page_hinkley() -> None:
    """A slide that starts at 80 % of the recent window is too diluted for the window tests
    (effect below the minimum) but Page-Hinkley alarms, after the slide began."""
    rng = random.Random(21)
    recent = stream(rng, 1000, score=lambda t: 0.7 if t < 0.8 else 0.7 - (t - 0.8) * 1.5)
    results = compare(CONTEXT, stream(rng, 1000), recent, DriftSettings(), ["trajectory_precision"])
    by_test = {r.test: r for r in results}
    assert not by_test["mann_whitney_u"].drifted
    assert by_test["page_hinkley"].drifted
    assert '"direction": "down"' in by_test["page_hinkley"].detail
    assert int(by_test["page_hinkley"].detail.split('"change_at_run": ')[1].split(",")[0]) >= 800


def test_gradual_failure_rise_is_caught_by_bernoulli_cusum() -> None:
    """Failures creeping up in the last 30 % of the window (5 % -> 35 %) trip the Bernoulli CUSUM."""
    rng = random.Random(22)
    recent = stream(rng, 1000, failure=lambda t: 0.05 if t < 0.7 else 0.05 + (t - 0.7))
    results = compare(CONTEXT, stream(rng, 1000), recent, DriftSettings(), ["failure_rate"])
    cusum = next(r for r in results if r.test == "bernoulli_cusum")
    assert cusum.drifted
    assert cusum.effect_size is not None
    assert cusum.effect_size > 0


def test_stable_stream_calls_no_drift() -> None:
    """Two windows from the same process: every test says no drift (default settings)."""
    rng = random.Random(5)
    results = compare(CONTEXT, stream(rng, 800), stream(rng, 400), DriftSettings())
    assert len(results) == 12
    assert drifted(results) == set()


def test_false_alarm_rate_over_200_stable_seeds() -> None:
    """Stable streams (500 vs 300 runs, 8 two-sample tests per agent), alpha = 0.05, no minimum
    effect: some test called drift for the agent in 15 of 200 seeds = 7.5 % (over 400 seeds
    5.25 %, each single test 4-7 %; under the global null BH keeps this family-wise rate at
    alpha). Asserted bound: the binomial 99.9 % quantile at alpha, 21 of 200. The change-point
    detectors alarmed in 0 of 200 seeds; bound 3 %."""
    alpha = 0.05
    tested_alarms = change_alarms = 0
    for seed in range(200):
        rng = random.Random(seed)
        results = compare(
            CONTEXT, stream(rng, 500), stream(rng, 300), DriftSettings(alpha=alpha, min_effect=NO_MIN_EFFECT)
        )
        tested_alarms += any(r.drifted and r.p_value is not None for r in results)
        change_alarms += any(r.drifted and r.p_value is None for r in results)
        assert all(0.0 <= (r.p_value or 0.0) <= 1.0 for r in results)
    assert tested_alarms <= scipy_stats.binom.ppf(0.999, 200, alpha)
    assert change_alarms <= 0.03 * 200
    print(f"false alarms: two-sample {tested_alarms}/200, change-point {change_alarms}/200")


def test_insufficient_samples_never_call_drift() -> None:
    """Below min_samples in either window every test reports insufficient data, even for a
    shift that would be obvious with more runs."""
    rng = random.Random(8)
    recent = stream(rng, 29, failure=lambda t: 0.9, score=lambda t: 0.1, latency_mu=lambda t: 2.0)
    results = compare(CONTEXT, stream(rng, 500), recent, DriftSettings(min_samples=30))
    assert {r.status for r in results} == {"insufficient_data"}
    assert all("at least 30" in r.detail for r in results)
    enough = compare(CONTEXT, stream(rng, 500), recent, DriftSettings(min_samples=20))
    assert drifted(enough)


def test_minimum_effect_keeps_tiny_shifts_from_huge_windows_quiet() -> None:
    """With 20,000 runs per window a 0.5-point failure-rate change is significant but its
    Cohen's h is far below 0.2, so no drift is called; with no minimum effect it is."""
    rng = random.Random(9)
    base = [float(rng.random() < 0.10) for _ in range(20_000)]
    recent = [float(rng.random() < 0.115) for _ in range(20_000)]
    samples = Samples(values={"failure_rate": base}, runs=0), Samples(values={"failure_rate": recent}, runs=0)
    default = compare(CONTEXT, *samples, DriftSettings(max_samples=20_000), ["failure_rate"])
    loose = compare(
        CONTEXT, *samples, DriftSettings(max_samples=20_000, min_effect=NO_MIN_EFFECT), ["failure_rate"]
    )
    z_default = next(r for r in default if r.test == "two_proportion_z")
    assert z_default.p_value is not None
    assert z_default.p_value < 0.01
    assert not z_default.drifted
    assert next(r for r in loose if r.test == "two_proportion_z").drifted


@settings(max_examples=100, deadline=None)
@given(
    value=st.floats(-1e6, 1e6, allow_nan=False),
    length=st.integers(1, 400),
    delta=st.floats(0, 5),
    threshold=st.floats(1e-6, 100),
)
def test_page_hinkley_never_alarms_on_a_constant_stream(
    value: float, length: int, delta: float, threshold: float
) -> None:
    """A constant stream never trips Page-Hinkley, whatever its value, delta and threshold."""
    detector = PageHinkley(delta=delta, threshold=threshold, min_instances=1)
    assert not any(detector.update(value) for _ in range(length))


@settings(max_examples=50, deadline=None)
@given(p0=st.floats(0.01, 0.99), length=st.integers(1, 300))
def test_bernoulli_cusum_quiet_on_its_expected_pattern(p0: float, length: int) -> None:
    """A stream whose running rate stays at p0 (failures spread evenly) never alarms."""
    detector = BernoulliCusum(p0, threshold=12.0)
    seen = 0
    for i in range(1, length + 1):
        value = 1.0 if seen < math.floor(i * p0) else 0.0
        seen += int(value)
        assert not detector.update(value)


samples_st = st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=2, max_size=60)
binary_st = st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=60)


@settings(max_examples=80, deadline=None)
@given(a=samples_st, b=samples_st, x=binary_st, y=binary_st)
def test_p_values_are_probabilities(a: list[float], b: list[float], x: list[float], y: list[float]) -> None:
    """Every test's p-value lies in [0, 1] (ties, constants and tiny samples included)."""
    outcomes = [
        significance.mann_whitney(a, b),
        significance.kolmogorov_smirnov(a, b),
        significance.two_proportion_z(x, y),
        significance.chi_square_counts({"a": len(a), "b": len(x)}, {"a": len(b), "b": len(y)}),
    ]
    for outcome in outcomes:
        assert 0.0 <= outcome.p_value <= 1.0
        assert not math.isnan(outcome.effect_size)


@given(st.lists(st.floats(0, 1), min_size=1, max_size=40))
def test_benjamini_hochberg_adjusts_up_and_keeps_order(p_values: list[float]) -> None:
    """BH-adjusted p-values are >= the raw ones, at most 1, and ordered like the raw ones."""
    adjusted = significance.benjamini_hochberg(p_values)
    assert all(p <= q <= 1.0 for p, q in zip(p_values, adjusted, strict=True))
    pairs = sorted(zip(p_values, adjusted, strict=True))
    assert all(pairs[i][1] <= pairs[i + 1][1] for i in range(len(pairs) - 1))


def test_effect_sizes_have_their_textbook_values() -> None:
    """Cohen's h, Cliff's delta and Cramér's V on hand-checkable samples."""
    h = significance.two_proportion_z([0.0] * 50 + [1.0] * 50, [1.0] * 100).effect_size
    assert h == pytest.approx(math.pi - 2 * math.asin(math.sqrt(0.5)))
    assert significance.mann_whitney([1.0, 2.0], [3.0, 4.0]).effect_size == pytest.approx(1.0)
    assert significance.mann_whitney([3.0, 4.0], [1.0, 2.0]).effect_size == pytest.approx(-1.0)
    v = significance.chi_square_counts({"a": 100, "b": 0}, {"a": 0, "b": 100}, min_expected=0).effect_size
    assert v == pytest.approx(1.0)
