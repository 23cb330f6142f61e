"""The Vertex-style trajectory metrics and the agentevals aliases, row by row of the spec."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenttrail.evaluators.metrics import (
    ABSENT,
    ArgumentMode,
    ToolCall,
    TrajectoryFormatError,
    TrajectoryLike,
    call_matcher,
    strict,
    subset,
    superset,
    trajectory_any_order_match,
    trajectory_exact_match,
    trajectory_in_order_match,
    trajectory_precision,
    trajectory_recall,
    trajectory_single_tool_use,
    unordered,
)

from .strategies import MODES, REFERENCE_INPUTS, related_pair

Metric = Callable[..., float]
A = ToolCall("search", {"q": "x"})
B = ToolCall("fetch", {"url": "u"})
C = ToolCall("calc", {"e": "1+1"})
PAIRWISE: list[Metric] = [
    trajectory_exact_match,
    trajectory_in_order_match,
    trajectory_any_order_match,
    trajectory_precision,
    trajectory_recall,
    strict,
    superset,
    subset,
    unordered,
]

# (predicted, reference, exact, in order, any order, precision, recall, subset, unordered)
ROWS = {
    "both empty": ([], [], 1, 1, 1, 1.0, 1.0, 1, 1),
    "empty reference": ([A], [], 0, 1, 1, 0.0, 1.0, 0, 0),
    "empty predicted": ([], [A], 0, 0, 0, 0.0, 0.0, 1, 0),
    "equal": ([A, B], [A, B], 1, 1, 1, 1.0, 1.0, 1, 1),
    "reordered": ([B, A], [A, B], 0, 0, 1, 1.0, 1.0, 1, 1),
    "extra call": ([A, C, B], [A, B], 0, 1, 1, 2 / 3, 1.0, 0, 0),
    "missing call": ([A], [A, B], 0, 0, 0, 1.0, 0.5, 1, 0),
    "duplicate predicted": ([A, A], [A], 0, 1, 1, 0.5, 1.0, 0, 0),
    "duplicate reference": ([A], [A, A], 0, 0, 0, 1.0, 0.5, 1, 0),
    "disjoint": ([C], [A], 0, 0, 0, 0.0, 0.0, 0, 0),
    "subsequence with repeats": ([A, B, A], [A, A], 0, 1, 1, 2 / 3, 1.0, 0, 0),
    "out of order": ([B, A], [A, B, A], 0, 0, 0, 1.0, 2 / 3, 1, 0),
}


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_spec_rows(
    row: tuple[list[ToolCall], list[ToolCall], float, float, float, float, float, float, float],
) -> None:
    """Each metric gives the spec's value, including the both-empty, empty-side and duplicate cases."""
    predicted, reference, *expected = row
    metrics = [
        trajectory_exact_match,
        trajectory_in_order_match,
        trajectory_any_order_match,
        trajectory_precision,
        trajectory_recall,
        subset,
        unordered,
    ]
    assert [metric(predicted, reference) for metric in metrics] == pytest.approx(expected)


def test_duplicates_count() -> None:
    """The spec's example: predicted [A, A] against reference [A] has precision 0.5 and recall 1.0."""
    assert trajectory_precision([A, A], [A]) == 0.5
    assert trajectory_recall([A, A], [A]) == 1.0


def test_match_metrics_return_floats() -> None:
    """Match metrics return 1.0/0.0, never a bool or an int."""
    for metric in PAIRWISE:
        assert type(metric([A], [A])) is float
        assert type(metric([B], [A])) is float


def test_strict_and_superset_are_the_vertex_metrics() -> None:
    """strict is exact match and superset is any-order match."""
    assert strict is trajectory_exact_match
    assert superset is trajectory_any_order_match


def test_subset_passes_an_empty_prediction() -> None:
    """subset passes an empty prediction where precision gives 0.0."""
    assert subset([], [A, B]) == 1.0
    assert trajectory_precision([], [A, B]) == 0.0


def test_unordered_is_multiset_equality() -> None:
    """unordered needs a one-to-one pairing with nothing left over on either side."""
    assert unordered([A, B, A], [A, A, B]) == 1.0
    assert unordered([A, B], [A, A, B]) == 0.0
    assert unordered([A, A, B], [A, B]) == 0.0


class TestSingleToolUse:
    def test_any_call_with_the_name(self) -> None:
        """1.0 if any predicted call has the name, whatever its input; else 0.0."""
        assert trajectory_single_tool_use([B, ToolCall("search", {"other": 1})], "search") == 1.0
        assert trajectory_single_tool_use([B, C], "search") == 0.0

    def test_empty_prediction(self) -> None:
        """No calls means the tool was not used."""
        assert trajectory_single_tool_use([], "search") == 0.0

    def test_reads_any_format(self) -> None:
        """The prediction may be in any accepted format."""
        assert trajectory_single_tool_use('[{"tool_name": "search"}]', "search") == 1.0


