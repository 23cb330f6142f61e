"""`agenttrail references load --rescore`: references loaded after the runs arrived score those
runs, on the embedded store (the next evaluator scores them) and through a running sidecar (its
evaluator scores them at once)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from trajectory_rows import agent_run, store_runs

from agenttrail.evaluators.cli.main import cli
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.scoring.worker import EvaluatorConfig, EvaluatorWorker

from .test_online_scoring import send_run, wait_scored

REFS = "refund: [{tool_name: lookup}, {tool_name: refund}]\n"


def metrics_of(store: Any, traces: list[str]) -> dict[str, set[str]]:
    """Each run's scored metrics (every run has some: scored before its reference, say)."""
    rows = store.query(
        "SELECT TraceId, groupUniqArray(Metric) FROM scores FINAL WHERE TraceId IN {ids:Array(String)} "
        "GROUP BY TraceId",
        {"ids": traces},
    )
    found = {trace: set(metrics) for trace, metrics in rows}
    assert sorted(found) == sorted(traces)
    return found


def score_all(store: Any) -> None:
    worker = EvaluatorWorker(store.clone, EvaluatorConfig(), worker_id="w")
    worker._heartbeat(force=True)
    while worker.run_once():
        pass


def test_rescore_on_the_store_scores_runs_stored_before_their_reference(
    store: Any, chdb_dir: Path, database: str, tmp_path: Path
) -> None:
    """Runs scored before any reference got latency and failure only; `references load --rescore`
    puts them back in the queue (and says how many), so the next evaluator adds the reference
    metrics. A load without --rescore leaves decided runs as they were."""
    from agenttrail.collector.schema import migrate

    migrate(store, ALL_MIGRATIONS)
    lookup, refund = (
        {"name": "lookup", "input": {}, "output": None},
        {"name": "refund", "input": {}, "output": None},
    )
    runs = store_runs(
        store, [agent_run(start=time.time(), task="refund", tools=[lookup, refund]) for _ in range(3)]
    )
    traces = [run.trace_id for run in runs]
    score_all(store)
    assert all(m == {"latency", "failure"} for m in metrics_of(store, traces).values())
    refs = tmp_path / "refs.yaml"
    refs.write_text(REFS)
    where = ["--store", str(chdb_dir), "--database", database]

    plain = CliRunner().invoke(cli, ["references", "load", str(refs), *where])
    assert plain.exit_code == 0, plain.output
    score_all(store)
    assert all(m == {"latency", "failure"} for m in metrics_of(store, traces).values())

    again = CliRunner().invoke(cli, ["references", "load", str(refs), "--rescore", *where])
    assert again.exit_code == 0, again.output
    assert "re-scoring 3 run(s) assembled in the last 1d (refund 3)" in again.output
    assert "`agenttrail serve` (or `agenttrail worker`) scores them" in again.output
    score_all(store)
    for metrics in metrics_of(store, traces).values():
        assert {"trajectory_exact_match", "trajectory_recall", "latency"} <= metrics


def test_rescore_through_the_sidecar_scores_at_once(
    start_sidecar: Any, chdb_dir: Path, database: str, tmp_path: Path
) -> None:
    """While serve holds the store, --rescore goes through its admin API and its own evaluator
    scores the task's runs against the new reference within seconds."""
    sidecar = start_sidecar()
    traces = [
        send_run(sidecar, "refund", [("lookup", {"id": 1}), ("refund", {"amount": 5})]) for _ in range(2)
    ]
    wait_scored(sidecar, traces)
    assert all(m == {"latency", "failure"} for m in metrics_of(sidecar.store, traces).values())
    refs = tmp_path / "refs.yaml"
    refs.write_text(REFS)
    loaded = CliRunner().invoke(
        cli, ["references", "load", str(refs), "--rescore", "--store", str(chdb_dir), "--database", database]
    )
    assert loaded.exit_code == 0, loaded.output
    assert "1 added" in loaded.output
    assert "re-scoring 2 run(s)" in loaded.output
    assert "the running sidecar scores them now" in loaded.output
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = metrics_of(sidecar.store, traces)
        if all("trajectory_exact_match" in found.get(trace, set()) for trace in traces):
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"not re-scored: {found}")
