"""The metric catalogue shared by the CLI and the online worker, and the metric-spec syntax.

A metric spec is ``NAME`` or ``NAME:KEY=VALUE,KEY=VALUE``::

    trajectory_single_tool_use:tool_name=search
    trajectory_exact_match:arguments=subset
    trajectory_precision:arguments=ignore,tool_arguments.search=subset
    trajectory_recall:arguments=keys:query|options.limit
    tool_correctness:threshold=0.7,should_consider_ordering=true,evaluation_params=input_parameters

Values:

- ``arguments``: ``exact`` | ``ignore`` | ``subset`` | ``superset`` | ``keys:K1|K2`` (dotted keys)
- ``tool_arguments.TOOL``: the same, overriding ``arguments`` for calls of TOOL; repeatable
- booleans: ``true`` / ``false``; numbers: decimal; ``evaluation_params``: ``|``-separated
- values cannot contain ``,``; keys and tool names cannot contain ``,``, ``=`` or ``|``

>>> compute_metrics([{"name": "search"}, {"name": "search"}], [{"name": "search"}],
...                 ["trajectory_precision", "trajectory_recall"], latency_s=1.5)
{'trajectory_precision': 0.5, 'trajectory_recall': 1.0, 'latency': 1.5, 'failure': None}

Each metric is reported under its name (``tool_correctness`` adds ``tool_correctness_success``),
so asking for one metric twice is an error. Metrics that need a reference are None when the run
has none: missing, never 0. So is a metric that would have to compare arguments the trace did not
capture (``NOT_CAPTURED``); pass ``reasons={}`` to learn why each missing metric is missing.
``latency`` and ``failure`` are always reported, None when not known.
``available_tools`` and the tool-selection judge are task data and judge configuration, not spec
parameters: use ``tool_correctness`` directly for them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias, cast

from agenttrail.evaluators.metrics import trajectory
from agenttrail.evaluators.metrics.calls import ToolCall, TrajectoryLike, parse_trajectory
from agenttrail.evaluators.metrics.correctness import tool_correctness
from agenttrail.evaluators.metrics.matching import (
    ArgumentMode,
    NamedMode,
    NotComputable,
    call_matcher,
    memo_json_equal,
)
from agenttrail.evaluators.metrics.trajectory import Pairing, PairwiseMetric


@dataclass(frozen=True, slots=True)
class RunData:
    """What one agent run gives the metrics: parsed trajectories and the root span's facts."""

    predicted: list[ToolCall]
    reference: list[ToolCall] | None
    latency_s: float | None
    failure: bool | None
    # The run's pairings by argument mode, and one canonical JSON per input for all of them: the
    # pairwise metrics of one run share their matcher and maximum matching.
    _pairings: dict[Hashable, Pairing] = field(default_factory=dict, compare=False, repr=False)
    _equal: Callable[[object, object], bool] = field(
        default_factory=memo_json_equal, compare=False, repr=False
    )

    def pairing(
        self, arguments: ArgumentMode = "exact", tool_arguments: Mapping[str, ArgumentMode] | None = None
    ) -> Pairing:
        """The run's predicted and reference calls under one argument mode (needs a reference)."""
        assert self.reference is not None  # compute_metrics only asks with a reference
        key = (
            _hashable(arguments),
            tuple(sorted((tool, _hashable(mode)) for tool, mode in (tool_arguments or {}).items())),
        )
        found = self._pairings.get(key)
        if found is None:
            match = call_matcher(arguments, tool_arguments, equal=self._equal)
            found = self._pairings[key] = Pairing(self.predicted, self.reference, match)
        return found


def _hashable(mode: ArgumentMode) -> Hashable:
    return tuple(mode) if isinstance(mode, list | tuple) else mode


Compute: TypeAlias = Callable[[RunData, Mapping[str, Any]], dict[str, float | None]]