class TestArgumentModes:
    def test_modes_apply_to_every_pairwise_metric(self) -> None:
        """arguments=ignore makes inputs irrelevant for every pairwise metric."""
        predicted, reference = [ToolCall("search", {"q": "y"})], [A]
        for metric in PAIRWISE:
            assert metric(predicted, reference) == 0.0
            assert metric(predicted, reference, arguments="ignore") == 1.0

    def test_per_tool_override(self) -> None:
        """tool_arguments relaxes one tool while the others stay exact."""
        predicted = [ToolCall("search", {"q": "x", "n": 5}), ToolCall("fetch", {"url": "v"})]
        reference = [A, B]
        assert trajectory_recall(predicted, reference, tool_arguments={"search": "superset"}) == 0.5
        assert (
            trajectory_recall(predicted, reference, tool_arguments={"search": "superset", "fetch": "ignore"})
            == 1.0
        )

    def test_keys(self) -> None:
        """A key list compares only the listed keys."""
        predicted = [ToolCall("search", {"q": "x", "page": 2})]
        assert (
            trajectory_exact_match(predicted, [ToolCall("search", {"q": "x", "page": 1})], arguments=["q"])
            == 1.0
        )

    @pytest.mark.parametrize("reference_input", [ABSENT, None])
    def test_wildcard_reference(self, reference_input: None) -> None:
        """A reference call with absent or null input matches any same-named call."""
        reference = [ToolCall("search", reference_input)]
        assert trajectory_exact_match([ToolCall("search", {"q": "anything"})], reference) == 1.0

    def test_bad_mode(self) -> None:
        """An unknown mode raises ValueError before any comparison."""
        with pytest.raises(ValueError, match="arguments"):
            trajectory_precision([A], [A], arguments="fuzzy")  # type: ignore[arg-type]

    def test_bad_trajectory(self) -> None:
        """A malformed trajectory raises TrajectoryFormatError."""
        with pytest.raises(TrajectoryFormatError):
            trajectory_recall([A], [{"nope": 1}])


