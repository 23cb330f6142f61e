"""The sidecar's Prometheus /metrics page, scraped over HTTP after runs arrive over OTLP."""

from __future__ import annotations

import os
import signal
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from otlp_builders import SpanSpec, new_trace_id, request, tool_span
from otlp_builders import new_span_id as span_id
from receiver_clients import grpc_export

from .runs import config_file, feed_of, load_references, scrape, send_run, value, wait_for

pytestmark = pytest.mark.slow


def test_runs_tools_and_scores_are_counted_with_their_labels(start_sidecar: Any, tmp_path: Path) -> None:
    """Counters and histograms on /metrics hold the runs, tool calls and scores that were ingested."""
    sidecar = start_sidecar(config_file(tmp_path))
    load_references(sidecar)
    send_run(sidecar)
    send_run(sidecar, latency_ms=700)
    send_run(sidecar, tools=("lookup", "refund"), failing_tools=("refund",), failed=True, version="1.1")
    send_run(sidecar, agent="helper", task="faq", tools=("search",), latency_ms=40)
    assert sidecar.wait_until_assembled(30)

    def scored() -> dict[str, Any] | None:
        samples = scrape(sidecar)
        done = value(samples, "agenttrail_runs_total") == 4 and (
            value(samples, "agenttrail_evaluation_score_count", metric="trajectory_recall") == 3
        )
        return samples if done else None

    samples = wait_for(scored, what="4 runs and 3 recall scores on /metrics")

    assert value(samples, "agenttrail_runs_total", agent="bot", task="refund", status="ok") == 2
    assert value(samples, "agenttrail_runs_total", agent="bot", task="refund", status="error") == 1
    assert value(samples, "agenttrail_runs_total", agent="helper", task="faq", status="ok") == 1
    duration = "agenttrail_run_duration_seconds"
    assert value(samples, f"{duration}_count", agent="bot", task="refund") == 3
    assert value(samples, f"{duration}_sum", agent="bot", task="refund") == pytest.approx(0.9)
    assert value(samples, f"{duration}_bucket", agent="bot", le="0.5") == 2
    assert value(samples, f"{duration}_bucket", agent="bot", le="1.0") == 3
    assert value(samples, f"{duration}_bucket", agent="helper", le="0.05") == 1

    assert value(samples, "agenttrail_tool_calls_total", agent="bot", tool="lookup", status="ok") == 3
    assert value(samples, "agenttrail_tool_calls_total", agent="bot", tool="refund", status="ok") == 2
    assert value(samples, "agenttrail_tool_calls_total", agent="bot", tool="refund", status="error") == 1
    assert value(samples, "agenttrail_tool_calls_total", agent="helper", tool="search") == 1

    # Three refund runs match the reference exactly (a failed call still counts as a call).
    score = "agenttrail_evaluation_score"
    labels = {"agent": "bot", "metric": "trajectory_exact_match", "evaluator": "trajectory"}
    assert value(samples, f"{score}_count", **labels) == 3
    assert value(samples, f"{score}_sum", **labels) == 3
    assert value(samples, "agenttrail_evaluation_results_total", **labels, label="pass") == 3
    # The run's agent version labels its run and its scores, so releases compare in PromQL.
    assert value(samples, "agenttrail_runs_total", agent="bot", agent_version="1.1") == 1
    assert value(samples, "agenttrail_runs_total", agent="bot", agent_version="1.1", status="error") == 1
    assert value(samples, f"{duration}_count", agent="bot", agent_version="1.1") == 1
    assert value(samples, f"{score}_count", **labels, agent_version="1.1") == 1
    assert value(samples, "agenttrail_evaluation_results_total", **labels, agent_version="1.1") == 1
    # latency and failure are run metrics, not score series; no trace id is ever a label.
    metrics = {labels.get("metric") for series in samples.values() for labels, _ in series}
    assert not metrics & {"latency", "failure"}
    assert all("trace" not in key for series in samples.values() for labels, _ in series for key in labels)


def test_label_values_are_capped_and_the_rest_counted(start_sidecar: Any, tmp_path: Path) -> None:
    """Beyond max_label_values distinct agents, runs go to agent="_other" and each is counted as dropped."""
    sidecar = start_sidecar(config_file(tmp_path, max_label_values=2))
    for index in range(5):
        for _ in range(index + 1):
            send_run(sidecar, agent=f"agent-{index}", task="", tools=("search",))
    assert sidecar.wait_until_assembled(30)
    samples = wait_for(
        lambda: (s := scrape(sidecar)) and value(s, "agenttrail_runs_total") == 15 and s,
        what="15 runs on /metrics",
    )
    agents = {labels["agent"] for labels, _ in samples["agenttrail_runs_total"]}
    assert "_other" in agents
    assert len(agents - {"_other"}) == 2
    dropped = value(samples, "agenttrail_metrics_label_values_dropped_total", label="agent")
    assert dropped == value(samples, "agenttrail_runs_total", agent="_other") > 0


