"""The references, scores and worker commands' service functions, called without click, on a
real chDB store."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from agenttrail.collector.cli import config_from
from agenttrail.collector.queries import QueryError
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.scoring.references import ReferenceSetError
from agenttrail.evaluators.scoring.service import (
    WorkerStoreError,
    load_references,
    references_read,
    scores_read,
    start_worker,
)
from agenttrail.evaluators.scoring.worker import EvaluatorConfig

REFUND = {"reference_trajectory": [{"tool_name": "lookup"}, {"tool_name": "refund"}]}
FAQ = {"reference_trajectory": [{"tool_name": "search"}]}


def write_refs(path: Path, **tasks: Any) -> str:
    path.write_text(yaml.safe_dump(tasks))
    return str(path)


def test_load_references_versions_changed_tasks_only(store: Any, tmp_path: Path) -> None:
    refs = write_refs(tmp_path / "refs.yaml", refund=REFUND, faq=FAQ)
    opened: list[Any] = []

    def open_store() -> Any:
        opened.append(store.clone())
        return opened[-1]

    first = load_references(refs, open_store, ALL_MIGRATIONS)
    assert (first.added, first.updated, first.unchanged) == (["faq", "refund"], [], [])
    changed = {
        "reference_trajectory": [{"tool_name": "lookup"}, {"tool_name": "approve"}, {"tool_name": "refund"}]
    }
    write_refs(tmp_path / "refs.yaml", refund=changed, faq=FAQ)
    again = load_references(refs, open_store, ALL_MIGRATIONS)
    assert (again.added, again.updated, again.unchanged) == ([], ["refund"], ["faq"])
    assert len(opened) == 2

    read = references_read()
    rows = {row["task"]: row for row in read.local(store)}
    assert (read.route, sorted(rows)) == ("/api/v1/references", ["faq", "refund"])
    assert rows["refund"]["version"] == 2
    assert [call["name"] for call in rows["refund"]["reference_trajectory"]] == [
        "lookup",
        "approve",
        "refund",
    ]
    assert rows["faq"]["source"] == refs


def test_a_bad_reference_file_opens_no_store(tmp_path: Path) -> None:
    bad = write_refs(tmp_path / "refs.yaml", refund={"reference_trajectory": [{"tool_input": {}}]})
    with pytest.raises(ReferenceSetError, match="refund"):
        load_references(bad, lambda: pytest.fail("no store is opened for a bad file"))


def insert_scores(store: Any, rows: list[tuple[str, str, float]]) -> None:
    columns = ("TraceId", "RootSpanId", "Metric", "Evaluator", "EvaluatorVersion", "Score", "Agent", "Task")
    columns += ("RunStart", "CreatedAt")
    now = time.time()
    store.insert_rows(
        "scores",
        columns,
        [
            (trace, "r", metric, "trajectory", "v1", score, "bot", "refund", f"{now - 60:.6f}", f"{now:.6f}")
            for trace, metric, score in rows
        ],
    )


def test_scores_read_filters_by_metric_and_trace(store: Any) -> None:
    from agenttrail.collector.schema import migrate

    migrate(store, ALL_MIGRATIONS)
    one, two = os.urandom(16).hex(), os.urandom(16).hex()
    insert_scores(store, [(one, "recall", 0.5), (one, "precision", 1.0), (two, "recall", 0.25)])
    read = scores_read(since="1h", metric="recall")
    assert (read.route, read.params["metric"]) == ("/api/v1/scores", "recall")
    assert sorted(row["score"] for row in read.local(store)) == [0.25, 0.5]
    [only] = scores_read(trace_id=one, metric="precision").local(store)
    assert (only["trace_id"], only["score"]) == (one, 1.0)
    with pytest.raises(QueryError, match="later"):
        scores_read(since="later")


def test_the_worker_refuses_the_embedded_store(tmp_path: Path) -> None:
    config = config_from({"store": str(tmp_path / "store")}, None)
    with pytest.raises(WorkerStoreError, match="`agenttrail serve` already runs the evaluator"):
        start_worker(config, EvaluatorConfig(), ALL_MIGRATIONS)
    assert not (tmp_path / "store").exists()
