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

With judges (``evaluate_rows(..., judges=[...])``, ``agenttrail evaluate --judge``) each instance
also has ``"judges": {metric: {"score", "label", "explanation", "error", "judge", "version",
"model", "prompt_tokens", "completion_tokens", "cost", "latency_s", "details"}}``, the judge
metrics get aggregates like the others (an error or a missing verdict, e.g. "unsure", is not
counted), and the report has ``"judges": {metric: {"errors", "missing", "prompt_tokens",
"completion_tokens", "cost"}}``. Without judges these keys are absent. When the judge budget is
spent, the judge results still to come are errors saying so, never silently left out.

A session-scope judge (task_completion ``scope: session``) judges each conversation once: rows
name theirs in a ``conversation_id`` column (as ``agenttrail trajectories --format json`` does), a
conversation's rows are its rounds in dataset order, and the result sits on its last row with
``details.conversation_id`` and ``details.rows``; rows naming none are refused (ValueError).
A tool-selection judge's verdict makes a ``tool_correctness`` metric the min of both, and with a
response-quality judge (``final_response``) each row has ``multiply_score`` and ``avg_score``
(``agenttrail.evaluators.judges.combined``).

Without metric specs, the five reference metrics of Vertex's six (exact, in-order and any-order
match, precision, recall) are computed when any row has a reference trajectory; the sixth,
single tool use, needs a ``tool_name``. ``latency`` and ``failure`` are always reported.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Final

from agenttrail.evaluators.judges.base import BudgetExhausted, Judge, JudgeInput, JudgeResult
from agenttrail.evaluators.judges.combined import (
    COMBINED,
    TOOL_CORRECTNESS,
    combined_scores,
    first_result,
    min_tool_correctness,
    response_judges,
    selection_judges,
)
from agenttrail.evaluators.metrics import (
    Aggregate,
    ConfiguredMetric,
    ToolCall,
    aggregate,
    compute_metrics,
    parse_metric,
)
from agenttrail.evaluators.metrics.calls import ABSENT
from agenttrail.evaluators.offline.datasets import DatasetRow, RowError
from agenttrail.evaluators.scoring.references import ReferenceEntry

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
    judges: dict[str, JudgeResult] = field(default_factory=dict)  # by metric name

    def value(self, name: str) -> float | None:
        """A metric's or judge metric's score (None: missing, errored or not computed)."""
        if name in self.metrics:
            return self.metrics[name]
        result = self.judges.get(name)
        return None if result is None else result.score

    def to_json(self, with_judges: bool = False) -> dict[str, Any]:
        document: dict[str, Any] = {
            "index": self.index,
            "metrics": dict(self.metrics),
            "error": None if self.error is None else self.error.to_json(),
        }
        if with_judges:
            document["judges"] = {name: _judge_json(result) for name, result in self.judges.items()}
        return document


def _judge_json(result: JudgeResult) -> dict[str, Any]:
    return {
        "score": result.score,
        "label": result.label,
        "explanation": result.explanation,
        "error": result.error or None,
        "judge": result.judge,
        "version": result.version,
        "model": result.model,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "cost": result.cost,
        "latency_s": result.latency_s,
        "details": dict(result.details),
    }


