"""AgentMetrics records a batch of runs and scores as the sum of each: counters are summed per
label set before the OTel SDK sees them (one SDK call per label set, not per run), and the
totals on the Prometheus page must be the same as one call per run would give."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

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
