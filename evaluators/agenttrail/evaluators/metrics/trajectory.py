"""The Vertex-style trajectory metrics and the LangChain agentevals aliases.

Every pairwise metric takes ``(predicted, reference, *, arguments="exact", tool_arguments=None)``:
trajectories in any format ``parse_trajectory`` reads, the argument mode, and per-tool overrides
(see ``matching``). Match metrics return 1.0 or 0.0, never a bool, so every metric is a float.

=============================  ===================================================================
``trajectory_exact_match``     same length and call i matches call i for every i (both empty: 1)
``trajectory_in_order_match``  the reference is a subsequence of the predicted (empty reference: 1)
``trajectory_any_order_match`` every reference call pairs with a distinct predicted call
                               (extras allowed, empty reference: 1)
``trajectory_precision``       matched pairs / len(predicted); empty predicted: 1.0 if the
                               reference is empty too, else 0.0
``trajectory_recall``          matched pairs / len(reference); empty reference: 1.0
``trajectory_single_tool_use`` 1 if any predicted call has the given name (no reference)
=============================  ===================================================================

Pairs are counted one-to-one by a maximum matching. Duplicates count:

>>> A = {"tool_name": "search", "tool_input": {"q": "x"}}
>>> trajectory_precision([A, A], [A]), trajectory_recall([A, A], [A])
(0.5, 1.0)
>>> B = {"tool_name": "fetch", "tool_input": {"url": "u"}}
>>> trajectory_exact_match([A, B], [A, B]), trajectory_exact_match([B, A], [A, B])
(1.0, 0.0)
>>> trajectory_in_order_match([A, B, A], [A, A]), trajectory_any_order_match([B, A], [A, B])
(1.0, 1.0)

Aliases for LangChain agentevals users (same keyword arguments):

- ``strict``: ``trajectory_exact_match``
- ``superset``: ``trajectory_any_order_match`` (the prediction covers the reference)
- ``subset``: every predicted call pairs with a distinct reference call; an empty prediction passes
  (unlike precision, which gives it 0.0 against a non-empty reference)
- ``unordered``: both of the above, i.e. multiset equality under the argument mode

>>> subset([], [A]), trajectory_precision([], [A]), unordered([A, B], [B, A]), unordered([A], [A, A])
(1.0, 0.0, 1.0, 0.0)

Precision and recall are mirror images (``precision(p, r) == recall(r, p)`` in exact mode) except
for an empty prediction against a non-empty reference: precision 0.0, while recall with an empty
reference is 1.0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from agenttrail.evaluators.metrics.calls import ToolCall, TrajectoryLike, parse_trajectory
from agenttrail.evaluators.metrics.matching import ArgumentMode, Matcher, call_matcher, maximum_matching


class Pairing:
    """A predicted and a reference trajectory under one argument mode: what every pairwise metric
    reads. The maximum matching is computed once however many metrics ask for it (the metric
    catalogue keeps one pairing per run and mode)."""

    __slots__ = ("_matched", "match", "predicted", "reference")

    def __init__(self, predicted: list[ToolCall], reference: list[ToolCall], match: Matcher) -> None:
        self.predicted, self.reference, self.match = predicted, reference, match
        self._matched: int | None = None

    @property
    def matched(self) -> int:
        """Pairs in a maximum one-to-one matching (raises NotComputable as the matcher does)."""
        if self._matched is None:
            self._matched = maximum_matching(self.predicted, self.reference, self.match)
        return self._matched


PairwiseMetric = Callable[[Pairing], float]


def _pairing(
    predicted: TrajectoryLike,
    reference: TrajectoryLike,
    arguments: ArgumentMode,
    tool_arguments: Mapping[str, ArgumentMode] | None,
) -> Pairing:
    match = call_matcher(arguments, tool_arguments)
    return Pairing(parse_trajectory(predicted), parse_trajectory(reference), match)


def _flag(holds: bool) -> float:
    return 1.0 if holds else 0.0


def exact_match(pairs: Pairing) -> float:
    """``trajectory_exact_match`` of a pairing."""
    pred, ref, match = pairs.predicted, pairs.reference, pairs.match
    return _flag(len(pred) == len(ref) and all(map(match, pred, ref)))


def in_order_match(pairs: Pairing) -> float:
    """``trajectory_in_order_match`` of a pairing.

    Greedy earliest matching is exact here for any per-pair predicate, including subset, superset
    and wildcards: if some embedding puts reference call j at predicted index e_j, greedy puts it at
    g_j <= e_j by induction (e_j > e_(j-1) >= g_(j-1) and e_j matches, so the first match after
    g_(j-1) is no later than e_j), so greedy fails only when no embedding exists.
    """
    pred, match = pairs.predicted, pairs.match
    position = 0
    for reference_call in pairs.reference:
        while position < len(pred) and not match(pred[position], reference_call):
            position += 1
        if position == len(pred):
            return 0.0
        position += 1
    return 1.0


def any_order_match(pairs: Pairing) -> float:
    """``trajectory_any_order_match`` of a pairing."""
    return _flag(pairs.matched == len(pairs.reference))


def precision(pairs: Pairing) -> float:
    """``trajectory_precision`` of a pairing."""
    if not pairs.predicted:
        return _flag(not pairs.reference)
    return pairs.matched / len(pairs.predicted)


def recall(pairs: Pairing) -> float:
    """``trajectory_recall`` of a pairing."""
    if not pairs.reference:
        return 1.0
    return pairs.matched / len(pairs.reference)


def subset_match(pairs: Pairing) -> float:
    """``subset`` of a pairing."""
    return _flag(pairs.matched == len(pairs.predicted))


def unordered_match(pairs: Pairing) -> float:
    """``unordered`` of a pairing."""
    return _flag(pairs.matched == len(pairs.predicted) == len(pairs.reference))


def trajectory_exact_match(
    predicted: TrajectoryLike,
    reference: TrajectoryLike,
    *,
    arguments: ArgumentMode = "exact",
    tool_arguments: Mapping[str, ArgumentMode] | None = None,
) -> float:
    """1.0 if both have the same length and call i matches call i for every i; both empty: 1.0."""
    return exact_match(_pairing(predicted, reference, arguments, tool_arguments))


def trajectory_in_order_match(
    predicted: TrajectoryLike,
    reference: TrajectoryLike,
    *,
    arguments: ArgumentMode = "exact",
    tool_arguments: Mapping[str, ArgumentMode] | None = None,
) -> float:
    """1.0 if the reference is a subsequence of the prediction (extras allowed); empty reference: 1.0
    (see ``in_order_match`` for why greedy matching is exact)."""
    return in_order_match(_pairing(predicted, reference, arguments, tool_arguments))


def trajectory_any_order_match(
    predicted: TrajectoryLike,
    reference: TrajectoryLike,
    *,
    arguments: ArgumentMode = "exact",
    tool_arguments: Mapping[str, ArgumentMode] | None = None,
) -> float:
    """1.0 if every reference call pairs with a distinct predicted call, order ignored; empty
    reference: 1.0."""
    return any_order_match(_pairing(predicted, reference, arguments, tool_arguments))


def trajectory_precision(
    predicted: TrajectoryLike,
    reference: TrajectoryLike,
    *,
    arguments: ArgumentMode = "exact",
    tool_arguments: Mapping[str, ArgumentMode] | None = None,
) -> float:
    """Matched pairs / len(predicted); empty prediction: 1.0 if the reference is empty, else 0.0."""
    return precision(_pairing(predicted, reference, arguments, tool_arguments))


def trajectory_recall(
    predicted: TrajectoryLike,
    reference: TrajectoryLike,
    *,
    arguments: ArgumentMode = "exact",
    tool_arguments: Mapping[str, ArgumentMode] | None = None,
) -> float:
    """Matched pairs / len(reference); empty reference: 1.0."""
    return recall(_pairing(predicted, reference, arguments, tool_arguments))


def trajectory_single_tool_use(predicted: TrajectoryLike, tool_name: str) -> float:
    """1.0 if any predicted call is named ``tool_name``; needs no reference."""
    return _flag(any(call.name == tool_name for call in parse_trajectory(predicted)))


strict = trajectory_exact_match
superset = trajectory_any_order_match


def subset(
    predicted: TrajectoryLike,
    reference: TrajectoryLike,
    *,
    arguments: ArgumentMode = "exact",
    tool_arguments: Mapping[str, ArgumentMode] | None = None,
) -> float:
    """1.0 if every predicted call pairs with a distinct reference call; an empty prediction passes."""
    return subset_match(_pairing(predicted, reference, arguments, tool_arguments))


def unordered(
    predicted: TrajectoryLike,
    reference: TrajectoryLike,
    *,
    arguments: ArgumentMode = "exact",
    tool_arguments: Mapping[str, ArgumentMode] | None = None,
) -> float:
    """1.0 if the calls pair up one-to-one with none left over on either side (multiset equality)."""
    return unordered_match(_pairing(predicted, reference, arguments, tool_arguments))
