"""The metric catalogue, the metric-spec syntax and compute_metrics."""

from __future__ import annotations

from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agenttrail.evaluators.metrics import (
    METRICS,
    ArgumentMode,
    ToolCall,
    compute_metrics,
    parse_metric,
    trajectory,
)
from agenttrail.evaluators.metrics.matching import NamedMode

from .strategies import REFERENCE_INPUTS, related_pair

A = ToolCall("search", {"q": "x"})
B = ToolCall("fetch", {"url": "u"})

SPEC_NAMES = [
    "trajectory_exact_match",
    "trajectory_in_order_match",
    "trajectory_any_order_match",
    "trajectory_precision",
    "trajectory_recall",
    "trajectory_single_tool_use",
    "tool_correctness",
    "strict",
    "superset",
    "subset",
    "unordered",
    "latency",
    "failure",
]


def test_catalogue_has_exactly_the_spec_names() -> None:
    """Every metric of the spec is in the catalogue, under its spec name, and nothing else."""
    assert list(METRICS) == SPEC_NAMES


def test_reference_needs() -> None:
    """Only single tool use, latency and failure do without a reference."""
    assert {name for name, spec in METRICS.items() if not spec.needs_reference} == {
        "trajectory_single_tool_use",
        "latency",
        "failure",
    }


def test_params_know_name_type_and_default() -> None:
    """Parameters describe themselves for the CLI."""
    assert METRICS["trajectory_precision"].usage == (
        "trajectory_precision:arguments=<exact|ignore|subset|superset|keys:K1|K2>,"
        "tool_arguments.TOOL=<exact|ignore|subset|superset|keys:K1|K2>"
    )
    threshold = METRICS["tool_correctness"].params[0]
    assert (threshold.name, threshold.type, threshold.default) == ("threshold", "float in [0, 1]", 0.5)


class TestParse:
    @pytest.mark.parametrize(
        ("text", "params"),
        [
            ("trajectory_single_tool_use:tool_name=search", {"tool_name": "search"}),
            ("trajectory_exact_match", {"arguments": "exact", "tool_arguments": None}),
            ("trajectory_exact_match:arguments=subset", {"arguments": "subset", "tool_arguments": None}),
            (
                "trajectory_precision:arguments=ignore,tool_arguments.search=subset",
                {"arguments": "ignore", "tool_arguments": {"search": "subset"}},
            ),
            (
                " trajectory_recall : arguments = keys:q|opts.limit , tool_arguments.a=keys:x,"
                "tool_arguments.b=exact",
                {"arguments": ("q", "opts.limit"), "tool_arguments": {"a": ("x",), "b": "exact"}},
            ),
            (
                "tool_correctness:threshold=0.7,should_consider_ordering=TRUE",
                {
                    "threshold": 0.7,
                    "strict_mode": False,
                    "should_exact_match": False,
                    "should_consider_ordering": True,
                    "evaluation_params": ("input_parameters", "output"),
                },
            ),
            (
                "tool_correctness:evaluation_params=output,strict_mode=true",
                {"evaluation_params": ("output",), "strict_mode": True},
            ),
            (
                "tool_correctness:threshold=0,strict_mode=False,evaluation_params=input_parameters|output",
                {"threshold": 0.0, "strict_mode": False, "evaluation_params": ("input_parameters", "output")},
            ),
            (
                "tool_correctness:threshold=1,should_exact_match=false,evaluation_params=input_parameters",
                {"threshold": 1.0, "should_exact_match": False, "evaluation_params": ("input_parameters",)},
            ),
            ("tool_correctness:evaluation_params=", {"evaluation_params": ()}),
            ("latency", {}),
            ("unordered:", {"arguments": "exact"}),
        ],
    )
    def test_valid(self, text: str, params: dict[str, Any]) -> None:
        """Specs parse into the named metric with defaults filled in and values typed."""
        metric = parse_metric(text)
        assert metric.spec.name == text.partition(":")[0].strip()
        assert dict(metric.params).items() >= params.items()

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            (
                "trajectory_match",
                r"unknown metric 'trajectory_match'; valid metrics: trajectory_exact_match, .*failure",
            ),
            (
                "trajectory_exact_match:mode=subset",
                r"unknown parameter 'mode=subset'; valid parameters: arguments=",
            ),
            ("trajectory_exact_match:arguments", r"unknown parameter 'arguments'"),
            ("trajectory_exact_match:tool_arguments=subset", r"unknown parameter 'tool_arguments=subset'"),
            ("trajectory_exact_match:tool_arguments.=subset", r"unknown parameter"),
            ("trajectory_exact_match:arguments.x=subset", r"unknown parameter"),
            ("latency:x=1", r"unknown parameter 'x=1'; valid parameters: none"),
            (
                "trajectory_exact_match:arguments=fuzzy",
                r"arguments: expected exact, ignore, subset, superset or keys",
            ),
            ("trajectory_exact_match:arguments=keys:", r"arguments: expected .*got 'keys:'"),
            ("trajectory_exact_match:arguments=keys:a..b", r"got 'keys:a..b'"),
            ("trajectory_exact_match:arguments=subset,arguments=exact", r"parameter 'arguments' given twice"),
            ("trajectory_exact_match:arguments=subset,", r"unknown parameter ''"),
            ("trajectory_single_tool_use", r"missing required parameter tool_name; usage: .*tool_name=<str>"),
            ("trajectory_single_tool_use:tool_name=", r"tool_name: expected a tool name"),
            (
                "tool_correctness:threshold=high",
                r"tool_correctness: threshold: expected a number in \[0, 1\]",
            ),
            ("tool_correctness:threshold=1.5", r"threshold: expected a number in \[0, 1\]"),
            ("tool_correctness:strict_mode=yes", r"strict_mode: expected true or false, got 'yes'"),
            ("tool_correctness:evaluation_params=context", r"evaluation_params: expected input_parameters"),
        ],
    )
    def test_errors(self, text: str, message: str) -> None:
        """A bad spec raises ValueError that names the metric, the parameter and what is valid."""
        with pytest.raises(ValueError, match=message):
            parse_metric(text)


