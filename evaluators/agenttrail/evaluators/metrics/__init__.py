"""Deterministic trajectory and tool metrics: pure functions over tool-call trajectories.

The semantics are those of ``shared/spec/metrics.md``; each module documents its metrics with the
spec's examples and the rules it had to decide where the spec is open.
"""

from agenttrail.evaluators.metrics.aggregation import Aggregate, aggregate
from agenttrail.evaluators.metrics.calls import (
    ABSENT,
    NOT_CAPTURED,
    Absent,
    ToolCall,
    TrajectoryFormatError,
    TrajectoryLike,
    parse_trajectory,
)
from agenttrail.evaluators.metrics.correctness import (
    ToolCorrectnessResult,
    ToolSelectionJudge,
    avg_score,
    multiply_score,
    tool_correctness,
)
from agenttrail.evaluators.metrics.matching import (
    ArgumentMode,
    NotComputable,
    call_matcher,
    calls_match,
    canonical_json,
    maximum_matching,
)
from agenttrail.evaluators.metrics.registry import (
    METRICS,
    ConfiguredMetric,
    MetricSpec,
    Param,
    compute_metrics,
    parse_metric,
)
from agenttrail.evaluators.metrics.trajectory import (
    strict,
    subset,
    superset,
    trajectory_any_order_match,
    trajectory_exact_match,
    trajectory_in_order_match,
    trajectory_precision,
    trajectory_recall,
    trajectory_single_tool_use,
    unordered,
)

__all__ = [
    "ABSENT",
    "METRICS",
    "NOT_CAPTURED",
    "Absent",
    "Aggregate",
    "ArgumentMode",
    "ConfiguredMetric",
    "MetricSpec",
    "NotComputable",
    "Param",
    "ToolCall",
    "ToolCorrectnessResult",
    "ToolSelectionJudge",
    "TrajectoryFormatError",
    "TrajectoryLike",
    "aggregate",
    "avg_score",
    "call_matcher",
    "calls_match",
    "canonical_json",
    "compute_metrics",
    "maximum_matching",
    "multiply_score",
    "parse_metric",
    "parse_trajectory",
    "strict",
    "subset",
    "superset",
    "tool_correctness",
    "trajectory_any_order_match",
    "trajectory_exact_match",
    "trajectory_in_order_match",
    "trajectory_precision",
    "trajectory_recall",
    "trajectory_single_tool_use",
    "unordered",
]
