"""Online scoring through the sidecar: references, scores per run, restarts, two workers, re-scoring."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from otlp_builders import agent_span, new_span_id, new_trace_id, request, tool_span
from trajectory_rows import agent_run, insert_trajectories, run_row, store_runs

from agenttrail.evaluators.scoring.reference_store import latest_references, store_reference_set
from agenttrail.evaluators.scoring.references import parse_reference_set
from agenttrail.evaluators.scoring.schema import EVALUATOR_MIGRATIONS
from agenttrail.evaluators.scoring.scores import ScoreFilter, query_scores
from agenttrail.evaluators.scoring.worker import EvaluatorConfig, EvaluatorWorker, sample_fraction

REFERENCES = {
    "refund": {
        "reference_trajectory": [
            {"tool_name": "lookup", "tool_input": {"id": 1}},
            {"tool_name": "refund", "tool_input": None},
        ]
    },
    "faq": {
        "reference_trajectory": [{"tool_name": "search"}],
        "metrics": ["trajectory_single_tool_use:tool_name=search"],
    },
}


def send_run(
    sidecar: Any, task: str, tools: list[tuple[str, dict[str, Any]]], *, failed: bool = False
) -> str:
    trace, root = new_trace_id(), new_span_id()
    spans = [
        agent_span(
            trace,
            root,
            0,
            100,
            attributes={"agenttrail.task": task},
            error="RuntimeError" if failed else None,
        )
    ]
    spans += [
        tool_span(trace, new_span_id(), root, name, 10 * i + 1, 10 * i + 5, arguments=args)
        for i, (name, args) in enumerate(tools)
    ]
    sidecar.pipeline.accept(request(*spans).SerializeToString())
    return trace


def load_references(sidecar: Any) -> None:
    store_reference_set(sidecar.store, parse_reference_set(REFERENCES), source="test")


def wait_scored(sidecar: Any, traces: list[str], timeout: float = 30) -> None:
    """Until every trace has a decision from the sidecar's evaluator."""
    assert sidecar.wait_until_assembled(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        decided = {
            row[0]
            for row in sidecar.store.query(
                "SELECT DISTINCT TraceId FROM evaluation_decisions WHERE TraceId IN {ids:Array(String)}",
                {"ids": traces},
            )
        }
        if decided >= set(traces):
            return
        time.sleep(0.05)
    raise AssertionError(f"{len(set(traces) - decided)} run(s) were never scored")


def scores_of(sidecar: Any, trace: str) -> dict[str, float]:
    rows = query_scores(sidecar.store, ScoreFilter.from_params({"trace_id": trace}))
    return {row["metric"]: row["score"] for row in rows}


def test_runs_are_scored_against_their_task_reference(start_sidecar: Any) -> None:
    """Each run gets the reference metrics of its task (wildcard input honoured), latency and failure;
    a run without a reference gets latency and failure only, never zeros."""
    sidecar = start_sidecar()
    load_references(sidecar)
    usual = send_run(sidecar, "refund", [("lookup", {"id": 1}), ("refund", {"amount": 5})])
    stray = send_run(sidecar, "refund", [("search", {}), ("lookup", {"id": 2})])
    faq = send_run(sidecar, "faq", [("search", {"q": "x"}), ("search", {"q": "y"})])
    unknown = send_run(sidecar, "mystery", [("search", {})], failed=True)
    wait_scored(sidecar, [usual, stray, faq, unknown])

    assert scores_of(sidecar, usual) == {
        "trajectory_exact_match": 1.0,
        "trajectory_in_order_match": 1.0,
        "trajectory_any_order_match": 1.0,
        "trajectory_precision": 1.0,
        "trajectory_recall": 1.0,
        "latency": pytest.approx(0.1),
        "failure": 0.0,
    }
    stray_scores = scores_of(sidecar, stray)
    assert stray_scores["trajectory_exact_match"] == 0.0
    assert stray_scores["trajectory_precision"] == 0.0  # lookup id 2 does not match id 1
    assert scores_of(sidecar, faq) == {
        "trajectory_single_tool_use": 1.0,
        "latency": pytest.approx(0.1),
        "failure": 0.0,
    }
    assert scores_of(sidecar, unknown) == {"latency": pytest.approx(0.1), "failure": 1.0}
    [row] = query_scores(sidecar.store, ScoreFilter.from_params({"trace_id": usual, "metric": "failure"}))
    assert set(row) >= {"trace_id", "metric", "score", "label", "explanation", "evaluator", "created_at"}
    assert row["label"] == "ok"
    assert row["evaluator"].startswith("trajectory@trajectory-")


def test_rescoring_after_late_span_replaces_scores(start_sidecar: Any) -> None:
    """A late span re-assembles the run; it is scored again at revision 2 with no duplicate rows."""
    sidecar = start_sidecar()
    load_references(sidecar)
    trace, root = new_trace_id(), new_span_id()
    sidecar.pipeline.accept(
        request(
            agent_span(trace, root, 0, 100, attributes={"agenttrail.task": "refund"}),
            tool_span(trace, new_span_id(), root, "lookup", 1, 2, arguments={"id": 1}),
        ).SerializeToString()
    )
    wait_scored(sidecar, [trace])
    assert scores_of(sidecar, trace)["trajectory_recall"] == 0.5
    sidecar.pipeline.accept(
        request(tool_span(trace, new_span_id(), root, "refund", 5, 6)).SerializeToString()
    )
    assert sidecar.wait_until_assembled(30)
    deadline = time.monotonic() + 30
    while scores_of(sidecar, trace)["trajectory_recall"] != 1.0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert scores_of(sidecar, trace)["trajectory_recall"] == 1.0
    revisions = sidecar.store.query(
        "SELECT Metric, count(), max(Revision) FROM scores FINAL WHERE TraceId = {t:String} GROUP BY Metric",
        {"t": trace},
    )
    assert {row[1] for row in revisions} == {1}
    assert {row[2] for row in revisions} == {2}


def test_restart_in_the_middle_scores_every_run_once(start_sidecar: Any) -> None:
    """Runs assembled before a restart but not yet scored are scored by the next sidecar, each once."""
    first = start_sidecar()
    load_references(first)
    before = [send_run(first, "refund", [("lookup", {"id": 1})]) for _ in range(5)]
    wait_scored(first, before)
    first.stop()
    second = start_sidecar()
    after = [send_run(second, "refund", [("lookup", {"id": 1})]) for _ in range(5)]
    wait_scored(second, before + after)
    counts = second.store.query(
        "SELECT TraceId, count() FROM scores WHERE Metric = 'trajectory_recall' GROUP BY TraceId"
    )
    assert sorted(count for _, count in counts) == [1] * 10


def test_two_workers_share_runs_without_double_scoring(store: Any) -> None:
    """Two workers on one store split the pending runs by trace hash: every run is decided and
    scored exactly once (counted without FINAL, so no merge hides duplicates)."""
    from agenttrail.collector.schema import migrate

    migrate(store, EVALUATOR_MIGRATIONS)
    store_reference_set(store, parse_reference_set(REFERENCES), source="test")
    traces = [new_trace_id() for _ in range(60)]
    now = time.time()
    lookup = {"name": "lookup", "input": {"id": 1}, "output": None}
    store_runs(
        store,
        [agent_run(start=now, trace_id=t, task="refund", latency_s=0.5, tools=[lookup]) for t in traces],
    )
    workers = [
        EvaluatorWorker(store.clone, EvaluatorConfig(batch_size=7), worker_id=f"w{i}") for i in range(2)
    ]
    for worker in workers:
        worker._heartbeat(force=True)
    for _ in range(40):
        if sum(worker.run_once() for worker in workers) == 0:
            break
    decided = store.query("SELECT TraceId, count() FROM evaluation_decisions GROUP BY TraceId")
    assert sorted(t for t, _ in decided) == sorted(traces)
    assert {count for _, count in decided} == {1}
    assert store.query("SELECT count() FROM scores WHERE Metric = 'trajectory_exact_match'") == [(60,)]
    assert all(worker.counters.scored_runs > 0 for worker in workers), "both workers should take a share"
    assert sum(worker.counters.scored_runs for worker in workers) == 60


def test_scores_carry_the_scored_runs_agent_version(store: Any) -> None:
    """The worker writes the run's agent version with its scores, and the scores' rollups copy
    it: drift against a version reads it there (monitoring/rollups.py, migration 122)."""
    from agenttrail.collector.schema import migrate

    migrate(store, EVALUATOR_MIGRATIONS)
    store_reference_set(store, parse_reference_set(REFERENCES), source="test")
    lookup = {"name": "lookup", "input": {"id": 1}, "output": None}
    versions = {new_trace_id(): version for version in ("v7", "v8") for _ in range(3)}
    store_runs(
        store,
        [
            agent_run(start=time.time(), trace_id=t, task="refund", agent_version=v, tools=[lookup])
            for t, v in versions.items()
        ],
    )
    worker = EvaluatorWorker(store.clone, EvaluatorConfig(), worker_id="w")
    worker._heartbeat(force=True)
    while worker.run_once():
        pass
    for table in ("scores", "scores_by_start"):
        carried = store.query(f"SELECT DISTINCT TraceId, AgentVersion FROM {table}")
        assert sorted(carried) == sorted(versions.items()), table


def test_sampling_is_deterministic_and_keeps_failures(start_sidecar: Any, tmp_path: Path) -> None:
    """With sample rate 0 only failed runs are scored; the others are recorded as sampled out."""
    config = tmp_path / "agenttrail.yaml"
    config.write_text("evaluators:\n  sample_rate: 0.0\n  always_sample_failures: true\n")
    sidecar = start_sidecar(config_file=str(config))
    ok = send_run(sidecar, "refund", [("lookup", {"id": 1})])
    failed = send_run(sidecar, "refund", [("lookup", {"id": 1})], failed=True)
    wait_scored(sidecar, [ok, failed])
    decisions = dict(
        sidecar.store.query(
            "SELECT TraceId, Decision FROM evaluation_decisions WHERE TraceId IN {ids:Array(String)}",
            {"ids": [ok, failed]},
        )
    )
    assert decisions == {ok: "sampled_out", failed: "scored"}
    assert scores_of(sidecar, ok) == {}
    assert sample_fraction("ffffffffffffffff" + "0" * 16) > 0.99
    config_half = EvaluatorConfig(sample_rate=0.5)
    assert config_half.sampled("0" * 32, "a", "t", False) is True
    assert config_half.sampled("f" * 32, "a", "t", False) is False


def test_reference_versions(store: Any) -> None:
    """Loading the same set twice adds nothing; a changed task gets version 2."""
    from agenttrail.collector.schema import migrate

    migrate(store, EVALUATOR_MIGRATIONS)
    first = store_reference_set(store, parse_reference_set(REFERENCES), source="a.json")
    assert (sorted(first.added), first.updated) == (["faq", "refund"], [])
    again = store_reference_set(store, parse_reference_set(REFERENCES), source="a.json")
    assert (again.added, again.updated, sorted(again.unchanged)) == ([], [], ["faq", "refund"])
    changed = {
        **REFERENCES,
        "faq": {"reference_trajectory": [{"tool_name": "search"}, {"tool_name": "answer"}]},
    }
    third = store_reference_set(store, parse_reference_set(changed), source="b.json")
    assert third.updated == ["faq"]
    current = latest_references(store)
    assert (current["faq"].version, current["refund"].version) == (2, 1)
    assert [call.name for call in current["faq"].entry.reference] == ["search", "answer"]


def test_scores_of_a_run_that_reassembly_deleted_are_removed(start_sidecar: Any) -> None:
    """An inner agent run scored on its own is folded into its parent run when the parent's span
    arrives late; the inner run's scores leave `scores`, so stats and drift stop counting them."""
    sidecar = start_sidecar()
    load_references(sidecar)
    trace, outer, inner = new_trace_id(), new_span_id(), new_span_id()
    sidecar.pipeline.accept(
        request(
            agent_span(trace, inner, 1, 50, parent=outer, attributes={"agenttrail.task": "refund"}),
            tool_span(trace, new_span_id(), inner, "lookup", 2, 3, arguments={"id": 1}),
        ).SerializeToString()
    )
    wait_scored(sidecar, [trace])

    def scored_roots() -> set[str]:
        rows = sidecar.store.query(
            "SELECT DISTINCT RootSpanId FROM scores FINAL WHERE TraceId = {t:String}", {"t": trace}
        )
        return {row[0] for row in rows}

    assert scored_roots() == {inner}
    late_parent = agent_span(trace, outer, 0, 100, attributes={"agenttrail.task": "refund"})
    sidecar.pipeline.accept(request(late_parent).SerializeToString())
    assert sidecar.wait_until_assembled(30)
    deadline = time.monotonic() + 30
    while scored_roots() != {outer} and time.monotonic() < deadline:
        time.sleep(0.1)
    assert scored_roots() == {outer}


def test_a_large_batch_of_plain_traces_is_assembled_in_clickhouse_and_scored(start_sidecar: Any) -> None:
    """300 plain traces in one export are due together: the assembler takes its SQL path
    (assembly_sql.py, batches of at least 256 traces) for every one, and each run is stored with
    its tool calls in order, its failure, and scored against its task's reference."""
    sidecar = start_sidecar()
    load_references(sidecar)
    spans: list[Any] = []
    expected: dict[str, tuple[list[tuple[str, dict[str, Any]]], bool, bool, bool]] = {}
    for index in range(300):
        trace, root = new_trace_id(), new_span_id()
        matches, failed, swapped = index % 3 != 0, index % 5 == 0, index % 2 == 1
        calls = [("lookup", {"id": 1 if matches else 2}), ("refund", {"amount": index})]
        ran = list(reversed(calls)) if swapped else calls
        spans.append(
            agent_span(
                trace,
                root,
                0,
                100,
                attributes={"agenttrail.task": "refund"},
                error="RuntimeError" if failed else None,
            )
        )
        # Sent last call first: the run orders its calls by start time, not by arrival.
        spans += [
            tool_span(trace, new_span_id(), root, name, 10 + 10 * i, 15 + 10 * i, arguments=args)
            for i, (name, args) in reversed(list(enumerate(ran)))
        ]
        expected[trace] = (ran, matches and not swapped, matches, failed)
    sidecar.pipeline.accept(request(*spans).SerializeToString())
    wait_scored(sidecar, list(expected), timeout=120)
    assert sidecar.assembler is not None
    assert sidecar.assembler.plain_runs == 300

    stored = sidecar.store.query(
        "SELECT TraceId, Agent, Task, Failure, ToolCalls FROM trajectories FINAL WHERE IsDeleted = 0"
    )
    assert len(stored) == 300
    for trace, agent, task, failure, calls_json in stored:
        calls, _, _, failed = expected[trace]
        assert (agent, task, failure) == ("bot", "refund", int(failed))
        assert [(call["name"], call["input"]) for call in json.loads(calls_json)] == calls
    scores = sidecar.store.query(
        "SELECT TraceId, Metric, Score FROM scores FINAL "
        "WHERE Metric IN ('trajectory_exact_match', 'trajectory_recall', 'failure')"
    )
    assert len(scores) == 3 * 300
    for trace, metric, score in scores:
        _, exact, matches, failed = expected[trace]
        wanted = {
            "trajectory_exact_match": float(exact),
            "trajectory_recall": 1.0 if matches else 0.5,
            "failure": float(failed),
        }
        assert score == wanted[metric], (trace, metric)


def test_metrics_computed_in_worker_processes_store_what_the_thread_stores(store: Any) -> None:
    """`evaluators.processes` moves the metrics into spawned processes: the same runs (tasks with
    and without a reference or metrics of their own, no task, failed, calls that cannot be read)
    get the same scores and decisions as when serve's thread computes them."""
    from agenttrail.collector.schema import migrate

    migrate(store, EVALUATOR_MIGRATIONS)
    store_reference_set(store, parse_reference_set(REFERENCES), source="test")
    now = time.time()
    lookup = {"name": "lookup", "input": {"id": 1}, "output": None}
    shapes: list[dict[str, Any]] = [
        {"task": "refund", "tools": [lookup, {"name": "refund", "input": None}]},
        {"task": "refund", "tools": [{"name": "refund", "input": None}, lookup]},
        {"task": "refund", "tools": [lookup], "failure": True},
        {"task": "faq", "tools": [{"name": "search"}, {"name": "search"}]},
        {"task": "faq", "tools": []},
        {"task": "no-such-task", "tools": [lookup]},
        {"task": "", "tools": [lookup]},
    ]
    runs = [
        agent_run(start=now + i, trace_id=new_trace_id(), latency_s=0.1 * i, **shapes[i % len(shapes)])
        for i in range(3 * len(shapes))
    ]
    rows = [run_row(run) for run in runs]
    rows[-1] = rows[-1]._replace(ToolCalls="[{not json")  # decided as an error, with the reason
    insert_trajectories(store, rows)

    def outcome(processes: int) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        # One worker id for both: a second id would look like a live peer and take half the runs.
        config = EvaluatorConfig(batch_size=8, processes=processes)
        worker = EvaluatorWorker(store.clone, config, worker_id="w")
        try:
            while worker.run_once():
                pass
        finally:
            worker.stop()
        scores = store.query(
            "SELECT TraceId, Metric, Score, Label, Task, Revision, ReferenceVersion FROM scores ORDER BY ALL"
        )
        decisions = store.query("SELECT TraceId, Decision, Detail FROM evaluation_decisions ORDER BY ALL")
        store.command("TRUNCATE TABLE scores")
        store.command("TRUNCATE TABLE evaluation_decisions")
        return scores, decisions

    in_thread = outcome(0)
    assert len(in_thread[1]) == len(runs)
    assert any(detail.startswith("cannot score") for _, _, detail in in_thread[1])
    assert len({score for _, metric, score, *_ in in_thread[0] if metric == "trajectory_exact_match"}) == 2
    in_processes = outcome(2)
    assert (len(in_processes[0]), len(in_processes[1])) == (len(in_thread[0]), len(in_thread[1]))
    assert in_processes == in_thread


def test_runs_whose_stored_calls_are_malformed_are_decided_as_errors_and_the_batch_goes_on(
    store: Any,
) -> None:
    """Rows another writer stored with calls that are not a list of named objects each get an
    error decision naming what was wrong; the well-formed runs of the same batch are scored.
    Before, such a row raised KeyError out of the batch, which was retried for ever."""
    from agenttrail.collector.schema import migrate

    migrate(store, EVALUATOR_MIGRATIONS)
    store_reference_set(store, parse_reference_set(REFERENCES), source="test")
    now = time.time()
    refund = [{"name": "refund", "input": None}]
    runs = [agent_run(start=now + i, trace_id=new_trace_id(), task="refund", tools=refund) for i in range(4)]
    rows = [run_row(run) for run in runs]
    malformed = {
        runs[0].trace_id: '[{"input": {}}]',
        runs[1].trace_id: '{"name": "refund"}',
        runs[2].trace_id: '[["refund"]]',
    }
    rows = [row._replace(ToolCalls=malformed.get(row.TraceId, row.ToolCalls)) for row in rows]
    insert_trajectories(store, rows)
    worker = EvaluatorWorker(store.clone, EvaluatorConfig(batch_size=8), worker_id="w")
    try:
        while worker.run_once():
            pass
    finally:
        worker.stop()
    decisions = dict(store.query("SELECT TraceId, Detail FROM evaluation_decisions FINAL"))
    assert set(decisions) == {run.trace_id for run in runs}
    assert "must be an object with a name, got {'input': {}}" in decisions[runs[0].trace_id]
    assert "must be a list of calls, got {'name': 'refund'}" in decisions[runs[1].trace_id]
    assert "must be an object with a name, got ['refund']" in decisions[runs[2].trace_id]
    assert not decisions[runs[3].trace_id].startswith("cannot score")
    scored = {trace for (trace,) in store.query("SELECT DISTINCT TraceId FROM scores")}
    assert scored == {runs[3].trace_id}
