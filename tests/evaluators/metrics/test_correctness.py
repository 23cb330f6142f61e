"""Tool correctness in every mode, with expected values computed by hand from the spec."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenttrail.evaluators.metrics import ABSENT, ToolCall, avg_score, multiply_score, tool_correctness
from agenttrail.evaluators.metrics.correctness import input_similarity

from .strategies import NAMES, REFERENCE_INPUTS, VALUES

A = ToolCall("search", {"q": "x"})
B = ToolCall("fetch", {"url": "u"})
C = ToolCall("calc", {"e": "1"})


def _a(**args: object) -> ToolCall:
    return ToolCall("search", dict(args))


class TestInputSimilarity:
    @pytest.mark.parametrize(
        ("expected", "called", "similarity"),
        [
            ({}, {}, 1.0),
            ({"a": 1, "b": 2}, {"b": 2, "a": 1.0}, 1.0),
            ({"a": 1, "b": 2}, {"a": 1, "b": 3}, 1 / 2),
            ({"a": 1}, {"a": 1, "c": 0}, 1 / 2),
            ({"a": 1}, {"b": 1}, 0.0),
            # union {q, opts, k, z}: q equal (1) + opts half equal (1/2) -> 1.5 / 4
            (
                {"q": "x", "opts": {"a": 1, "b": 2}, "k": 3},
                {"q": "x", "opts": {"a": 1, "b": 3}, "z": 0},
                0.375,
            ),
            # o -> p -> half of {a, b} equal: each level has one key, so 1/2 all the way up
            ({"o": {"p": {"a": 1, "b": 2}}}, {"o": {"p": {"a": 1, "b": 0}}}, 0.5),
            ({"l": [1, 2], "k": 1}, {"l": [1, 3], "k": 1}, 0.5),
            ({"o": {"a": 1}}, {"o": 1}, 0.0),
            ({"n": True}, {"n": 1}, 0.0),
            ({"n": 2**63 + 1}, {"n": 2**63}, 0.0),
        ],
    )
    def test_values(self, expected: dict[str, Any], called: dict[str, Any], similarity: float) -> None:
        """Equal keys add 1/|union|, nested objects their own similarity/|union|; lists all or nothing."""
        assert input_similarity(expected, called) == pytest.approx(similarity)


class TestDefault:
    def test_partial_input(self) -> None:
        """A same-named call with half the input right scores 0.5, which passes the 0.5 threshold."""
        result = tool_correctness([_a(q="x", n=1)], [_a(q="x", n=2)])
        assert (result.score, result.success) == (0.5, True)

    def test_order_ignored_and_extras_free(self) -> None:
        """Without ordering, call order does not matter and extra calls are not penalised."""
        assert tool_correctness([A, B], [C, B, A, C]).score == 1.0

    def test_wrong_names(self) -> None:
        """A call with another name scores nothing."""
        result = tool_correctness([A], [B])
        assert (result.score, result.success) == (0.0, False)

    def test_duplicates_counted_separately(self) -> None:
        """Each called call serves one expected call, even identical ones."""
        assert tool_correctness([A, A], [A]).score == 0.5
        assert tool_correctness([A, A], [A, A]).score == 1.0
        assert tool_correctness([A], [A, A]).score == 1.0

    def test_best_unused_call(self) -> None:
        """Each expected call takes the best-scoring unused call, not the first same-named one."""
        assert tool_correctness([_a(x=1, y=1)], [_a(x=1, y=2), _a(x=1, y=1)]).score == 1.0

    def test_ties_go_to_the_earliest(self) -> None:
        """On a tie the earliest call is taken, even when a later choice would help a later call."""
        # e1 scores 0.5 against both and takes c1; e2 is then left with c2 (0.5) instead of c1 (1.0).
        expected = [_a(x=1, y=1), _a(x=1, y=9)]
        called = [_a(x=1, y=9), _a(x=1, y=8)]
        assert tool_correctness(expected, called).score == 0.5

    def test_nested_input(self) -> None:
        """Nested objects contribute their own similarity to the pair score."""
        expected = [_a(q="x", opts={"a": 1, "b": 2}, k=3)]
        called = [_a(q="x", opts={"a": 1, "b": 3}, z=0)]
        assert tool_correctness(expected, called).score == 0.375


class TestEvaluationParams:
    def test_output_mismatch_zeroes(self) -> None:
        """A differing output sets the pair score to 0 whatever the input."""
        expected = [{"name": "a", "args": {"x": 1}, "output": 1}]
        assert tool_correctness(expected, [{"name": "a", "args": {"x": 1}, "output": 2}]).score == 0.0
        assert tool_correctness(expected, [{"name": "a", "args": {"x": 1}, "output": 1.0}]).score == 1.0

    def test_null_output_is_compared(self) -> None:
        """A null output is data: it differs from 1."""
        expected = [{"name": "a", "output": None}]
        assert tool_correctness(expected, [{"name": "a", "output": 1}]).score == 0.0

    def test_only_where_data_is_present(self) -> None:
        """An absent output or input on either side, or a null input, is not compared."""
        expected = [{"name": "a", "args": {"x": 1}, "output": 1}]
        assert tool_correctness(expected, [{"name": "a"}]).score == 1.0
        assert tool_correctness([{"name": "a", "args": None}], [{"name": "a", "args": {"x": 2}}]).score == 1.0
        assert tool_correctness([{"name": "a"}], [{"name": "a", "args": {"x": 2}, "output": 3}]).score == 1.0

    def test_inputs_only(self) -> None:
        """With input_parameters only, outputs are ignored."""
        expected = [{"name": "a", "args": {"x": 1}, "output": 1}]
        called = [{"name": "a", "args": {"x": 1}, "output": 2}]
        assert tool_correctness(expected, called, evaluation_params=["input_parameters"]).score == 1.0

    def test_output_only(self) -> None:
        """With output only, inputs are ignored."""
        expected = [{"name": "a", "args": {"x": 1}, "output": 1}]
        assert (
            tool_correctness(
                expected, [{"name": "a", "args": {"x": 2}, "output": 1}], evaluation_params=["output"]
            ).score
            == 1.0
        )
        assert (
            tool_correctness(
                expected, [{"name": "a", "args": {"x": 1}, "output": 2}], evaluation_params=["output"]
            ).score
            == 0.0
        )

    def test_names_only(self) -> None:
        """With no evaluation params only names count."""
        assert tool_correctness([_a(x=1)], [_a(x=2)], evaluation_params=()).score == 1.0

    def test_unknown_param(self) -> None:
        """An unknown evaluation param raises ValueError naming the valid ones."""
        with pytest.raises(ValueError, match="evaluation_params: expected a subset of"):
            tool_correctness([A], [A], evaluation_params=["context"])  # type: ignore[list-item]


class TestOrdering:
    @pytest.mark.parametrize(
        ("expected", "called", "score"),
        [
            ([A, B, C], [B, A, C], 2 / 3),
            ([A, B], [A, C, B], 1.0),
            ([A, B], [B, A], 0.5),
            ([A, A], [A], 0.5),
            # the A step counts its 0.5 input similarity: (0.5 + 1) / 2
            ([_a(x=1, y=1), B], [_a(x=1, y=2), B], 0.75),
            # the LCS takes the better A: (1 + 1) / 2
            ([_a(x=1, y=1), B], [_a(x=1, y=2), _a(x=1, y=1), B], 1.0),
            # two half matches on the diagonal, then B: (0.5 + 0.5 + 1) / 3
            ([_a(x=1, y=1), _a(x=2, y=2), B], [_a(x=1, y=0), _a(x=2, y=0), B], 2 / 3),
            ([_a(x=1)], [_a(x=2)], 0.0),
            ([A], [], 0.0),
        ],
    )
    def test_weighted_lcs(self, expected: list[ToolCall], called: list[ToolCall], score: float) -> None:
        """Weighted LCS (a step counts s where s > 0) divided by len(expected)."""
        assert tool_correctness(expected, called, should_consider_ordering=True).score == pytest.approx(score)


class TestExactMatch:
    @pytest.mark.parametrize(
        ("expected", "called", "score"),
        [
            ([A, B], [A, B], 1.0),
            ([A, B], [B, A], 0.0),
            ([A], [A, A], 0.0),
            ([_a(x=1, y=1)], [_a(x=1, y=2)], 0.0),
            ([_a(n=1)], [_a(n=1.0)], 1.0),
            ([], [], 1.0),
        ],
    )
    def test_every_position_scores_one(
        self, expected: list[ToolCall], called: list[ToolCall], score: float
    ) -> None:
        """1 if same length and every position has s = 1, else 0."""
        assert tool_correctness(expected, called, should_exact_match=True).score == score

    def test_wins_over_ordering(self) -> None:
        """With both flags, exact match decides."""
        result = tool_correctness([A, B], [A, C, B], should_exact_match=True, should_consider_ordering=True)
        assert result.score == 0.0


class TestEmpty:
    def test_both_empty(self) -> None:
        """Nothing expected and nothing called scores 1.0."""
        result = tool_correctness([], [])
        assert (result.score, result.success) == (1.0, True)

    @pytest.mark.parametrize("flags", [{}, {"should_exact_match": True}, {"should_consider_ordering": True}])
    def test_expected_empty_called_not(self, flags: dict[str, Any]) -> None:
        """Calls made when none were expected score 0.0 in every mode."""
        assert tool_correctness([], [A], **flags).score == 0.0

    def test_called_empty(self) -> None:
        """Expected calls that were never made score 0.0."""
        assert tool_correctness([A], []).score == 0.0


class TestThresholdAndStrict:
    @pytest.mark.parametrize(("threshold", "success"), [(0.5, True), (0.6, False), (0.0, True)])
    def test_success_is_score_at_least_threshold(self, threshold: float, success: bool) -> None:
        """success = score >= threshold."""
        result = tool_correctness([_a(x=1, y=1)], [_a(x=1, y=2)], threshold=threshold)
        assert (result.score, result.success) == (0.5, success)

    def test_strict_mode_all_or_nothing(self) -> None:
        """strict_mode turns a partial score into 0 and fails it, whatever the threshold given."""
        result = tool_correctness([_a(x=1, y=1)], [_a(x=1, y=2)], threshold=0.2, strict_mode=True)
        assert (result.score, result.success) == (0.0, False)
        result = tool_correctness([A, B], [B, A], strict_mode=True)
        assert (result.score, result.success) == (1.0, True)

    @pytest.mark.parametrize("threshold", [-0.1, 1.5, float("nan")])
    def test_bad_threshold(self, threshold: float) -> None:
        """A threshold outside [0, 1] raises ValueError."""
        with pytest.raises(ValueError, match="threshold"):
            tool_correctness([A], [A], threshold=threshold)


class FakeJudge:
    """A tool-selection judge that records its inputs and returns a fixed score."""

    def __init__(self, score: float, reason: str = "fake reason") -> None:
        self.score, self.reason = score, reason
        self.seen: list[tuple[str | None, Sequence[Mapping[str, Any]], list[ToolCall]]] = []

    def __call__(
        self, user_input: str | None, tools: Sequence[Mapping[str, Any]], called: list[ToolCall]
    ) -> tuple[float, str]:
        self.seen.append((user_input, tools, called))
        return self.score, self.reason


TOOLS = [{"name": "search", "parameters": {"type": "object"}}]


class TestToolSelection:
    def test_final_is_the_minimum(self) -> None:
        """With available tools and a judge, the score is min(judge, deterministic)."""
        judge = FakeJudge(0.4, "fetch was the better tool")
        result = tool_correctness([A], [A], available_tools=TOOLS, user_input="find x", tool_selection=judge)
        assert (result.score, result.selection_score, result.success) == (0.4, 0.4, False)
        assert "fetch was the better tool" in result.reason
        assert judge.seen == [("find x", TOOLS, [A])]

    def test_deterministic_lower(self) -> None:
        """When the deterministic score is lower it stays."""
        result = tool_correctness([A, B], [A], available_tools=TOOLS, tool_selection=FakeJudge(0.9))
        assert (result.score, result.selection_score) == (0.5, 0.9)

    def test_strict_after_min(self) -> None:
        """strict_mode applies to the combined score."""
        result = tool_correctness(
            [A], [A], available_tools=TOOLS, tool_selection=FakeJudge(0.9), strict_mode=True
        )
        assert result.score == 0.0

    def test_tools_without_judge(self) -> None:
        """available_tools without a judge raises ValueError asking for one."""
        with pytest.raises(ValueError, match="tool-selection judge"):
            tool_correctness([A], [A], available_tools=TOOLS)

    def test_judge_without_tools_is_not_called(self) -> None:
        """A judge with no available tools has nothing to select from and is not asked."""
        judge = FakeJudge(0.0)
        result = tool_correctness([A], [A], tool_selection=judge)
        assert (result.score, result.selection_score, judge.seen) == (1.0, None, [])

    def test_judge_score_out_of_range(self) -> None:
        """A judge score outside [0, 1] raises ValueError."""
        with pytest.raises(ValueError, match=r"tool_selection returned 1\.5"):
            tool_correctness([A], [A], available_tools=TOOLS, tool_selection=FakeJudge(1.5))


def test_reason_names_missing_calls() -> None:
    """The reason gives the mode, score, both call lists and the expected calls never made."""
    reason = tool_correctness([A, B, B], [B]).reason
    assert reason == (
        "best unused call per expected call: 0.33; expected [search, fetch, fetch], called [fetch]; "
        "not called: fetch, search"
    )


@pytest.mark.parametrize(
    ("expected", "called", "flags", "reason"),
    [
        ([], [], {}, "nothing expected: 1.00; expected [], called []"),
        (
            [A],
            [A, B],
            {"should_exact_match": True},
            "exact match: 0.00; expected [search], called [search, fetch]",
        ),
        (
            [A, B],
            [B, A],
            {"should_consider_ordering": True, "threshold": 1.0},
            "weighted LCS: 0.50; expected [search, fetch], called [fetch, search]",
        ),
    ],
)
def test_reason_names_the_mode(
    expected: list[ToolCall], called: list[ToolCall], flags: Any, reason: str
) -> None:
    """The reason starts with the scoring mode the flags chose (a threshold of 1 is allowed)."""
    assert tool_correctness(expected, called, **flags).reason == reason


@pytest.mark.parametrize("selection", [0.0, 1.0])
def test_reason_ends_with_the_tool_selection(selection: float) -> None:
    """Judge scores 0 and 1 are in range; the judge's score and reason follow the deterministic reason."""
    result = tool_correctness([A], [A], available_tools=TOOLS, tool_selection=FakeJudge(selection, "why"))
    assert (
        result.reason == f"best unused call per expected call: 1.00; expected [search], called [search]; "
        f"tool selection {selection:.2f}: why"
    )