@dataclass(frozen=True, slots=True)
class EvaluationReport:
    """Per-row results in dataset order and one aggregate per reported metric name."""

    metric_names: tuple[str, ...]
    instances: tuple[InstanceResult, ...]
    aggregate: dict[str, Aggregate]
    judge_names: tuple[str, ...] = ()  # the judges' metrics, in judge order
    judged: bool = False  # judges were asked for (the JSON then has the judge keys)

    @property
    def errors(self) -> list[RowError]:
        return [instance.error for instance in self.instances if instance.error is not None]

    def judge_errors(self) -> list[str]:
        """One line per failed judge result: row, metric and why."""
        return [
            f"row {instance.index}, judge {name}: {result.error}"
            for instance in self.instances
            for name, result in instance.judges.items()
            if result.error
        ]

    def judge_summary(self) -> dict[str, dict[str, Any]]:
        """Per judge metric: errors, missing (no score, no error), tokens and cost."""
        summary = {}
        for name in self.judge_names:
            results = [instance.judges[name] for instance in self.instances if name in instance.judges]
            summary[name] = {
                "errors": sum(1 for result in results if result.error),
                "missing": sum(1 for result in results if result.score is None and not result.error),
                "prompt_tokens": sum(result.prompt_tokens for result in results),
                "completion_tokens": sum(result.completion_tokens for result in results),
                "cost": sum(result.cost for result in results),
            }
        return summary

    def to_json(self) -> dict[str, Any]:
        """The documented JSON contract; aggregates carry exactly count, mean and std."""
        document = {
            "instances": [instance.to_json(self.judged) for instance in self.instances],
            "aggregate": {
                name: {"count": stats.count, "mean": stats.mean, "std": stats.std}
                for name, stats in self.aggregate.items()
            },
        }
        if self.judged:
            document["judges"] = self.judge_summary()
        return document

    def to_table(self) -> str:
        """Per-row table, the bad rows' errors, then the aggregate table (count, missing, mean, std)."""
        # Imported here: the collector CLI module pulls in the store and receivers, which a
        # library user scoring rows in a notebook does not need.
        from agenttrail.collector.cli import format_table

        names = (*self.metric_names, *self.judge_names)
        rows = [
            [instance.index, *(_judge_cell(instance, name) for name in names)] for instance in self.instances
        ]
        parts = [format_table(["row", *names], rows)]
        if self.errors:
            lines = [f"{len(self.errors)} bad row(s), not scored:", *(f"  {error}" for error in self.errors)]
            parts.append("\n".join(lines))
        judge_errors = self.judge_errors()
        if judge_errors:
            lines = [
                f"{len(judge_errors)} judge error(s), not scored:",
                *(f"  {line}" for line in judge_errors),
            ]
            parts.append("\n".join(lines))
        aggregates = [
            [name, stats.count, stats.missing, *(_value(name, v) for v in (stats.mean, stats.std))]
            for name, stats in self.aggregate.items()
        ]
        parts.append(format_table(["metric", "count", "missing", "mean", "std"], aggregates))
        if self.judged:
            judges = [
                [
                    name,
                    s["errors"],
                    s["missing"],
                    s["prompt_tokens"],
                    s["completion_tokens"],
                    _number(s["cost"]),
                ]
                for name, s in self.judge_summary().items()
            ]
            headers = ["judge metric", "errors", "missing", "prompt tokens", "completion tokens", "cost"]
            parts.append(format_table(headers, judges))
        return "\n\n".join(parts)


def _judge_cell(instance: InstanceResult, name: str) -> str:
    result = instance.judges.get(name)
    if result is not None and result.error:
        return "error"
    if result is not None and result.score is None and result.label:
        return result.label  # e.g. "unsure"
    return _value(name, instance.value(name))


def _value(metric: str, value: float | None) -> str:
    """A metric's value in a table: the latency (seconds) in a fitting unit, others as numbers."""
    if metric == "latency" and value is not None:
        from agenttrail.collector.durations import format_duration

        return format_duration(value)
    return _number(value)


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
    rows: Sequence[DatasetRow | RowError],
    metric_specs: Sequence[str | ConfiguredMetric] = (),
    *,
    judges: Sequence[Judge] = (),
    judge_workers: int = 1,
) -> EvaluationReport:
    """Score every row; bad rows are kept as errored instances so they cannot vanish from a report.

    An empty ``metric_specs`` means the defaults (see the module docstring). A bad spec raises
    ValueError before any row is scored. ``judges`` run on every good row, ``judge_workers`` rows
    at a time (each judge client still bounds its own requests in flight).
    """
    metrics = parse_metric_specs(metric_specs) if metric_specs else default_metrics(rows)
    specs: Sequence[str | ConfiguredMetric] = metric_specs or (DEFAULT_METRICS if metrics else ())
    names = metric_names(metrics)
    _check_conversations(judges, rows)
    correctness = next((m for m in metrics if m.spec.name == "tool_correctness"), None)
    selectors = selection_judges(judges)
    # With the metric asked for, a tool-selection judge's min lands in the metric, with each row's
    # parameters as its metric is set.
    merged = TOOL_CORRECTNESS if correctness is not None and selectors else ()
    judge_names = tuple(name for name in judge_outputs(judges, names, merged) if name not in merged)
    responders = response_judges(judges)
    if responders and (correctness is not None or TOOL_CORRECTNESS[0] in judge_names):
        judge_names = (*judge_names, *COMBINED)
    instances: list[InstanceResult] = []
    # Each row's own tool_correctness parameters (its options and task settings), for the judge's min.
    row_correctness: dict[int, Mapping[str, Any]] = {}
    for row in rows:
        if isinstance(row, RowError) or row.predicted is None:
            error = row if isinstance(row, RowError) else _missing_predicted(row)
            instances.append(InstanceResult(row.index, dict.fromkeys(names), error))
            continue
        configured = row_metrics(row, specs, metrics)
        own = next((m for m in configured if m.spec.name == TOOL_CORRECTNESS[0]), None)
        if own is not None:
            row_correctness[row.index] = own.params
        values = compute_metrics(
            row.predicted, row.reference, configured, latency_s=row.latency_s, failure=row.failure
        )
        instances.append(InstanceResult(row.index, {name: values[name] for name in names}))
    if judges:
        good = [row for row in rows if isinstance(row, DatasetRow) and row.predicted is not None]
        inputs = [judge_input(row) for row in good]
        per_row = [judge for judge in judges if not _session_scope(judge)]
        verdicts = run_judges(per_row, inputs, judge_workers) if per_row else [[] for _ in good]
        for position, results in _judge_sessions(judges, good, inputs, judge_workers).items():
            verdicts[position].extend(results)
        by_index = {
            row.index: (run, results) for row, run, results in zip(good, inputs, verdicts, strict=True)
        }
        combine = Combine(selectors, responders)
        instances = [
            combine(instance, *by_index[instance.index], row_correctness.get(instance.index))
            if instance.index in by_index
            else instance
            for instance in instances
        ]
    all_names = (*names, *judge_names)
    return EvaluationReport(
        names,
        tuple(instances),
        {name: aggregate(instance.value(name) for instance in instances) for name in all_names},
        judge_names,
        judged=bool(judges),
    )


