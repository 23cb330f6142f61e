"""`agenttrail evaluate`'s service functions, called without click: the judges its --judge values
name, and a dataset read, run and scored."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from agenttrail.collector.errors import ConfigError
from agenttrail.evaluators.judges.rubric import RubricJudge
from agenttrail.evaluators.offline.datasets import DatasetError
from agenttrail.evaluators.offline.service import (
    JudgeClash,
    OfflineJudges,
    build_offline_judges,
    evaluate_dataset,
)

SEARCH = {"tool_name": "search", "tool_input": {"q": "x"}}
DEFAULTS = {"model": "m", "base_url": "http://127.0.0.1:9/v1"}


def dataset(tmp_path: Path, rows: list[Any]) -> Path:
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_evaluate_dataset_runs_the_agent_and_scores_each_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    path = dataset(
        tmp_path, [{"prompt": "x", "reference_trajectory": [SEARCH]}, {"reference_trajectory": []}]
    )
    report = evaluate_dataset(path, ["trajectory_exact_match"], agent="evaluators.offline.sample_agent:run")
    first, bad = report.instances
    assert (first.metrics["trajectory_exact_match"], first.metrics["failure"]) == (1.0, 0.0)
    assert bad.error is not None
    assert bad.error.field == "query"


def test_evaluate_dataset_without_an_agent_scores_the_file(tmp_path: Path) -> None:
    path = dataset(tmp_path, [{"predicted_trajectory": [SEARCH], "reference_trajectory": [SEARCH, SEARCH]}])
    [only] = evaluate_dataset(path, ["trajectory_recall"]).instances
    assert only.metrics["trajectory_recall"] == 0.5


def test_bad_input_is_the_wings_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetError):
        evaluate_dataset(tmp_path / "missing.jsonl")
    with pytest.raises(ValueError, match="trajectory_nope") as raised:
        evaluate_dataset(dataset(tmp_path, []), ["trajectory_nope"])
    assert not isinstance(raised.value, JudgeClash)


def test_a_judge_reporting_a_metric_name_is_a_clash(tmp_path: Path) -> None:
    path = dataset(tmp_path, [{"predicted_trajectory": [SEARCH], "response": "ok"}])
    judging = build_offline_judges(["final_response"], DEFAULTS)
    assert [type(judge) for judge in judging.judges] == [RubricJudge]
    renamed = OfflineJudges([_Named(judging.judges[0], "latency")])
    with pytest.raises(JudgeClash, match="latency reported twice"):
        evaluate_dataset(path, (), renamed)


def test_judge_files_and_their_errors(tmp_path: Path) -> None:
    """A file of definitions (scheduling keys ignored); a value that is neither a type nor a file,
    and a saved criteria set with no store, are ConfigErrors before any row."""
    judges = tmp_path / "judges.yaml"
    judges.write_text(
        json.dumps([{"name": "done", "type": "task_completion", "sample_rate": 0.1, "concurrency": 3}])
    )
    judging = build_offline_judges([str(judges)], DEFAULTS)
    assert ([judge.name for judge in judging.judges], judging.workers) == (["done"], 3)
    with pytest.raises(ConfigError, match="neither a judge type"):
        build_offline_judges(["nope"], DEFAULTS)
    saved = tmp_path / "saved.yaml"
    saved.write_text(json.dumps([{"name": "rq", "type": "criteria", "options": {"criteria_set": "refunds"}}]))
    with pytest.raises(ConfigError, match="pass --store DIR"):
        build_offline_judges([str(saved)], DEFAULTS)


class _Named:
    """A judge under another name."""

    def __init__(self, judge: Any, name: str) -> None:
        self._judge, self.name, self.version = judge, name, judge.version

    def evaluate(self, run: Any) -> Any:
        return self._judge.evaluate(run)
