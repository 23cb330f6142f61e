"""The scorer's name-only fast path (name_only.py) against the metrics' definition.

`score_runs` counts the tool names of a task whose reference matches by name alone; `score_run`
builds the calls and the maximum matching for every run. Both must give every run the same
outcome (values, their order, the error text), on random stored trajectories and references:
empty ones, repeated names, not-captured arguments, argument modes, malformed stored calls.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agenttrail.collector.runs import ABSENT, NOT_CAPTURED, ToolCall
from agenttrail.evaluators.metrics import parse_metric
from agenttrail.evaluators.scoring.metric_pool import RunToScore, score_run, score_runs, task_specs
from agenttrail.evaluators.scoring.name_only import count_names, name_only_metrics
from agenttrail.evaluators.scoring.references import ReferenceEntry

# Mostly two names, so runs repeat names and pair them up in more than one way.
NAMES = st.sampled_from(["search"] * 4 + ["fetch"] * 3 + ["book", "Search", ""])
INPUTS = st.one_of(
    st.just(ABSENT),
    st.just(None),
    st.just(NOT_CAPTURED),
    st.fixed_dictionaries({}, optional={"q": st.sampled_from([1, 1.0, "x"]), "n": st.just(2)}),
)
MODES = st.sampled_from(["exact", "ignore", "subset", "superset", "keys:q"])


@st.composite
def metric_spec(draw: st.DrawFn) -> str:
    name = draw(
        st.sampled_from(
            [
                "trajectory_exact_match",
                "trajectory_in_order_match",
                "trajectory_any_order_match",
                "trajectory_precision",
                "trajectory_recall",
                "strict",
                "superset",
                "subset",
                "unordered",
            ]
            * 3
            + ["latency", "failure", "tool_correctness", "trajectory_single_tool_use:tool_name=search"]
        )
    )
    if ":" in name or name in ("latency", "failure", "tool_correctness"):
        return name
    params = []
    if draw(st.booleans()):
        params.append(f"arguments={draw(MODES)}")
    if draw(st.booleans()):
        params.append(f"tool_arguments.{draw(NAMES.filter(bool))}={draw(MODES)}")
    return f"{name}:{','.join(params)}" if params else name


@st.composite
def stored_calls(draw: st.DrawFn) -> str:
    """A run's `trajectories.ToolCalls`: mostly the stored form, sometimes what the scorer must refuse."""
    kind = draw(
        st.sampled_from(["stored"] * 6 + ["not json", "object", "not objects", "no name", "odd name"])
    )
    calls: list[Any] = [
        ToolCall(
            draw(NAMES), draw(INPUTS), draw(st.sampled_from([ABSENT, "ok", None])), status=status
        ).to_json()
        for status in draw(st.lists(st.sampled_from(["ok", "error"]), max_size=6))
    ]
    if kind == "not json":
        return "[{"
    if kind == "object":
        return json.dumps({"name": "search"})
    if kind == "not objects":
        calls.append(["search"])
    if kind == "no name":
        calls.append({"input": {}})
    if kind == "odd name":
        calls.append({"name": draw(st.sampled_from([5, 1.5, None, True]))})
    return json.dumps(calls)


@st.composite
def entries(draw: st.DrawFn) -> ReferenceEntry:
    """A task's reference, mostly of wildcard inputs (the fast path's case)."""
    inputs = st.sampled_from([ABSENT, None, NOT_CAPTURED]) if draw(st.integers(0, 3)) else INPUTS
    reference = tuple(
        ToolCall(draw(NAMES.filter(bool)), draw(inputs)) for _ in range(draw(st.integers(0, 5)))
    )
    metrics = tuple(draw(st.lists(metric_spec(), max_size=4)))
    options = {"arguments": draw(MODES)} if draw(st.booleans()) else {}
    return ReferenceEntry(task="refund", reference=reference, metrics=metrics, options=options)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    entry=st.one_of(st.none(), entries(), entries(), entries()),
    runs=st.lists(
        st.builds(
            RunToScore,
            stored_calls(),
            st.sampled_from(["refund", "", "other"]),
            st.sampled_from([0.0, 1.25]),
            st.booleans(),
        ),
        min_size=1,
        max_size=8,
    ),
    defaults=st.lists(metric_spec(), max_size=4),
)
def test_the_fast_path_gives_every_run_what_the_metrics_give(
    entry: ReferenceEntry | None, runs: list[RunToScore], defaults: list[str]
) -> None:
    references = {} if entry is None else {"refund": entry}
    specs = task_specs(entry, defaults) if entry is not None else []
    if entry is not None and not isinstance(specs, Exception):
        event("name-only" if name_only_metrics(entry.reference, specs) is not None else "general")
    # Malformed stored calls are an outcome ("cannot score: ..."), never an exception: one such
    # run must not fail its whole batch again and again.
    expected = [
        score_run(run, references.get(run.task), specs if run.task in references else []) for run in runs
    ]
    got = score_runs(runs, references, defaults)
    assert got == expected
    # The same values in the same order: the scores' rows are built from the dict's items.
    assert [list(o) if isinstance(o, dict) else o for o in got] == [
        list(o) if isinstance(o, dict) else o for o in expected
    ]