def row_metrics(
    row: DatasetRow, specs: Sequence[str | ConfiguredMetric], metrics: list[ConfiguredMetric]
) -> list[ConfiguredMetric]:
    """The metrics as this row sets them: a spec's own parameters win, then the row's ``options``,
    then its task's stored settings (``ReferenceEntry.configured_for``); a spec already parsed
    (a ConfiguredMetric) is taken as it is."""
    if not row.options and row.task_settings is None:
        return metrics
    settings = row.task_settings or ReferenceEntry("", ())
    return [
        spec if isinstance(spec, ConfiguredMetric) else settings.configured_for(spec, row.options)
        for spec in specs
    ]


def _session_scope(judge: Judge) -> bool:
    return getattr(judge, "scope", "run") == "session"


def conversation_of(row: DatasetRow) -> str:
    """The conversation a row belongs to (its ``conversation_id`` column), '' if none."""
    value = row.extra.get("conversation_id")
    return str(value) if value not in (None, "") else ""


def _check_conversations(judges: Sequence[Judge], rows: Sequence[DatasetRow | RowError]) -> None:
    """Session scope judges conversations: refused (ValueError) unless every row names its own."""
    session = [judge.name for judge in judges if _session_scope(judge)]
    if not session:
        return
    unnamed = [
        row.index
        for row in rows
        if isinstance(row, DatasetRow) and row.predicted is not None and not conversation_of(row)
    ]
    if unnamed:
        shown = ", ".join(str(index) for index in unnamed[:5]) + (", ..." if len(unnamed) > 5 else "")
        raise ValueError(
            f"judge {session[0]} has scope: session, which judges whole conversations, and row(s) "
            f"{shown} name none: give every row a conversation_id (rows of one conversation in "
            "order), or use scope: run to judge each row on its own"
        )


def _judge_sessions(
    judges: Sequence[Judge], good: Sequence[DatasetRow], inputs: Sequence[JudgeInput], workers: int
) -> dict[int, list[JudgeResult]]:
    """Session-scope judges on each conversation once (its rows in dataset order); the result goes
    to the conversation's last row (position in `good`), naming the conversation and its rows."""
    session = [judge for judge in judges if _session_scope(judge)]
    if not session:
        return {}
    groups: dict[str, list[int]] = {}
    for position, row in enumerate(good):
        groups.setdefault(conversation_of(row), []).append(position)
    conversations = list(groups.items())
    runs = [
        replace(inputs[members[-1]], runs=tuple(inputs[m] for m in members)) for _, members in conversations
    ]
    verdicts = run_judges(session, runs, workers)
    placed: dict[int, list[JudgeResult]] = {}
    for (conversation, members), results in zip(conversations, verdicts, strict=True):
        rows = [good[m].index for m in members]
        placed[members[-1]] = [
            replace(result, details={**result.details, "conversation_id": conversation, "rows": rows})
            for result in results
        ]
    return placed


