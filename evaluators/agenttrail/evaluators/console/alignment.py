"""A run's tool calls set against its reference, call by call, as the Run page shows them.

Uses the metrics' own matcher (argument modes from the reference's options), so a row the
page calls "matched" is a pair the trajectory metrics count:

- ``matched``: in the longest in-order sequence of matching pairs;
- ``out_of_order``: matches a reference call, but outside that sequence;
- ``wrong_arguments``: same tool as a reference call left over, arguments that do not match;
- ``extra``: a call the reference does not have; ``missing``: a reference call never made.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agenttrail.evaluators.metrics import ABSENT, ToolCall
from agenttrail.evaluators.metrics.matching import Matcher, call_matcher
from agenttrail.evaluators.scoring.references import ReferenceEntry

KINDS = ("matched", "out_of_order", "wrong_arguments", "extra", "missing")


@dataclass(frozen=True, slots=True)
class Step:
    kind: str
    predicted: int | None  # index into the run's calls
    reference: int | None  # index into the reference's calls
    differing_keys: tuple[str, ...] = ()  # wrong_arguments: the argument keys that differ


def matcher_for(entry: ReferenceEntry, default_metrics: Sequence[str]) -> Matcher:
    """The argument modes the task's trajectory metrics use (the first metric that takes them)."""
    for configured in entry.configured_metrics(default_metrics):
        if "arguments" in configured.params:
            return call_matcher(configured.params["arguments"], configured.params.get("tool_arguments"))
    return call_matcher()


def _in_order_pairs(
    predicted: Sequence[ToolCall], reference: Sequence[ToolCall], match: Matcher
) -> list[tuple[int, int]]:
    """Longest common subsequence under `match`, as (predicted, reference) index pairs."""
    n, m = len(predicted), len(reference)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            if match(predicted[i], reference[j]):
                table[i][j] = table[i + 1][j + 1] + 1
            else:
                table[i][j] = max(table[i + 1][j], table[i][j + 1])
    pairs: list[tuple[int, int]] = []
    i = j = 0
    while i < n and j < m:
        if match(predicted[i], reference[j]) and table[i][j] == table[i + 1][j + 1] + 1:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def _differing_keys(predicted: ToolCall, reference: ToolCall) -> tuple[str, ...]:
    mine = predicted.input if isinstance(predicted.input, dict) else {}
    theirs = reference.input if isinstance(reference.input, dict) else {}
    return tuple(
        sorted(key for key in set(mine) | set(theirs) if mine.get(key, ABSENT) != theirs.get(key, ABSENT))
    )


def align(predicted: Sequence[ToolCall], reference: Sequence[ToolCall], match: Matcher) -> list[Step]:
    """Every predicted and every reference call exactly once, in the run's order; a missing
    reference call sits after the run's call paired with the reference call before it."""
    pairs = _in_order_pairs(predicted, reference, match)
    steps: dict[int, Step] = {i: Step("matched", i, j) for i, j in pairs}
    free_reference = [j for j in range(len(reference)) if j not in {j for _, j in pairs}]
    for kind in ("out_of_order", "wrong_arguments"):
        for i in range(len(predicted)):
            if i in steps:
                continue
            for j in free_reference:
                same = (
                    match(predicted[i], reference[j])
                    if kind == "out_of_order"
                    else predicted[i].name == reference[j].name
                )
                if same:
                    keys = _differing_keys(predicted[i], reference[j]) if kind == "wrong_arguments" else ()
                    steps[i] = Step(kind, i, j, keys)
                    free_reference.remove(j)
                    break
    for i in range(len(predicted)):
        steps.setdefault(i, Step("extra", i, None))
    paired_at = {step.reference: step.predicted for step in steps.values() if step.reference is not None}
    rows: list[tuple[tuple[int, int, int], Step]] = [((i, 0, 0), step) for i, step in steps.items()]
    for j in free_reference:
        before = [paired_at[k] for k in range(j) if k in paired_at]
        anchor = max((p for p in before if p is not None), default=-1)
        rows.append(((anchor, 1, j), Step("missing", None, j)))
    return [step for _, step in sorted(rows, key=lambda row: row[0])]


def call_view(call: ToolCall) -> dict[str, Any]:
    """A call as the template shows it: name and input (None when absent)."""
    return {"name": call.name, "input": None if call.input is ABSENT else call.input}