def test_which_references_match_by_name_alone() -> None:
    wildcard = (ToolCall("search"), ToolCall("fetch", None))
    pairwise = [parse_metric("trajectory_precision"), parse_metric("trajectory_recall")]
    assert name_only_metrics(wildcard, pairwise) == tuple(pairwise)
    with_input = (ToolCall("search", {"q": 1}), ToolCall("fetch"))
    assert name_only_metrics(with_input, pairwise) is None
    ignored = [parse_metric("trajectory_precision:tool_arguments.search=ignore")]
    assert name_only_metrics(with_input, ignored) == tuple(ignored)
    assert name_only_metrics(wildcard, [parse_metric("tool_correctness")]) is None
    assert name_only_metrics(wildcard, pairwise + pairwise[:1]) is None  # asked twice: an error


def test_duplicates_count_on_the_fast_path() -> None:
    """spec/metrics.md: predicted [A, A] against reference [A] has precision 0.5 and recall 1.0."""
    entry = ReferenceEntry(
        task="refund",
        reference=(ToolCall("search"), ToolCall("search"), ToolCall("fetch")),
        metrics=("trajectory_precision", "trajectory_recall", "trajectory_in_order_match", "unordered"),
    )
    calls = json.dumps(
        [ToolCall(name, {"q": 1}).to_json() for name in ("fetch", "search", "search", "search")]
    )
    run = RunToScore(calls, "refund", 1.5, False)
    expected = {
        "trajectory_precision": 0.75,
        "trajectory_recall": 1.0,
        "trajectory_in_order_match": 0.0,
        "unordered": 0.0,
        "latency": 1.5,
        "failure": 0.0,
    }
    assert name_only_metrics(entry.reference, task_specs(entry, [])) is not None  # type: ignore[arg-type]
    assert score_runs([run, run], {"refund": entry}, []) == [expected, expected]
    assert score_run(run, entry, task_specs(entry, [])) == expected


def test_empty_trajectories_on_the_fast_path() -> None:
    """Both empty: every metric 1; an empty prediction against a reference: precision 0, subset 1."""
    metrics = ("trajectory_precision", "trajectory_recall", "strict", "subset", "superset")
    empty = ReferenceEntry(task="refund", reference=(), metrics=metrics)
    one = ReferenceEntry(task="refund", reference=(ToolCall("search"),), metrics=metrics)
    run = RunToScore("[]", "refund", 0.5, True)
    both = score_runs([run], {"refund": empty}, [])
    assert both == [dict.fromkeys(metrics, 1.0) | {"latency": 0.5, "failure": 1.0}]
    against_one = score_runs([run], {"refund": one}, [])
    assert against_one == [
        {
            "trajectory_precision": 0.0,
            "trajectory_recall": 0.0,
            "strict": 0.0,
            "subset": 1.0,
            "superset": 0.0,
            "latency": 0.5,
            "failure": 1.0,
        }
    ]
    assert [both[0], against_one[0]] == [
        score_run(run, entry, task_specs(entry, [])) for entry in (empty, one)
    ]


def test_counts_of_repeated_and_reordered_names() -> None:
    counts = count_names(("a", "b", "a"), ("a", "a"))
    assert (counts.exact, counts.in_order, counts.matched) == (False, True, 2)
    counts = count_names(("b", "a"), ("a", "b"))
    assert (counts.exact, counts.in_order, counts.matched) == (False, False, 2)
    assert count_names((), ()) == (True, True, 0, 0, 0)