def test_a_reassembled_run_is_counted_once(start_sidecar: Any, tmp_path: Path) -> None:
    """A late span makes revision 2 of a run; counters keep the first revision and do not count it again."""
    sidecar = start_sidecar(config_file(tmp_path))
    trace, root = send_run(sidecar, tools=("lookup",))
    assert sidecar.wait_until_assembled(30)
    wait_for(lambda: value(scrape(sidecar), "agenttrail_runs_total") == 1, what="the run on /metrics")

    late = tool_span(trace, span_id(), root, "refund", 50, 60)
    sidecar.pipeline.accept(request(late).SerializeToString())
    assert sidecar.wait_until_assembled(30)
    wait_for(lambda: feed_of(sidecar).runs_seen == 2, what="the feed to read revision 2")

    samples = scrape(sidecar)
    assert value(samples, "agenttrail_runs_total") == 1
    assert value(samples, "agenttrail_run_duration_seconds_count") == 1
    assert value(samples, "agenttrail_tool_calls_total", tool="refund") == 0


def test_metrics_page_absent_when_prometheus_is_off(start_sidecar: Any, tmp_path: Path) -> None:
    """With prometheus: false and no OTLP endpoint, no feed runs and /metrics is 404."""
    sidecar = start_sidecar(config_file(tmp_path, prometheus=False))
    assert not [worker for worker in sidecar.workers if worker.name == "metrics-export"]
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(f"http://{sidecar.http.address}/metrics", timeout=10)
    assert error.value.code == 404


def mixed_request(trace: str) -> bytes:
    """One good span and one the check rejects (a short trace id)."""
    bad = SpanSpec(trace, span_id(), "bad", 0, 1).to_proto()
    bad.trace_id = b"short"
    return request(SpanSpec(trace, span_id(), "good", 0, 1), bad).SerializeToString()


@pytest.mark.parametrize("receiver_process", [False, True], ids=["grpc-in-serve", "grpc-process"])
def test_ingest_counters_are_on_metrics_by_process(
    start_sidecar: Any, tmp_path: Path, receiver_process: bool
) -> None:
    """The receivers' counters (what /healthz shows) are on /metrics, labelled by the process
    that counted them: the gRPC receiver process's acknowledgements under grpc_receiver."""
    sidecar = start_sidecar(config_file(tmp_path), grpc_process=receiver_process)
    trace = new_trace_id()
    grpc_export(sidecar.grpc_address, mixed_request(trace))
    assert sidecar.flush(60)
    receiver = "grpc_receiver" if receiver_process else "serve"

    def counted() -> dict[str, Any] | None:
        samples = scrape(sidecar)
        done = value(samples, "agenttrail_ingest_stored_spans_total", process="serve") == 1 and (
            value(samples, "agenttrail_ingest_rejected_spans_total", process=receiver) == 1
        )
        return samples if done else None

    samples = wait_for(counted, what="the ingest counters on /metrics")
    assert value(samples, "agenttrail_ingest_accepted_spans_total", process=receiver) == 1
    assert value(samples, "agenttrail_ingest_accepted_spans_total", process="serve") == 1
    assert value(samples, "agenttrail_ingest_refused_requests_total") == 0
    processes = {labels["process"] for labels, _ in samples["agenttrail_ingest_accepted_spans_total"]}
    assert processes == ({"serve", "grpc_receiver"} if receiver_process else {"serve"})


def test_a_restarted_receiver_process_keeps_counting(start_sidecar: Any, tmp_path: Path) -> None:
    """kill -9 of the gRPC receiver process: its counters on /metrics go on from where the dead
    process left them (Prometheus counters never go back), and the restart is counted."""
    sidecar = start_sidecar(config_file(tmp_path), grpc_process=True)
    trace = new_trace_id()
    for _ in range(3):
        grpc_export(sidecar.grpc_address, mixed_request(trace))
    wait_for(lambda: sidecar.grpc_process.stats.get("accepted_spans") == 3, what="the process's report")
    first = sidecar.grpc_process._process
    os.kill(first.pid, signal.SIGKILL)
    wait_for(lambda: sidecar.grpc_process.restarts == 1 and sidecar.grpc_process.alive(), timeout=120)
    grpc_export(sidecar.grpc_address, mixed_request(trace))

    def counted() -> dict[str, Any] | None:
        samples = scrape(sidecar)
        done = value(samples, "agenttrail_ingest_accepted_spans_total", process="grpc_receiver") == 4
        return samples if done else None

    samples = wait_for(counted, what="4 accepted spans on /metrics")
    assert value(samples, "agenttrail_ingest_rejected_spans_total", process="grpc_receiver") == 4
    assert value(samples, "agenttrail_ingest_receiver_restarts_total", process="grpc_receiver") == 1