@dataclass(frozen=True, slots=True)
class Param:
    """A metric parameter: its spelling, type as shown to users, default and parser.

    A parameter ``keyed_by`` KEY is set per key as ``NAME.KEY=VALUE`` and collects into a mapping.
    """

    name: str
    type: str
    default: Any
    parse: Callable[[str], Any]
    required: bool = False
    keyed_by: str | None = None

    @property
    def usage(self) -> str:
        key = f".{self.keyed_by}" if self.keyed_by else ""
        return f"{self.name}{key}=<{self.type}>"


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """A catalogue entry: the metric's parameters, whether it needs a reference, how to compute it."""

    name: str
    params: tuple[Param, ...]
    needs_reference: bool
    outputs: tuple[str, ...]
    compute: Compute

    @property
    def usage(self) -> str:
        """E.g. ``trajectory_single_tool_use:tool_name=<str>``."""
        if not self.params:
            return self.name
        return f"{self.name}:{','.join(param.usage for param in self.params)}"


@dataclass(frozen=True, slots=True)
class ConfiguredMetric:
    """A catalogue entry with every parameter resolved; build it with ``parse_metric``."""

    spec: MetricSpec
    params: Mapping[str, Any]


def _parse_mode(text: str) -> ArgumentMode:
    mode: ArgumentMode = (
        tuple(text.removeprefix("keys:").split("|")) if text.startswith("keys:") else cast(NamedMode, text)
    )
    try:
        call_matcher(mode)  # the one place that knows which modes are valid
    except ValueError:
        raise ValueError(
            f"expected exact, ignore, subset, superset or keys:K1|K2 (dotted keys), got {text!r}"
        ) from None
    return mode


def _parse_bool(text: str) -> bool:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise ValueError(f"expected true or false, got {text!r}")


def _parse_threshold(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number in [0, 1], got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"expected a number in [0, 1], got {text!r}")
    return value


def _parse_evaluation_params(text: str) -> tuple[str, ...]:
    names = tuple(text.split("|")) if text else ()
    unknown = set(names) - {"input_parameters", "output"}
    if unknown:
        raise ValueError(f"expected input_parameters and/or output joined by '|', got {text!r}")
    return names


def _parse_name(text: str) -> str:
    if not text:
        raise ValueError("expected a tool name")
    return text


_MODE = "exact|ignore|subset|superset|keys:K1|K2"
_ARGUMENT_PARAMS = (
    Param("arguments", _MODE, "exact", _parse_mode),
    Param("tool_arguments", _MODE, None, _parse_mode, keyed_by="TOOL"),
)
_BOOL = "true|false"


def _pairwise(name: str, metric: PairwiseMetric) -> MetricSpec:
    def compute(run: RunData, params: Mapping[str, Any]) -> dict[str, float | None]:
        return {name: metric(run.pairing(**params))}

    return MetricSpec(name, _ARGUMENT_PARAMS, needs_reference=True, outputs=(name,), compute=compute)


def _single_tool_use(run: RunData, params: Mapping[str, Any]) -> dict[str, float | None]:
    return {"trajectory_single_tool_use": trajectory.trajectory_single_tool_use(run.predicted, **params)}


def _tool_correctness(run: RunData, params: Mapping[str, Any]) -> dict[str, float | None]:
    assert run.reference is not None  # compute_metrics only calls it with a reference
    result = tool_correctness(run.reference, run.predicted, **params)
    return {"tool_correctness": result.score, "tool_correctness_success": 1.0 if result.success else 0.0}


def _latency(run: RunData, params: Mapping[str, Any]) -> dict[str, float | None]:
    return {"latency": run.latency_s}


def _failure(run: RunData, params: Mapping[str, Any]) -> dict[str, float | None]:
    return {"failure": None if run.failure is None else float(run.failure)}


METRICS: Mapping[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        _pairwise("trajectory_exact_match", trajectory.exact_match),
        _pairwise("trajectory_in_order_match", trajectory.in_order_match),
        _pairwise("trajectory_any_order_match", trajectory.any_order_match),
        _pairwise("trajectory_precision", trajectory.precision),
        _pairwise("trajectory_recall", trajectory.recall),
        MetricSpec(
            "trajectory_single_tool_use",
            (Param("tool_name", "str", None, _parse_name, required=True),),
            needs_reference=False,
            outputs=("trajectory_single_tool_use",),
            compute=_single_tool_use,
        ),
        MetricSpec(
            "tool_correctness",
            (
                Param("threshold", "float in [0, 1]", 0.5, _parse_threshold),
                Param("strict_mode", _BOOL, False, _parse_bool),
                Param("should_exact_match", _BOOL, False, _parse_bool),
                Param("should_consider_ordering", _BOOL, False, _parse_bool),
                Param(
                    "evaluation_params",
                    "input_parameters|output",
                    ("input_parameters", "output"),
                    _parse_evaluation_params,
                ),
            ),
            needs_reference=True,
            outputs=("tool_correctness", "tool_correctness_success"),
            compute=_tool_correctness,
        ),
        _pairwise("strict", trajectory.exact_match),
        _pairwise("superset", trajectory.any_order_match),
        _pairwise("subset", trajectory.subset_match),
        _pairwise("unordered", trajectory.unordered_match),
        MetricSpec("latency", (), needs_reference=False, outputs=("latency",), compute=_latency),
        MetricSpec("failure", (), needs_reference=False, outputs=("failure",), compute=_failure),
    )
}
"""Every metric by name, in the spec's order."""

