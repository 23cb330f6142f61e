"""Robustness: repeated quantification flags unstable criteria and criteria that do not separate."""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from llm_server import Reply

from agenttrail.evaluators.cli.criteria import criteria
from agenttrail.evaluators.judges.criteria.robustness import mann_whitney_greater

from .support import judge_args, run_doc, user_text, write_runs, write_set

SCALE = [{"label": "bad", "value": 0}, {"label": "good", "value": 1}]
THREE = {
    "name": "checks",
    "criteria": [
        {"name": "outcome", "description": "The refund happened.", "accepted_values": SCALE},
        {"name": "mood", "description": "The answer's mood.", "accepted_values": SCALE},
        {"name": "format", "description": "The answer is plain text.", "accepted_values": SCALE},
    ],
}


def inconsistent_server() -> Any:
    """outcome follows the run (stable, separating); mood flips every call; format is always good."""
    flips = itertools.cycle(["bad", "good"])
    lock = threading.Lock()

    def respond(request: dict[str, Any]) -> Reply:
        with lock:
            mood = next(flips)
        outcome = "bad" if "FAILED" in user_text(request) else "good"
        return Reply.chat_json(
            {
                "outcome": {"label": outcome, "explanation": ""},
                "mood": {"label": mood, "explanation": ""},
                "format": {"label": "good", "explanation": ""},
            }
        )

    return respond


def test_flags_unstable_and_non_separating_criteria(serve: Any, tmp_path: Path) -> None:
    """k=4 repetitions: flipping answers are unstable, constant answers do not separate, outcome passes."""
    llm = serve(inconsistent_server())
    runs = write_runs(
        tmp_path / "runs.jsonl",
        [run_doc(["refund"]), run_doc(["refund"]),
         run_doc(["lookup"], failed=True, output="FAILED"), run_doc([], failed=True, output="FAILED")],
    )  # fmt: skip
    result = CliRunner().invoke(
        criteria,
        ["robustness", "--criteria-file", write_set(tmp_path / "set.json", THREE), "--runs-file", runs,
         "--repeat", "4", "--concurrency", "1", "--format", "json", *judge_args(llm)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert len(llm.chat_requests()) == 16
    report = {row["criterion"]: row for row in map(json.loads, result.stdout.splitlines())}
    outcome, mood, fmt = report["outcome"], report["mood"], report["format"]
    assert outcome["flags"] == []
    assert (outcome["success_mean"], outcome["failure_mean"], outcome["spread"]) == (1.0, 0.0, 0.0)
    assert 0 < outcome["p_value"] < 0.2  # 2 vs 2 runs, tied within groups
    assert "unstable" in mood["flags"]
    assert mood["spread"] == pytest.approx(0.5)
    assert mood["mean"] == pytest.approx(0.5)
    assert fmt["flags"] == ["does not separate"]
    assert fmt["gap"] == 0.0
    assert fmt["values"] == 16
    assert "2 successful, 2 failed (failure flag)" in result.stderr


def test_table_names_the_flags(serve: Any, tmp_path: Path) -> None:
    """The table output lists each criterion with its flags, "ok" when none."""
    llm = serve(inconsistent_server())
    runs = write_runs(
        tmp_path / "runs.jsonl", [run_doc(["refund"]), run_doc([], failed=True, output="FAILED")]
    )
    result = CliRunner().invoke(
        criteria,
        ["robustness", "--criteria-file", write_set(tmp_path / "set.json", THREE), "--runs-file", runs,
         "--repeat", "2", "--concurrency", "1", *judge_args(llm)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line for line in result.stdout.splitlines()[2:]}
    assert lines["outcome"].endswith("ok")
    assert "unstable" in lines["mood"]
    assert lines["format"].endswith("does not separate")


def test_mann_whitney_needs_both_groups() -> None:
    """The p-value is None without one of the groups and small for a clear separation."""
    assert mann_whitney_greater([1.0, 1.0], []) is None
    assert mann_whitney_greater([3.0, 4.0, 5.0, 6.0], [0.0, 1.0, 2.0, 0.5]) == pytest.approx(1 / 70)