class TestComputeMetrics:
    def test_without_reference(self) -> None:
        """Without a reference its metrics are None, the others computed, latency and failure always there."""
        results = compute_metrics(
            [A],
            None,
            ["trajectory_precision", "tool_correctness", "trajectory_single_tool_use:tool_name=search"],
            latency_s=2.5,
            failure=False,
        )
        assert results == {
            "trajectory_precision": None,
            "tool_correctness": None,
            "tool_correctness_success": None,
            "trajectory_single_tool_use": 1.0,
            "latency": 2.5,
            "failure": 0.0,
        }

    def test_reasons_say_the_reference_is_missing(self) -> None:
        """With reasons={}, each metric left None for want of a reference says so."""
        reasons: dict[str, str] = {}
        compute_metrics([A], None, ["trajectory_recall", "tool_correctness"], reasons=reasons)
        assert reasons == dict.fromkeys(
            ["trajectory_recall", "tool_correctness", "tool_correctness_success"],
            "the run has no reference trajectory",
        )

    def test_empty_reference_is_a_reference(self) -> None:
        """An empty reference list is computed against, unlike a missing one."""
        assert compute_metrics([], [], ["trajectory_exact_match"])["trajectory_exact_match"] == 1.0

    def test_latency_and_failure_unknown(self) -> None:
        """Without run facts, latency and failure are reported as None."""
        assert compute_metrics([A], [A], []) == {"latency": None, "failure": None}

    def test_failure_reported(self) -> None:
        """A failed run reports failure 1.0; asking for latency explicitly does not repeat it."""
        assert compute_metrics([], None, ["latency"], latency_s=0.1, failure=True) == {
            "latency": 0.1,
            "failure": 1.0,
        }

    def test_parameters_are_applied(self) -> None:
        """Spec parameters reach the metric."""
        predicted = [ToolCall("search", {"q": "x", "n": 1}), B]
        results = compute_metrics(
            predicted,
            [A, ToolCall("fetch", {"url": "v"})],
            [
                "trajectory_precision:arguments=superset",
                "trajectory_recall:arguments=superset,tool_arguments.fetch=ignore",
                "strict:arguments=keys:url",  # search has no url on either side: equal
            ],
        )
        assert results["trajectory_precision"] == 0.5
        assert results["trajectory_recall"] == 1.0
        assert results["strict"] == 0.0

    def test_tool_correctness_success(self) -> None:
        """tool_correctness reports its pass/fail beside its score; the reference is the expected side."""
        results = compute_metrics([A, A, B], [A, B], ["tool_correctness:threshold=0.9"])
        assert (results["tool_correctness"], results["tool_correctness_success"]) == (1.0, 1.0)
        results = compute_metrics([A], [A, B], ["tool_correctness:threshold=0.9"])
        assert (results["tool_correctness"], results["tool_correctness_success"]) == (0.5, 0.0)

    def test_preparsed_specs(self) -> None:
        """A worker may parse specs once and pass the results."""
        metric = parse_metric("trajectory_recall")
        assert (
            compute_metrics('[{"tool_name": "search", "tool_input": {"q": "x"}}]', [A, B], [metric])[
                "trajectory_recall"
            ]
            == 0.5
        )

    def test_every_metric_computes(self) -> None:
        """Each catalogue entry computes with its defaults (and a tool name where required)."""
        specs = [
            name if name != "trajectory_single_tool_use" else f"{name}:tool_name=search" for name in METRICS
        ]
        results = compute_metrics([A, B], [A, B], specs, latency_s=1.0, failure=False)
        assert set(results) == {*METRICS, "tool_correctness_success"}
        assert all(value == 1.0 for name, value in results.items() if name not in ("latency", "failure"))

    def test_duplicate_metric(self) -> None:
        """The same metric twice would clash on its output name and is refused."""
        with pytest.raises(ValueError, match="more than once: trajectory_single_tool_use"):
            compute_metrics(
                [A],
                None,
                ["trajectory_single_tool_use:tool_name=search", "trajectory_single_tool_use:tool_name=fetch"],
            )

    def test_spec_errors_before_trajectory_errors(self) -> None:
        """A bad spec is reported even when the trajectory is bad too."""
        with pytest.raises(ValueError, match="unknown metric"):
            compute_metrics("not json", None, ["nope"])


