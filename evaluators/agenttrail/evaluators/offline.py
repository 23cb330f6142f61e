"""Offline evaluation: score dataset rows with the metric catalogue and aggregate per metric.

The JSON report (``EvaluationReport.to_json``) is the contract of ``agenttrail evaluate --format json``::

    {"instances": [{"index": 0, "metrics": {"trajectory_recall": 1.0, "latency": 0.8, "failure": null},
                    "error": null}, ...],
     "aggregate": {"trajectory_recall": {"count": 9, "mean": 0.83, "std": 0.25}, ...}}

- Metric names are those of spec/metrics.md; every instance has every metric, in the same order.
- A metric that could not be computed for a row (no reference, latency not known) is null, and
  is left out of its aggregate (``count`` counts the computed values), never counted as 0.
- A bad row stays in ``instances`` at its index, with all metrics null and
  ``"error": {"field": ..., "message": ..., "line": ...}``; ``error`` is null for good rows.
- A row without a predicted trajectory is such an error (field ``predicted_trajectory``): there is
  nothing to score, and it is usually a misspelt column.
- ``mean`` and ``std`` (sample, n - 1) are null when ``count`` is 0.

Without metric specs, the five reference metrics of Vertex's six (exact, in-order and any-order
match, precision, recall) are computed when any row has a reference trajectory; the sixth,
single tool use, needs a ``tool_name``. ``latency`` and ``failure`` are always reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agenttrail.evaluators.datasets import DatasetRow, RowError
from agenttrail.evaluators.metrics import (
    Aggregate,
    ConfiguredMetric,
    aggregate,
    compute_metrics,
    parse_metric,
)

DEFAULT_METRICS: Final = (
    "trajectory_exact_match",
    "trajectory_in_order_match",
    "trajectory_any_order_match",
    "trajectory_precision",
    "trajectory_recall",
)
ALWAYS_REPORTED: Final = ("latency", "failure")


@dataclass(frozen=True, slots=True)
class InstanceResult:
    """One row's scores (None where not computable) and, for a bad row, why it was not scored."""

    index: int
    metrics: dict[str, float | None]
    error: RowError | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "metrics": dict(self.metrics),
            "error": None if self.error is None else self.error.to_json(),
        }


@dataclass(frozen=True, slots=True)
class EvaluationReport:
    """Per-row results in dataset order and one aggregate per reported metric name."""

    metric_names: tuple[str, ...]
    instances: tuple[InstanceResult, ...]
    aggregate: dict[str, Aggregate]

    @property
    def errors(self) -> list[RowError]:
        return [instance.error for instance in self.instances if instance.error is not None]

    def to_json(self) -> dict[str, Any]:
        """The documented JSON contract; aggregates carry exactly count, mean and std."""
        return {
            "instances": [instance.to_json() for instance in self.instances],
            "aggregate": {
                name: {"count": stats.count, "mean": stats.mean, "std": stats.std}
                for name, stats in self.aggregate.items()
            },
        }

    def to_table(self) -> str:
        """Per-row table, the bad rows' errors, then the aggregate table (count, missing, mean, std)."""
        # Imported here: the collector CLI module pulls in the store and receivers, which a
        # library user scoring rows in a notebook does not need.
        from agenttrail.collector.cli import format_table

        rows = [[instance.index, *map(_number, instance.metrics.values())] for instance in self.instances]
        parts = [format_table(["row", *self.metric_names], rows)]
        if self.errors:
            lines = [f"{len(self.errors)} bad row(s), not scored:", *(f"  {error}" for error in self.errors)]
            parts.append("\n".join(lines))
        aggregates = [
            [name, stats.count, stats.missing, _number(stats.mean), _number(stats.std)]
            for name, stats in self.aggregate.items()
        ]
        parts.append(format_table(["metric", "count", "missing", "mean", "std"], aggregates))
        return "\n\n".join(parts)


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def parse_metric_specs(specs: Iterable[str | ConfiguredMetric]) -> list[ConfiguredMetric]:
    """Parse every spec; ValueError (naming what is valid) for a bad one or a metric asked twice."""
    metrics = [spec if isinstance(spec, ConfiguredMetric) else parse_metric(spec) for spec in specs]
    names = [metric.spec.name for metric in metrics]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"metric asked for more than once: {', '.join(repeated)}")
    return metrics


def default_metrics(rows: Iterable[DatasetRow | RowError]) -> list[ConfiguredMetric]:
    """The reference metrics when some row has a reference, else none (latency/failure still come)."""
    if any(isinstance(row, DatasetRow) and row.reference is not None for row in rows):
        return parse_metric_specs(DEFAULT_METRICS)
    return []


def metric_names(metrics: Sequence[ConfiguredMetric]) -> tuple[str, ...]:
    """The names ``compute_metrics`` reports for these metrics, in its order."""
    names = [output for metric in metrics for output in metric.spec.outputs]
    return (*names, *(name for name in ALWAYS_REPORTED if name not in names))


def evaluate_rows(
    rows: Sequence[DatasetRow | RowError], metric_specs: Sequence[str | ConfiguredMetric] = ()
) -> EvaluationReport:
    """Score every row; bad rows are kept as errored instances so they cannot vanish from a report.

    An empty ``metric_specs`` means the defaults (see the module docstring). A bad spec raises
    ValueError before any row is scored.
    """
    metrics = parse_metric_specs(metric_specs) if metric_specs else default_metrics(rows)
    names = metric_names(metrics)
    instances: list[InstanceResult] = []
    for row in rows:
        if isinstance(row, RowError) or row.predicted is None:
            error = row if isinstance(row, RowError) else _missing_predicted(row)
            instances.append(InstanceResult(row.index, dict.fromkeys(names), error))
            continue
        values = compute_metrics(
            row.predicted, row.reference, metrics, latency_s=row.latency_s, failure=row.failure
        )
        instances.append(InstanceResult(row.index, {name: values[name] for name in names}))
    return EvaluationReport(
        names,
        tuple(instances),
        {name: aggregate(instance.metrics[name] for instance in instances) for name in names},
    )


def _missing_predicted(row: DatasetRow) -> RowError:
    return RowError(
        row.index,
        "predicted_trajectory",
        "no predicted trajectory: give predicted_trajectory, tools_called or agent_trajectory, "
        "or run an agent over the dataset",
        row.line,
    )
