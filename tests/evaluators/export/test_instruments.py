"""AgentMetrics records a batch of runs and scores as the sum of each: counters are summed per
label set before the OTel SDK sees them (one SDK call per label set, not per run), and the
totals on the Prometheus page must be the same as one call per run would give."""

from __future__ import annotations

from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from agenttrail.evaluators.monitoring import instruments
from agenttrail.evaluators.monitoring.export_config import MetricsExportConfig
from agenttrail.evaluators.monitoring.instruments import AgentMetrics, RunRecord, ScoreRecord


def page(metrics: AgentMetrics) -> dict[str, list[tuple[dict[str, str], float]]]:
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(metrics.prometheus_page({})[1].decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


def value(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    return sum(v for got, v in samples.get(name, []) if all(got.get(k) == w for k, w in labels.items()))


def score(agent: str, metric: str, value: float | None, label: str, error: str = "") -> ScoreRecord:
    return ScoreRecord("t" * 32, "r" * 16, agent, "refund", metric, "trajectory", value, label, "", error, 1)


def test_a_batch_counts_every_run_tool_call_token_and_score() -> None:
    metrics = AgentMetrics(MetricsExportConfig(max_label_values=2))
    ok = RunRecord("bot", "refund", False, 0.2, ("lookup", "refund"), ("ok", "error"), 10, 0)
    failed = RunRecord("bot", "refund", True, 2.0, ("lookup",), ("ok",), 5, 7)
    others = [RunRecord(f"agent-{i}", "", False, 0.1, (), (), 0, 0) for i in range(3)]
    metrics.record_runs([ok, ok, failed, ok, *others])
    metrics.record_run(ok)  # one more, alone: adds to the same series
    metrics.record_scores(
        [
            score("bot", "tool_f1", 1.0, "pass"),
            score("bot", "tool_f1", 0.5, "fail"),
            score("bot", "tool_f1", 1.0, "pass"),
            score("bot", "tool_f1", None, "", error="judge timed out"),
            score("bot", "latency", 3.0, ""),  # a run-level metric: no score series
        ]
    )
    samples = page(metrics)
    assert value(samples, "agenttrail_runs_total", agent="bot", status="ok") == 4
    assert value(samples, "agenttrail_runs_total", agent="bot", status="error") == 1
    assert value(samples, "agenttrail_run_duration_seconds_count", agent="bot") == 5
    assert value(samples, "agenttrail_run_duration_seconds_sum", agent="bot") == pytest.approx(2.8)
    assert value(samples, "agenttrail_tool_calls_total", tool="lookup", status="ok") == 5
    assert value(samples, "agenttrail_tool_calls_total", tool="refund", status="error") == 4
    assert value(samples, "agenttrail_tokens_total", agent="bot", type="input") == 45
    assert value(samples, "agenttrail_tokens_total", agent="bot", type="output") == 7
    # max_label_values=2: "bot" and agent-0 keep their names, agent-1 and agent-2 become _other
    assert value(samples, "agenttrail_runs_total", agent="_other") == 2
    assert value(samples, "agenttrail_metrics_label_values_dropped_total", label="agent") == 2
    assert value(samples, "agenttrail_evaluation_score_count", metric="tool_f1") == 3
    assert value(samples, "agenttrail_evaluation_score_sum", metric="tool_f1") == 2.5
    assert value(samples, "agenttrail_evaluation_results_total", metric="tool_f1", label="pass") == 2
    assert value(samples, "agenttrail_evaluation_results_total", metric="tool_f1", label="fail") == 1
    assert value(samples, "agenttrail_evaluation_results_total", metric="tool_f1", label="error") == 1
    assert value(samples, "agenttrail_evaluation_score_count", metric="latency") == 0


@settings(max_examples=40, deadline=None)
@given(
    scores=st.lists(
        st.tuples(
            st.sampled_from(["bot", "helper", "other"]),
            st.sampled_from(["tool_f1", "trajectory_recall"]),
            st.one_of(st.none(), st.sampled_from([0.0, 0.25, 1.0, 7.5]), st.floats(allow_nan=True)),
        ),
        max_size=40,
    ),
    latencies=st.lists(st.floats(min_value=0, max_value=700) | st.sampled_from([-1.0, 0.0]), max_size=30),
)
def test_histogram_values_grouped_by_label_set_land_where_one_record_each_puts_them(
    scores: list[tuple[str, str, float | None]], latencies: list[float]
) -> None:
    """The score and duration histograms take each label set's values at once (the SDK's `record`
    for the first, its aggregation for the rest): the page is the one a `record` per value
    gives, values the SDK refuses (NaN, negative) included, past the label limit too."""
    batch = [score(agent, metric, value, "") for agent, metric, value in scores]
    runs = [
        RunRecord(f"agent-{i % 3}", "refund", False, latency, (), (), 0, 0)
        for i, latency in enumerate(latencies)
    ]
    grouped = AgentMetrics(MetricsExportConfig(max_label_values=2))
    grouped.record_scores(batch)
    grouped.record_runs(runs)
    one_by_one = AgentMetrics(MetricsExportConfig(max_label_values=2))
    with patch.object(instruments, "_aggregations", lambda *_: None):
        for item in batch:
            one_by_one.record_score(item)
        for run in runs:
            one_by_one.record_run(run)

    def series(metrics: AgentMetrics) -> dict[str, list[tuple[dict[str, str], float]]]:
        return {name: sorted(samples, key=repr) for name, samples in page(metrics).items()}  # any order

    assert series(grouped) == series(one_by_one)


def test_the_grouped_histogram_path_is_taken_on_the_installed_sdk() -> None:
    """`record_values` falls back to one `record` per value where the SDK is laid out otherwise
    (correct, but the ~20 µs per value it saves are back under the receivers' GIL): if this
    fails after an SDK upgrade, follow the SDK's Histogram.record to its aggregation again."""
    metrics = AgentMetrics(MetricsExportConfig())
    metrics.record_scores([score("bot", "tool_f1", 1.0, "pass")])
    assert instruments._aggregations(
        metrics._scores, {"agent": "bot", "metric": "tool_f1", "evaluator": "trajectory"}
    )
