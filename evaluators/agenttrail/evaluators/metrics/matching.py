"""Whether a predicted call matches a reference call, and how many one-to-one pairs two lists allow.

Names must be equal; the inputs are then compared by an argument mode:

========================  ====================================================================
``"exact"`` (default)     canonical JSON of both inputs is equal
``"ignore"``              always
``"subset"``              every key/value of the predicted input is in the reference input
``"superset"``            every key/value of the reference input is in the predicted input
``["a.b", "c"]``          the listed dotted (nested) keys are equal
========================  ====================================================================

>>> A = ToolCall("search", {"q": "x", "opts": {"k": 1}})
>>> calls_match(A, ToolCall("search", {"q": "x", "opts": {"k": 1.0}}))
True
>>> calls_match(A, ToolCall("search", {"q": "x", "opts": {"k": True}}))
False
>>> calls_match(ToolCall("search", {"opts": {}}), A, "subset")
True
>>> calls_match(A, ToolCall("search", {"q": "y", "opts": {"k": 1}}), ["opts.k"])
True
>>> calls_match(A, ToolCall("search", None))  # a null reference input is a wildcard
True

Rules where the spec is open:

- Outputs take no part in trajectory matching; only tool correctness compares them.
- A predicted input that is absent or null counts as ``{}`` (a call made without arguments); only
  a *reference* input that is absent or null is a wildcard.
- A predicted input that was ``NOT_CAPTURED`` is not ``{}``: it matches a same-named wildcard
  reference, and any reference in mode ``ignore``; comparing it in any other mode raises
  ``NotComputable``, which the metric catalogue reports as a missing value with its reason.
- Subset/superset recurse into nested objects; lists and scalars inside them compare exactly.
- Key lists: a key missing from both inputs counts as equal, missing from one only does not (a
  null value is present). Keys cannot themselves contain dots. An empty list is rejected: it would
  compare nothing, which is what ``"ignore"`` says.
- Per-tool overrides (``tool_arguments={"search": "subset"}``) replace the default mode for calls
  of that tool.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeAlias, TypeVar

from agenttrail.collector.errors import AgentTrailError
from agenttrail.evaluators.metrics.calls import ABSENT, NOT_CAPTURED, ToolCall

NamedMode: TypeAlias = Literal["exact", "ignore", "subset", "superset"]
ArgumentMode: TypeAlias = NamedMode | list[str] | tuple[str, ...]
"""How inputs are compared: a named mode, or a list of dotted keys that must be equal."""

Matcher: TypeAlias = Callable[[ToolCall, ToolCall], bool]
"""``match(predicted, reference)``: whether the predicted call matches the reference call."""

_InputPredicate: TypeAlias = Callable[[dict[str, Any], dict[str, Any]], bool]

L = TypeVar("L")
R = TypeVar("R")


class NotComputable(AgentTrailError, ValueError):
    """A metric cannot be computed for this run; the message says why (never scored as 0)."""


def not_captured(name: str) -> NotComputable:
    return NotComputable(
        f"the arguments of predicted call {name!r} were not captured; they can only be matched with "
        "arguments=ignore or a reference call without input (turn on argument capture to compare them)"
    )


def canonical_json(value: object) -> str:
    """Keys sorted, no whitespace, integral floats written as integers (1.0 -> 1), ints exact.

    >>> canonical_json({"b": [1.0, True], "a": 2**63 + 1})
    '{"a":9223372036854775809,"b":[1,true]}'
    """
    return json.dumps(
        _canonical(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def _canonical(value: object) -> object:
    # bool is an int subclass and must stay true/false; integral floats become exact ints so that
    # 1 == 1.0 while 2**63 + 1 stays apart from the float 2**63.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _canonical(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(item) for item in value]
    return value


def json_equal(a: object, b: object) -> bool:
    """Equality of JSON values by their canonical JSON."""
    return canonical_json(a) == canonical_json(b)


Equal: TypeAlias = Callable[[object, object], bool]


def memo_json_equal() -> Equal:
    """``json_equal`` that renders each value's canonical JSON once, for comparing the same calls
    many times (one run's metrics: the matching compares every same-named pair, and five metrics
    compare the same inputs). It keeps every value it saw alive, so that an id cannot be reused for
    another value, and must not outlive the values it compares unchanged: one run's calls, which
    ``parse_trajectory`` copies."""
    seen: dict[int, tuple[object, str]] = {}

    def canonical(value: object) -> str:
        entry = seen.get(id(value))
        if entry is not None and entry[0] is value:
            return entry[1]
        text = canonical_json(value)
        seen[id(value)] = (value, text)
        return text

    return lambda a, b: canonical(a) == canonical(b)


def _contains(small: object, big: object, equal: Equal = json_equal) -> bool:
    """Every key/value of ``small`` is in ``big``, recursing into objects; other values equal."""
    if isinstance(small, dict) and isinstance(big, dict):
        return all(key in big and _contains(item, big[key], equal) for key, item in small.items())
    return equal(small, big)


def _lookup(obj: dict[str, Any], path: tuple[str, ...]) -> object:
    value: object = obj
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return ABSENT
        value = value[key]
    return value


def _same_at(
    predicted: dict[str, Any], reference: dict[str, Any], path: tuple[str, ...], equal: Equal
) -> bool:
    a, b = _lookup(predicted, path), _lookup(reference, path)
    if a is ABSENT or b is ABSENT:
        return a is b
    return equal(a, b)


def _input_predicate(mode: ArgumentMode, where: str, equal: Equal) -> _InputPredicate:
    if mode == "exact":
        return equal
    if mode == "ignore":
        return lambda predicted, reference: True
    if mode == "subset":
        return lambda predicted, reference: _contains(predicted, reference, equal)
    if mode == "superset":
        return lambda predicted, reference: _contains(reference, predicted, equal)
    if (
        isinstance(mode, list | tuple)
        and mode
        and all(isinstance(key, str) and all(key.split(".")) for key in mode)
    ):
        paths = [tuple(key.split(".")) for key in mode]
        return lambda predicted, reference: all(_same_at(predicted, reference, path, equal) for path in paths)
    raise ValueError(
        f"{where}: expected 'exact', 'ignore', 'subset', 'superset' or a non-empty list of dotted keys, "
        f"got {mode!r}"
    )


def call_matcher(
    arguments: ArgumentMode = "exact",
    tool_arguments: Mapping[str, ArgumentMode] | None = None,
    *,
    equal: Equal = json_equal,
) -> Matcher:
    """Build ``match(predicted, reference)`` once; a bad mode raises ValueError naming it.
    ``equal`` compares JSON values (``memo_json_equal()`` for one run's calls compared often)."""
    default = _input_predicate(arguments, "arguments", equal)
    overrides = {
        tool: _input_predicate(mode, f"tool_arguments[{tool!r}]", equal)
        for tool, mode in (tool_arguments or {}).items()
    }
    ignoring = {tool for tool, mode in (tool_arguments or {}).items() if mode == "ignore"}
    ignore_default = arguments == "ignore"

    def match(predicted: ToolCall, reference: ToolCall) -> bool:
        if predicted.name != reference.name:
            return False
        if not isinstance(reference.input, dict):
            return True  # absent or null: a wildcard (a not-captured reference says no more)
        if predicted.input is NOT_CAPTURED:
            if reference.name in ignoring or (ignore_default and reference.name not in overrides):
                return True
            raise not_captured(predicted.name)
        predicted_input = predicted.input if isinstance(predicted.input, dict) else {}  # absent, null
        return overrides.get(reference.name, default)(predicted_input, reference.input)

    return match


def calls_match(predicted: ToolCall, reference: ToolCall, mode: ArgumentMode = "exact") -> bool:
    """Whether one predicted call matches one reference call under an argument mode."""
    return call_matcher(mode)(predicted, reference)


def maximum_matching(left: Sequence[L], right: Sequence[R], edge: Callable[[L, R], bool]) -> int:
    """The number of pairs in a maximum one-to-one matching (never first-fit).

    Kuhn's augmenting paths, searched breadth-first so long trajectories cannot hit the recursion
    limit; O(V * E) is fine for trajectories.

    >>> maximum_matching("ab", "ba", lambda l, r: l == r or r == "b")
    2
    """
    adjacency = [[j for j, r in enumerate(right) if edge(item, r)] for item in left]
    left_of: list[int | None] = [None] * len(right)  # the left item each right item is paired with
    right_of: list[int | None] = [None] * len(left)
    size = 0
    for start in range(len(left)):
        reached_from: dict[int, int] = {}  # right item -> the left item the search reached it from
        queue = deque([start])
        free: int | None = None
        while queue and free is None:
            i = queue.popleft()
            for j in adjacency[i]:
                if j in reached_from:
                    continue
                reached_from[j] = i
                owner = left_of[j]
                if owner is None:
                    free = j
                    break
                queue.append(owner)
        if free is None:
            continue  # no augmenting path from this item now means none later either
        # Flip the path that ends at the free right item: every left item on it moves one step.
        right_item: int | None = free
        while right_item is not None:
            i = reached_from[right_item]
            previous = right_of[i]
            left_of[right_item], right_of[i] = i, right_item
            right_item = previous
        size += 1
    return size