_ALWAYS_REPORTED = ("latency", "failure")


def parse_metric(text: str) -> ConfiguredMetric:
    """Parse ``NAME[:KEY=VALUE,...]``; an unknown metric or parameter, or a bad value, raises
    ValueError naming what is valid."""
    name, _, rest = text.partition(":")
    name = name.strip()
    spec = METRICS.get(name)
    if spec is None:
        raise ValueError(f"unknown metric {name!r}; valid metrics: {', '.join(METRICS)}")
    by_name = {param.name: param for param in spec.params}
    values: dict[str, Any] = {param.name: param.default for param in spec.params}
    seen: set[str] = set()
    for item in rest.split(",") if rest.strip() else ():
        key, equals, raw = (part.strip() for part in item.partition("="))
        base, dot, sub_key = key.partition(".")
        param = by_name.get(base)
        if not equals or param is None or (param.keyed_by is None) == bool(dot) or (dot and not sub_key):
            valid = ", ".join(param.usage for param in spec.params) or "none"
            raise ValueError(f"{name}: unknown parameter {item.strip()!r}; valid parameters: {valid}")
        if key in seen:
            raise ValueError(f"{name}: parameter {key!r} given twice")
        seen.add(key)
        try:
            value = param.parse(raw)
        except ValueError as exc:
            raise ValueError(f"{name}: {key}: {exc}") from exc
        values[base] = {**(values[base] or {}), sub_key: value} if param.keyed_by else value
    missing = [param.name for param in spec.params if param.required and param.name not in seen]
    if missing:
        raise ValueError(f"{name}: missing required parameter {', '.join(missing)}; usage: {spec.usage}")
    return ConfiguredMetric(spec, values)


def compute_metrics(
    predicted: TrajectoryLike,
    reference: TrajectoryLike | None,
    specs: Iterable[str | ConfiguredMetric],
    *,
    latency_s: float | None = None,
    failure: bool | None = None,
    reasons: dict[str, str] | None = None,
) -> dict[str, float | None]:
    """Every requested metric of one run, plus ``latency`` and ``failure``.

    Specs may be strings or, for a worker that scores many runs, ``parse_metric`` results.
    ``reasons``, when given, receives why each requested metric that is None is missing.
    """
    metrics = [spec if isinstance(spec, ConfiguredMetric) else parse_metric(spec) for spec in specs]
    names = [metric.spec.name for metric in metrics]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"metrics asked for more than once: {', '.join(repeated)}")
    run = RunData(
        parse_trajectory(predicted),
        None if reference is None else parse_trajectory(reference),
        latency_s,
        failure,
    )
    always = [ConfiguredMetric(METRICS[name], {}) for name in _ALWAYS_REPORTED if name not in names]
    results: dict[str, float | None] = {}
    why: dict[str, str] = {}
    for metric in [*metrics, *always]:
        if metric.spec.needs_reference and run.reference is None:
            results.update(dict.fromkeys(metric.spec.outputs))
            why.update(dict.fromkeys(metric.spec.outputs, "the run has no reference trajectory"))
            continue
        try:
            results.update(metric.spec.compute(run, metric.params))
        except NotComputable as exc:
            results.update(dict.fromkeys(metric.spec.outputs))
            why.update(dict.fromkeys(metric.spec.outputs, str(exc)))
    if reasons is not None:
        reasons.update({name: text for name, text in why.items() if name in results})
    return results
