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

from collections.abc import Mapping

from agenttrail.evaluators.metrics.calls import ToolCall, TrajectoryLike, parse_trajectory
from agenttrail.evaluators.metrics.matching import ArgumentMode, Matcher, call_matcher, maximum_matching


def _prepare(
    predicted: TrajectoryLike,
    reference: TrajectoryLike,
    arguments: ArgumentMode,
    tool_arguments: Mapping[str, ArgumentMode] | None,
) -> tuple[list[ToolCall], list[ToolCall], Matcher]:
    match = call_matcher(arguments, tool_arguments)
    return parse_trajectory(predicted), parse_trajectory(reference), match


def _flag(holds: bool) -> float:
    return 1.0 if holds else 0.0


def trajectory_exact_match(
    predicted: TrajectoryLike,
    reference: TrajectoryLike,
    *,
    arguments: ArgumentMode = "exact",
    tool_arguments: Mapping[str, ArgumentMode] | None = None,
) -> float:
    """1.0 if both have the same length and call i matches call i for every i; both empty: 1.0."""
    pred, ref, match = _prepare(predicted, reference, arguments, tool_arguments)
    return _flag(len(pred) == len(ref) and all(map(match, pred, ref)))


def trajectory_in_order_match(
    predicted: TrajectoryLike,
    reference: TrajectoryLike,
    *,
    arguments: ArgumentMode = "exact",
    tool_arguments: Mapping[str, ArgumentMode] | None = None,
) -> float:
    """1.0 if the reference is a subsequence of the prediction (extras allowed); empty reference: 1.0.

    Greedy earliest matching is exact here for any per-pair predicate, including subset, superset
    and wildcards: if some embedding puts reference call j at predicted index e_j, greedy puts it at
    g_j <= e_j by induction (e_j > e_(j-1) >= g_(j-1) and e_j matches, so the first match after
    g_(j-1) is no later than e_j), so greedy fails only when no embedding exists.
    """
    pred, ref, match = _prepare(predicted, reference, arguments, tool_arguments)
    position = 0
    for reference_call in ref:
        while position < len(pred) and not match(pred[position], reference_call):
            position += 1
        if position == len(pred):
            return 0.0
        position += 1
    return 1.0


def _matched_pairs(
    predicted: TrajectoryLike,
    reference: TrajectoryLike,
    arguments: ArgumentMode,
    tool_arguments: Mapping[str, ArgumentMode] | None,
) -> tuple[int, int, int]:
    """(matched pairs, len(predicted), len(reference)) under a maximum one-to-one matching."""
    pred, ref, match = _prepare(predicted, reference, arguments, tool_arguments)
    return maximum_matching(pred, ref, match), len(pred), len(ref)


def trajectory_any_order_match(
    predicted: TrajectoryLike,
    reference: TrajectoryLike,
    *,
    arguments: ArgumentMode = "exact",
    tool_arguments: Mapping[str, ArgumentMode] | None = None,
) -> float:
    """1.0 if every reference call pairs with a distinct predicted call, order ignored; empty
    reference: 1.0."""
    matched, _, n_reference = _matched_pairs(predicted, reference, arguments, tool_arguments)
    return _flag(matched == n_reference)


def trajectory_precision(
    predicted: TrajectoryLike,
    reference: TrajectoryLike,
    *,
    arguments: ArgumentMode = "exact",
    tool_arguments: Mapping[str, ArgumentMode] | None = None,
) -> float:
    """Matched pairs / len(predicted); empty prediction: 1.0 if the reference is empty, else 0.0."""
    matched, n_predicted, n_reference = _matched_pairs(predicted, reference, arguments, tool_arguments)
    if n_predicted == 0:
        return _flag(n_reference == 0)
    return matched / n_predicted


def trajectory_recall(
    predicted: TrajectoryLike,
    reference: TrajectoryLike,
    *,
    arguments: ArgumentMode = "exact",
    tool_arguments: Mapping[str, ArgumentMode] | None = None,
) -> float:
    """Matched pairs / len(reference); empty reference: 1.0."""
    matched, _, n_reference = _matched_pairs(predicted, reference, arguments, tool_arguments)
    if n_reference == 0:
        return 1.0
    return matched / n_reference


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
    matched, n_predicted, _ = _matched_pairs(predicted, reference, arguments, tool_arguments)
    return _flag(matched == n_predicted)


def unordered(
    predicted: TrajectoryLike,
    reference: TrajectoryLike,
    *,
    arguments: ArgumentMode = "exact",
    tool_arguments: Mapping[str, ArgumentMode] | None = None,
) -> float:
    """1.0 if the calls pair up one-to-one with none left over on either side (multiset equality)."""
    matched, n_predicted, n_reference = _matched_pairs(predicted, reference, arguments, tool_arguments)
    return _flag(matched == n_predicted == n_reference)
