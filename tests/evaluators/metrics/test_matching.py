"""Canonical JSON, argument modes, wildcards, per-tool overrides and maximum matching."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenttrail.evaluators.metrics import (
    ABSENT,
    Absent,
    ArgumentMode,
    ToolCall,
    call_matcher,
    calls_match,
    canonical_json,
    maximum_matching,
)

from .strategies import MODES, REFERENCE_INPUTS, VALUES, calls

ALL_MODES: list[ArgumentMode] = ["exact", "ignore", "subset", "superset", ["a"]]


def _match(
    predicted: dict[str, Any] | Absent | None, reference: dict[str, Any] | Absent | None, mode: ArgumentMode
) -> bool:
    return calls_match(ToolCall("t", predicted), ToolCall("t", reference), mode)


class TestCanonicalJson:
    def test_sorted_keys_no_whitespace(self) -> None:
        """Keys are sorted at every level and no whitespace is written."""
        assert canonical_json({"b": 1, "a": {"d": [1, 2], "c": None}}) == '{"a":{"c":null,"d":[1,2]},"b":1}'

    def test_integral_floats_equal_ints(self) -> None:
        """1 and 1.0 have one canonical form, also nested in lists."""
        assert canonical_json({"x": [1.0, -0.0]}) == canonical_json({"x": [1, 0]})
        assert _match({"n": 1}, {"n": 1.0}, "exact")

    def test_true_is_not_one(self) -> None:
        """true and 1 differ, as do false and 0."""
        assert not _match({"n": True}, {"n": 1}, "exact")
        assert not _match({"n": 0}, {"n": False}, "exact")

    def test_big_integers_exact(self) -> None:
        """2**63 + 1 and 2**63 differ, though as floats they would be equal."""
        assert not _match({"n": 2**63 + 1}, {"n": 2**63}, "exact")
        assert not _match({"n": 2**63 + 1}, {"n": float(2**63 + 1)}, "exact")
        assert _match({"n": 2**63}, {"n": float(2**63)}, "exact")

    def test_non_integral_floats(self) -> None:
        """Non-integral floats keep their shortest round-trip form."""
        assert canonical_json(0.1) == "0.1"
        assert not _match({"n": 0.5}, {"n": 1}, "exact")

    @given(VALUES)
    def test_json_round_trip_is_stable(self, value: object) -> None:
        """Serialising and reading back a value does not change its canonical form."""
        assert canonical_json(json.loads(json.dumps(value))) == canonical_json(value)


class TestModes:
    @pytest.mark.parametrize("mode", ALL_MODES)
    def test_names_must_be_equal(self, mode: ArgumentMode) -> None:
        """A different name never matches, whatever the mode or wildcard."""
        assert not calls_match(ToolCall("a", {}), ToolCall("b", None), mode)
        assert not calls_match(ToolCall("a", {"a": 1}), ToolCall("b", {"a": 1}), mode)

    def test_exact(self) -> None:
        """Exact needs equal inputs, key order aside."""
        assert _match({"a": 1, "b": {"c": 2}}, {"b": {"c": 2}, "a": 1}, "exact")
        assert not _match({"a": 1, "b": 2}, {"a": 1}, "exact")
        assert not _match({"a": 1}, {"a": 1, "b": 2}, "exact")

    def test_exact_is_the_default(self) -> None:
        """Without a mode inputs compare exactly."""
        assert not calls_match(ToolCall("t", {"a": 1}), ToolCall("t", {"a": 2}))

    def test_ignore(self) -> None:
        """Ignore matches any inputs of a same-named call."""
        assert _match({"a": 1}, {"b": [2]}, "ignore")

    def test_subset(self) -> None:
        """Subset: every key/value of the predicted input is in the reference input, recursively."""
        assert _match({"a": 1}, {"a": 1, "b": 2}, "subset")
        assert _match({}, {"a": 1}, "subset")
        assert _match({"o": {"x": 1}}, {"o": {"x": 1, "y": 2}, "b": 2}, "subset")
        assert not _match({"a": 1, "b": 2}, {"a": 1}, "subset")
        assert not _match({"o": {"x": 1, "z": 0}}, {"o": {"x": 1}}, "subset")
        assert not _match({"o": {"x": 1}}, {"o": 5}, "subset")

    def test_superset(self) -> None:
        """Superset: every key/value of the reference input is in the predicted input, recursively."""
        assert _match({"a": 1, "b": 2}, {"a": 1}, "superset")
        assert _match({"o": {"x": 1, "y": 2}}, {"o": {"x": 1}}, "superset")
        assert not _match({"a": 1}, {"a": 1, "b": 2}, "superset")

    @pytest.mark.parametrize("mode", ["exact", "subset", "superset", ["l"]])
    def test_lists_compare_exactly_in_every_mode(self, mode: ArgumentMode) -> None:
        """Lists need the same length and equal elements, even dict elements, in every mode."""
        assert _match({"l": [1, {"a": 1}]}, {"l": [1.0, {"a": 1}]}, mode)
        assert not _match({"l": [1]}, {"l": [1, 2]}, mode)
        assert not _match({"l": [1, 2]}, {"l": [1]}, mode)
        assert not _match({"l": [{"a": 1}]}, {"l": [{"a": 1, "b": 2}]}, mode)
        assert not _match({"l": [2, 1]}, {"l": [1, 2]}, mode)

    def test_dotted_keys(self) -> None:
        """A key list compares only the listed, possibly nested, keys."""
        assert _match(
            {"a": {"b": 1, "x": 1}, "c": 2, "d": 3}, {"a": {"b": 1.0, "x": 9}, "c": 2}, ["a.b", "c"]
        )
        assert not _match({"a": {"b": 1}, "c": 2}, {"a": {"b": 2}, "c": 2}, ["a.b", "c"])
        assert _match({"a": {"b": [1, 2]}}, {"a": {"b": [1, 2]}}, ("a.b",))
        assert not _match({"a": {"b": {"x": 1}}}, {"a": {"b": {"x": 1, "y": 2}}}, ["a.b"])

    def test_dotted_keys_missing(self) -> None:
        """A key missing from both counts as equal; from one only (even against null) it does not."""
        assert _match({"x": 1}, {"y": 2}, ["a.b"])
        assert _match({"a": 1}, {"a": 1}, ["a.b"])
        assert not _match({"a": {"b": 1}}, {"a": {}}, ["a.b"])
        assert not _match({"a": None}, {}, ["a"])


class TestWildcards:
    @pytest.mark.parametrize("reference_input", [ABSENT, None])
    @pytest.mark.parametrize("mode", ALL_MODES)
    def test_absent_or_null_reference_input_matches_anything(
        self, reference_input: Absent | None, mode: ArgumentMode
    ) -> None:
        """A reference input that is absent or null is a wildcard in every mode."""
        assert _match({"a": [1]}, reference_input, mode)
        assert _match(ABSENT, reference_input, mode)
        assert _match(None, reference_input, mode)

    def test_absent_predicted_input_is_empty(self) -> None:
        """A predicted call without input counts as a call with {} (not a wildcard)."""
        assert _match(ABSENT, {}, "exact")
        assert _match(None, {}, "exact")
        assert not _match(ABSENT, {"a": 1}, "exact")
        assert _match(ABSENT, {"a": 1}, "subset")


class TestOverridesAndErrors:
    def test_per_tool_override(self) -> None:
        """tool_arguments replaces the default mode for calls of the named tool only."""
        match = call_matcher("exact", {"search": "ignore", "fetch": ["url"]})
        assert match(ToolCall("search", {"q": 1}), ToolCall("search", {"q": 2}))
        assert match(ToolCall("fetch", {"url": "u", "t": 1}), ToolCall("fetch", {"url": "u"}))
        assert not match(ToolCall("calc", {"x": 1}), ToolCall("calc", {"x": 2}))

    @pytest.mark.parametrize("mode", ["fuzzy", "", [], [""], ["a..b"], ["a", 3], {"a": 1}])
    def test_bad_mode(self, mode: Any) -> None:
        """An unknown mode, empty key list or empty dotted part raises ValueError naming the valid ones."""
        with pytest.raises(ValueError, match=r"arguments: expected 'exact', 'ignore', 'subset', 'superset'"):
            call_matcher(mode)

    def test_bad_override(self) -> None:
        """A bad per-tool mode is named by its tool."""
        with pytest.raises(ValueError, match=r"tool_arguments\['search'\]"):
            call_matcher("exact", {"search": "fuzzy"})  # type: ignore[dict-item]


def _greedy(n_left: int, n_right: int, edges: set[tuple[int, int]]) -> int:
    used: set[int] = set()
    for i in range(n_left):
        j = next((j for j in range(n_right) if (i, j) in edges and j not in used), None)
        if j is not None:
            used.add(j)
    return len(used)


def _brute_force(n_left: int, n_right: int, edges: set[tuple[int, int]]) -> int:
    if n_left > n_right:
        return _brute_force(n_right, n_left, {(j, i) for i, j in edges})
    return max(
        (
            sum((i, j) in edges for i, j in enumerate(choice))
            for choice in itertools.permutations(range(n_right), n_left)
        ),
        default=0,
    )


@st.composite
def _bipartite(draw: st.DrawFn) -> tuple[int, int, set[tuple[int, int]]]:
    n_left, n_right = draw(st.integers(0, 5)), draw(st.integers(0, 5))
    pairs = [(i, j) for i in range(n_left) for j in range(n_right)]
    return n_left, n_right, {pair for pair in pairs if draw(st.booleans())}


class TestMaximumMatching:
    def test_first_fit_trap(self) -> None:
        """Where first-fit pairs left 0 with right 0 and strands left 1, the maximum pairs both."""
        edges = {(0, 0), (0, 1), (1, 0)}
        assert _greedy(2, 2, edges) == 1
        assert maximum_matching(range(2), range(2), lambda i, j: (i, j) in edges) == 2

    def test_empty(self) -> None:
        """No items on either side gives no pairs."""
        assert maximum_matching([], [1], lambda i, j: True) == 0
        assert maximum_matching([1], [], lambda i, j: True) == 0

    def test_long_chain_does_not_recurse(self) -> None:
        """A long augmenting path is searched iteratively, not by recursion."""
        n = 1500  # past the default recursion limit of 1000
        assert maximum_matching(range(n), range(n), lambda i, j: j in (i, i - 1)) == n

    @given(_bipartite())
    def test_maximum_and_at_least_greedy(self, graph: tuple[int, int, set[tuple[int, int]]]) -> None:
        """The size equals a brute-force maximum and is never below a greedy matching's."""
        n_left, n_right, edges = graph
        size = maximum_matching(range(n_left), range(n_right), lambda i, j: (i, j) in edges)
        assert size == _brute_force(n_left, n_right, edges)
        assert size >= _greedy(n_left, n_right, edges)

    @given(_bipartite(), st.randoms(use_true_random=False))
    def test_invariant_under_permutation(
        self, graph: tuple[int, int, set[tuple[int, int]]], rng: random.Random
    ) -> None:
        """Reordering either side does not change the size."""
        n_left, n_right, edges = graph
        left, right = list(range(n_left)), list(range(n_right))
        size = maximum_matching(left, right, lambda i, j: (i, j) in edges)
        rng.shuffle(left)
        rng.shuffle(right)
        assert maximum_matching(left, right, lambda i, j: (i, j) in edges) == size

    @given(st.lists(calls(), max_size=5), st.lists(calls(REFERENCE_INPUTS), max_size=5), MODES)
    def test_on_tool_calls_not_below_greedy(
        self, predicted: list[ToolCall], reference: list[ToolCall], mode: ArgumentMode
    ) -> None:
        """With real calls, modes and wildcards the maximum is never below first-fit."""
        match = call_matcher(mode)
        edges = {(i, j) for i, p in enumerate(predicted) for j, r in enumerate(reference) if match(p, r)}
        size = maximum_matching(predicted, reference, match)
        assert size == _brute_force(len(predicted), len(reference), edges)
        assert size >= _greedy(len(predicted), len(reference), edges)
