"""A criteria set as a judge: the Judge protocol, saved sets read on first use, config errors."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from agenttrail.collector.errors import ConfigError
from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store
from agenttrail.evaluators.judges.base import Judge, JudgeInput
from agenttrail.evaluators.judges.criteria.judge import CriteriaJudge, bind_store, criteria_judge_factory
from agenttrail.evaluators.judges.criteria.model import parse_criteria_set
from agenttrail.evaluators.judges.criteria.runs import run_from_json
from agenttrail.evaluators.judges.criteria.sets import CRITERIA_MIGRATIONS, save_set
from agenttrail.evaluators.judges.registry import build_judge

from .support import SET_DOCUMENT, answer_by_steps, client_for, run_doc, write_set


def a_run(steps: int) -> JudgeInput:
    return run_from_json(run_doc([f"t{i}" for i in range(steps)])).judge_input


def test_saved_set_is_read_on_first_use(serve: Any, store: Store) -> None:
    """The judge is built before the set exists (as the sidecar does) and reads the newest at first use."""
    bind_store(store.clone)
    judge: Judge = build_judge(
        "refund-criteria",
        {"type": "criteria", "criteria_set": "refunds"},
        client_for(serve(answer_by_steps)),
        "cfg",
    )
    migrate(store, CRITERIA_MIGRATIONS)
    saved = save_set(store, parse_criteria_set(SET_DOCUMENT, "t"), source="t").stored
    results = judge.evaluate(a_run(2))
    assert judge.version == saved.version
    assert [(r.metric, r.label, r.score, r.version) for r in results] == [
        ("refunds:completeness", "all steps", 2.0, saved.version),
        ("refunds:politeness", "polite", 1.0, saved.version),
    ]


def test_a_pinned_version_keeps_its_criteria(serve: Any, store: Store) -> None:
    """version: 1 keeps scoring with version 1 after a version 2 is saved."""
    migrate(store, CRITERIA_MIGRATIONS)
    first = save_set(store, parse_criteria_set(SET_DOCUMENT, "t"), source="t").stored
    second = copy.deepcopy(SET_DOCUMENT)
    second["criteria"] = second["criteria"][:1]
    save_set(store, parse_criteria_set(second, "t"), source="t")
    bind_store(store.clone)
    llm = serve(answer_by_steps)
    pinned = criteria_judge_factory("j", {"criteria_set": "refunds", "version": 1}, client_for(llm), "cfg")
    newest = criteria_judge_factory("j", {"criteria_set": "refunds"}, client_for(llm), "cfg")
    assert len(pinned.evaluate(a_run(1))) == 2
    assert pinned.version == first.version
    assert len(newest.evaluate(a_run(1))) == 1


def test_a_file_runs_under_its_draft_version(serve: Any, tmp_path: Path) -> None:
    """file: scores with a set that is not saved, versioned by its content hash."""
    judge = criteria_judge_factory(
        "j", {"file": write_set(tmp_path / "s.json")}, client_for(serve(answer_by_steps)), "c"
    )
    assert isinstance(judge, CriteriaJudge)
    assert judge.version == parse_criteria_set(SET_DOCUMENT, "t").draft_version
    assert [r.label for r in judge.evaluate(a_run(0))] == ["missing steps", "polite"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"criteria_set": "a", "colour": 1}, r"cfg: unknown criteria option\(s\) \['colour'\]"),
        ({"criteria_set": "a", "file": "x"}, "give one of criteria_set"),
        ({}, "give one of criteria_set"),
        ({"criteria_set": "a", "version": 0}, "positive whole number"),
        ({"definition": SET_DOCUMENT, "version": 2}, "saved sets"),
        ({"definition": {"name": "x", "criteria": []}}, "non-empty list"),
    ],
)
def test_bad_options_are_config_errors(options: dict[str, Any], message: str, serve: Any) -> None:
    """Bad judge options raise ConfigError naming the source and what is wrong."""
    with pytest.raises(ConfigError, match=message):
        criteria_judge_factory("j", options, client_for(serve(answer_by_steps)), "cfg")


def test_the_sidecar_binds_its_store(serve: Any, start_sidecar: Any) -> None:
    """In a running sidecar a saved set's judge reads the set from the sidecar's own store."""
    sidecar = start_sidecar()
    save_set(sidecar.store, parse_criteria_set(SET_DOCUMENT, "t"), source="t")
    judge = criteria_judge_factory(
        "j", {"criteria_set": "refunds"}, client_for(serve(answer_by_steps)), "cfg"
    )
    assert [r.score for r in judge.evaluate(a_run(3))] == [2.0, 1.0]