@dataclass(frozen=True, slots=True)
class Combine:
    """One row's metrics and judge results with the combined scores (agenttrail.evaluators.judges.combined):
    the tool_correctness metric takes the tool-selection judge's min, and multiply_score / avg_score
    come from tool correctness and a response-quality judge."""

    selectors: Sequence[str]
    responders: Sequence[str]

    def __call__(
        self,
        instance: InstanceResult,
        run: JudgeInput,
        results: list[JudgeResult],
        correctness: Mapping[str, Any] | None = None,
    ) -> InstanceResult:
        """`correctness`: the row's tool_correctness parameters as its metric was set (the spec,
        then the row's options, then its task's settings), None when the metric was not asked for."""
        metrics = dict(instance.metrics)
        selection = first_result(results, self.selectors)
        if correctness is not None and self.selectors:
            results = [result for result in results if result.metric not in TOOL_CORRECTNESS]
            folded = None if selection is None else min_tool_correctness(run, selection, correctness)
            metrics.update(folded or {})
        judged = {result.metric: result for result in results}
        if self.responders:
            response = first_result(results, self.responders)
            correctness_score = (
                metrics.get(TOOL_CORRECTNESS[0])
                if TOOL_CORRECTNESS[0] in metrics
                else getattr(judged.get(TOOL_CORRECTNESS[0]), "score", None)
            )
            score = None if response is None else response.score
            metrics.update(combined_scores(correctness_score, score))
        return InstanceResult(instance.index, metrics, instance.error, judged)


def judge_outputs(
    judges: Sequence[Judge], names: Sequence[str], merged: Sequence[str] = ()
) -> tuple[str, ...]:
    """The metric names the judges report; ValueError if one is reported twice or is also a metric
    (`merged`: names a judge shares with a metric on purpose, folded into it)."""
    outputs = [output for judge in judges for output in getattr(judge, "outputs", (judge.name,))]
    clashes = sorted(
        {
            output
            for output in outputs
            if output not in merged and (outputs.count(output) > 1 or output in names)
        }
    )
    if clashes:
        raise ValueError(
            f"{', '.join(clashes)} reported twice (by two judges, or by a judge and a metric): "
            "rename the judge or drop the metric"
        )
    return tuple(outputs)


def call_mapping(call: ToolCall) -> dict[str, Any]:
    """A tool call as judges see it (the `trajectories --format json` shape): absent fields left out."""
    mapping: dict[str, Any] = {"name": call.name}
    if call.input is not ABSENT:
        mapping["input"] = call.input
    if call.output is not ABSENT:
        mapping["output"] = call.output
    return mapping


def judge_input(row: DatasetRow) -> JudgeInput:
    """A dataset row as judges see it; ``available_tools`` and ``screenshots`` columns are used."""
    return JudgeInput.from_trajectory(
        {
            "input": row.query,
            "output": row.response,
            "tool_calls": [call_mapping(call) for call in row.predicted or ()],
            "failure": bool(row.failure),
            "reference_trajectory": None
            if row.reference is None
            else [call_mapping(call) for call in row.reference],
            "expected_response": row.expected_response,
            "available_tools": row.extra.get("available_tools") or (),
            "screenshots": row.extra.get("screenshots") or (),
        }
    )


def run_judges(
    judges: Sequence[Judge], inputs: Sequence[JudgeInput], workers: int = 1
) -> list[list[JudgeResult]]:
    """Every judge on every input, results in input order. Once a budget is spent, the results
    still to come are errors carrying its message, so a report never hides unjudged rows."""
    exhausted: list[BudgetExhausted] = []
    lock = threading.Lock()

    def judge_one(run: JudgeInput) -> list[JudgeResult]:
        results: list[JudgeResult] = []
        for judge in judges:
            with lock:
                spent = exhausted[0] if exhausted else None
            if spent is None:
                try:
                    results.extend(judge.evaluate(run))
                    continue
                except BudgetExhausted as exc:
                    with lock:
                        exhausted.append(exc)
                    spent = exc
            results.append(JudgeResult(judge.name, judge.version, judge.name, error=f"not judged: {spent}"))
        return results

    if workers <= 1:
        return [judge_one(run) for run in inputs]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="judge") as pool:
        return list(pool.map(judge_one, inputs))


def _missing_predicted(row: DatasetRow) -> RowError:
    return RowError(
        row.index,
        "predicted_trajectory",
        "no predicted trajectory: give predicted_trajectory, tools_called or agent_trajectory, "
        "or run an agent over the dataset",
        row.line,
    )