def test_aggregate_helpers() -> None:
    """multiply_score is the product and avg_score the mean of tool correctness and response score."""
    assert multiply_score(0.5, 0.8) == pytest.approx(0.4)
    assert avg_score(0.5, 0.8) == pytest.approx(0.65)


OUTPUTS = st.one_of(st.just(ABSENT), VALUES)
CALLS = st.lists(st.builds(ToolCall, NAMES, REFERENCE_INPUTS, OUTPUTS), max_size=5)
FLAGS = st.fixed_dictionaries(
    {
        "should_exact_match": st.booleans(),
        "should_consider_ordering": st.booleans(),
        "evaluation_params": st.sampled_from(
            [(), ("input_parameters",), ("output",), ("input_parameters", "output")]
        ),
    }
)


@given(CALLS, CALLS, FLAGS)
def test_score_in_unit_interval(
    expected: list[ToolCall], called: list[ToolCall], flags: dict[str, Any]
) -> None:
    """The score lies in [0, 1] in every mode."""
    assert 0.0 <= tool_correctness(expected, called, **flags).score <= 1.0


@given(CALLS, FLAGS)
def test_identical_scores_one(calls: list[ToolCall], flags: dict[str, Any]) -> None:
    """Calling exactly what was expected scores 1 in every mode."""
    assert tool_correctness(calls, list(calls), **flags).score == 1.0
