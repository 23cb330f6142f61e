"""The scorer's fast path for a task whose reference matches by tool name alone.

Where every reference call's input is a wildcard (not a JSON object), or its tool's argument mode
is `ignore`, `call_matcher` is name equality, and the Vertex-style metrics, their aliases,
latency and failure follow from five counts of the tool names: whether the names are equal,
whether the reference is a subsequence of the prediction (greedy, as `in_order_match`), the
maximum matching's size (with names alone, the multiset intersection's) and the two lengths.
Agents repeat their trajectories, so a batch counts each distinct sequence of names once; a run
then costs its calls' `json.loads` and a dict look-up instead of building `ToolCall`s and a
maximum matching (~35 us of serve's Python a run of 3 calls, asm23).

`metrics/` stays the definition: the names are read as `ToolCall.from_json` reads them, every
run whose stored calls `predicted_calls` might refuse goes the general way, and
tests/evaluators/scoring/test_name_only.py compares both on random trajectories and references.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from agenttrail.evaluators.metrics import ConfiguredMetric
from agenttrail.evaluators.metrics.calls import ToolCall

# Metrics whose value, under a name-only matching, follows from the counts.
_COUNTED = frozenset(
    (
        "trajectory_exact_match",
        "trajectory_in_order_match",
        "trajectory_any_order_match",
        "trajectory_precision",
        "trajectory_recall",
        "strict",
        "superset",
        "subset",
        "unordered",
        "latency",
        "failure",
    )
)
_PAIRWISE = _COUNTED - {"latency", "failure"}


class NameCounts(NamedTuple):
    """What the name-only metrics read of a predicted and a reference sequence of tool names."""

    exact: bool
    in_order: bool
    matched: int
    predicted: int
    reference: int


def name_only_metrics(
    reference: Sequence[ToolCall], specs: Sequence[ConfiguredMetric]
) -> tuple[ConfiguredMetric, ...] | None:
    """`specs` if the counts give every one of them exactly against `reference`, else None."""
    names = [metric.spec.name for metric in specs]
    if len(set(names)) != len(names) or not set(names) <= _COUNTED:
        return None  # asked twice is an error compute_metrics reports; other metrics need the calls
    if all(metric.spec.name not in _PAIRWISE or _by_name_alone(reference, metric.params) for metric in specs):
        return tuple(specs)
    return None


def _by_name_alone(reference: Sequence[ToolCall], params: Mapping[str, Any]) -> bool:
    """Whether `call_matcher` under these parameters is name equality for every reference call:
    its input is a wildcard (not an object), or its tool's argument mode is `ignore`."""
    overrides = params.get("tool_arguments") or {}
    return all(
        not isinstance(call.input, dict) or overrides.get(call.name, params.get("arguments")) == "ignore"
        for call in reference
    )


def stored_names(tool_calls: str) -> tuple[str, ...] | None:
    """The names of a run's stored calls as `predicted_calls` reads them, or None where it might
    refuse them (not JSON, not a list of objects that each have a name): those go the general way."""
    try:
        calls = json.loads(tool_calls)
    except ValueError:
        return None
    if type(calls) is not list or not all(type(call) is dict and "name" in call for call in calls):
        return None
    return tuple([str(call["name"]) for call in calls])


def count_names(predicted: Sequence[str], reference: Sequence[str]) -> NameCounts:
    """The counts of two name sequences (see the module's docstring)."""
    position = 0
    in_order = True
    for name in reference:
        while position < len(predicted) and predicted[position] != name:
            position += 1
        if position == len(predicted):
            in_order = False
            break
        position += 1
    matched = sum((Counter(predicted) & Counter(reference)).values())
    return NameCounts(tuple(predicted) == tuple(reference), in_order, matched, len(predicted), len(reference))


def outcome_from_counts(
    specs: Sequence[ConfiguredMetric], counts: NameCounts, latency_s: float, failed: bool
) -> dict[str, float | None]:
    """What `compute_metrics` gives a run with these counts (its dict, in its order)."""
    results: dict[str, float | None] = {}
    for metric in specs:
        name = metric.spec.name
        if name in ("trajectory_exact_match", "strict"):
            results[name] = 1.0 if counts.exact else 0.0
        elif name == "trajectory_in_order_match":
            results[name] = 1.0 if counts.in_order else 0.0
        elif name in ("trajectory_any_order_match", "superset"):
            results[name] = 1.0 if counts.matched == counts.reference else 0.0
        elif name == "trajectory_precision":
            if counts.predicted:
                results[name] = counts.matched / counts.predicted
            else:
                results[name] = 0.0 if counts.reference else 1.0
        elif name == "trajectory_recall":
            results[name] = counts.matched / counts.reference if counts.reference else 1.0
        elif name == "subset":
            results[name] = 1.0 if counts.matched == counts.predicted else 0.0
        elif name == "unordered":
            results[name] = 1.0 if counts.matched == counts.predicted == counts.reference else 0.0
        elif name == "latency":
            results[name] = latency_s
        else:  # failure
            results[name] = float(failed)
    results.setdefault("latency", latency_s)
    results.setdefault("failure", float(failed))
    return results