_PAIRWISE = [
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
_MODE_TEXT = st.sampled_from(["exact", "ignore", "subset", "superset", "keys:x", "keys:x.y|z"])


def _mode(text: str) -> ArgumentMode:
    return tuple(text.removeprefix("keys:").split("|")) if text.startswith("keys:") else cast(NamedMode, text)


@given(
    pair=related_pair(REFERENCE_INPUTS),
    modes=st.lists(
        st.tuples(_MODE_TEXT, st.none() | _MODE_TEXT), min_size=len(_PAIRWISE), max_size=len(_PAIRWISE)
    ),
)
@settings(max_examples=300, deadline=None)
def test_one_run_shares_its_pairings_without_mixing_modes(
    pair: tuple[list[ToolCall], list[ToolCall]], modes: list[tuple[str, str | None]]
) -> None:
    """compute_metrics computes one run's pairwise metrics from shared pairings (one matcher and
    one maximum matching per argument mode, canonical JSON rendered once per input): each value
    equals the metric's own function called alone, whatever modes the other metrics use."""
    predicted, reference = pair
    specs, expected = [], {}
    for name, (mode, search_mode) in zip(_PAIRWISE, modes, strict=True):
        text = f"{name}:arguments={mode}" + (f",tool_arguments.search={search_mode}" if search_mode else "")
        specs.append(text)
        overrides = {"search": _mode(search_mode)} if search_mode else None
        function = getattr(trajectory, name)
        expected[name] = function(predicted, reference, arguments=_mode(mode), tool_arguments=overrides)
    results = compute_metrics(predicted, reference, specs)
    assert {name: results[name] for name in _PAIRWISE} == expected