def test_mixed_formats() -> None:
    """An OpenAI message list is scored against a Vertex reference."""
    predicted: list[dict[str, Any]] = [
        {"role": "user", "content": "find x"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "1", "type": "function", "function": {"name": "search", "arguments": '{"q":"x"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "1", "content": "[]"},
    ]
    reference = [{"tool_name": "search", "tool_input": {"q": "x"}}]
    assert trajectory_exact_match(predicted, reference) == 1.0


def _first_fit_pairs(predicted: list[ToolCall], reference: list[ToolCall], arguments: ArgumentMode) -> int:
    match, used, pairs = call_matcher(arguments), set[int](), 0
    for r in reference:
        i = next((i for i, p in enumerate(predicted) if i not in used and match(p, r)), None)
        if i is not None:
            used.add(i)
            pairs += 1
    return pairs


FIRST_FIT_TRAPS: Mapping[str, tuple[list[ToolCall], list[ToolCall], ArgumentMode]] = {
    # The wildcard reference takes the only call the specific reference could match.
    "wildcard": (
        [ToolCall("s", {"x": 1}), ToolCall("s", {"x": 2})],
        [ToolCall("s", None), ToolCall("s", {"x": 1})],
        "exact",
    ),
    # The empty reference input is satisfied by anything, so it grabs the {"x": 1} call first.
    "superset": (
        [ToolCall("s", {"x": 1}), ToolCall("s", {"y": 2})],
        [ToolCall("s", {}), ToolCall("s", {"x": 1})],
        "superset",
    ),
    # The empty prediction fits the first reference and leaves {"x": 1} nowhere to go.
    "subset": (
        [ToolCall("s", {}), ToolCall("s", {"x": 1})],
        [ToolCall("s", {"x": 1, "y": 2}), ToolCall("s", {"y": 2})],
        "subset",
    ),
}


@pytest.mark.parametrize("case", FIRST_FIT_TRAPS.values(), ids=FIRST_FIT_TRAPS.keys())
def test_first_fit_trap(case: tuple[list[ToolCall], list[ToolCall], ArgumentMode]) -> None:
    """Where first-fit pairs only one call, maximum matching finds the full match."""
    predicted, reference, mode = case
    assert _first_fit_pairs(predicted, reference, mode) == 1
    for metric in (trajectory_any_order_match, trajectory_precision, trajectory_recall, subset, unordered):
        assert metric(predicted, reference, arguments=mode) == 1.0, metric.__name__


def _is_subsequence_brute_force(
    predicted: list[ToolCall], reference: list[ToolCall], arguments: ArgumentMode
) -> bool:
    match = call_matcher(arguments)
    return any(
        all(match(predicted[i], r) for i, r in zip(positions, reference, strict=True))
        for positions in itertools.combinations(range(len(predicted)), len(reference))
    )


PAIRS = related_pair(REFERENCE_INPUTS)


class TestProperties:
    @given(PAIRS, MODES)
    def test_greedy_in_order_is_exact(
        self, pair: tuple[list[ToolCall], list[ToolCall]], mode: ArgumentMode
    ) -> None:
        """Greedy in-order matching agrees with trying every embedding, wildcards and modes included."""
        predicted, reference = pair
        assert trajectory_in_order_match(predicted, reference, arguments=mode) == float(
            _is_subsequence_brute_force(predicted, reference, mode)
        )

    @given(PAIRS, MODES)
    def test_exact_implies_in_order_implies_any_order(
        self, pair: tuple[list[ToolCall], list[ToolCall]], mode: ArgumentMode
    ) -> None:
        """Exact match implies in-order match, which implies any-order match."""
        predicted, reference = pair
        exact = trajectory_exact_match(predicted, reference, arguments=mode)
        in_order = trajectory_in_order_match(predicted, reference, arguments=mode)
        any_order = trajectory_any_order_match(predicted, reference, arguments=mode)
        assert exact <= in_order <= any_order

    @given(PAIRS, MODES)
    def test_exact_implies_full_precision_and_recall(
        self, pair: tuple[list[ToolCall], list[ToolCall]], mode: ArgumentMode
    ) -> None:
        """An exact match has precision and recall 1."""
        predicted, reference = pair
        if trajectory_exact_match(predicted, reference, arguments=mode) == 1.0:
            assert trajectory_precision(predicted, reference, arguments=mode) == 1.0
            assert trajectory_recall(predicted, reference, arguments=mode) == 1.0

    @given(PAIRS, MODES)
    def test_scores_in_unit_interval(
        self, pair: tuple[list[ToolCall], list[ToolCall]], mode: ArgumentMode
    ) -> None:
        """Every pairwise metric lies in [0, 1]."""
        predicted, reference = pair
        for metric in PAIRWISE:
            assert 0.0 <= metric(predicted, reference, arguments=mode) <= 1.0

    @given(PAIRS, MODES)
    def test_any_order_is_full_recall(
        self, pair: tuple[list[ToolCall], list[ToolCall]], mode: ArgumentMode
    ) -> None:
        """Any-order match holds exactly when recall is 1."""
        predicted, reference = pair
        assert trajectory_any_order_match(predicted, reference, arguments=mode) == float(
            trajectory_recall(predicted, reference, arguments=mode) == 1.0
        )

    @given(PAIRS, MODES)
    def test_unordered_is_subset_and_superset(
        self, pair: tuple[list[ToolCall], list[ToolCall]], mode: ArgumentMode
    ) -> None:
        """unordered holds exactly when both subset and superset hold."""
        predicted, reference = pair
        assert unordered(predicted, reference, arguments=mode) == min(
            subset(predicted, reference, arguments=mode), superset(predicted, reference, arguments=mode)
        )

    @given(related_pair())
    def test_precision_recall_mirror(self, pair: tuple[list[ToolCall], list[ToolCall]]) -> None:
        """In exact mode precision(p, r) == recall(r, p), except an empty p against a non-empty r."""
        predicted, reference = pair
        if not predicted and reference:
            assert (trajectory_precision(predicted, reference), trajectory_recall(reference, predicted)) == (
                0.0,
                1.0,
            )
        else:
            assert trajectory_precision(predicted, reference) == trajectory_recall(reference, predicted)

    @given(related_pair(), st.randoms(use_true_random=False))
    def test_order_free_metrics_ignore_order(
        self, pair: tuple[list[ToolCall], list[ToolCall]], rng: random.Random
    ) -> None:
        """Any-order, precision and recall do not change when either list is reordered."""
        predicted, reference = pair
        before = [
            m(predicted, reference)
            for m in (trajectory_any_order_match, trajectory_precision, trajectory_recall)
        ]
        rng.shuffle(predicted)
        rng.shuffle(reference)
        after = [
            m(predicted, reference)
            for m in (trajectory_any_order_match, trajectory_precision, trajectory_recall)
        ]
        assert after == before


def test_trajectory_like_accepts_strings() -> None:
    """A JSON string is a valid TrajectoryLike for every metric."""
    text: TrajectoryLike = '[{"name": "search", "args": {"q": "x"}}]'
    assert trajectory_exact_match(text, [A]) == 1.0
