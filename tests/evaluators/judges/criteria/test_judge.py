"""A criteria set as a judge: the Judge protocol, saved sets read on first use, config errors."""

from __future__ import annotations

import copy
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from agenttrail.collector.errors import ConfigError
from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store, parse_store
from agenttrail.evaluators.judges.base import Judge, JudgeInput
from agenttrail.evaluators.judges.criteria.judge import CriteriaJudge, criteria_judge_factory
from agenttrail.evaluators.judges.criteria.model import parse_criteria_set
from agenttrail.evaluators.judges.criteria.runs import run_from_json
from agenttrail.evaluators.judges.criteria.sets import CRITERIA_MIGRATIONS, save_set
from agenttrail.evaluators.judges.registry import build_judge
from agenttrail.evaluators.judges.worker import JudgeWorker

from .support import SET_DOCUMENT, answer_by_steps, client_for, run_doc, write_set


def a_run(steps: int) -> JudgeInput:
    return run_from_json(run_doc([f"t{i}" for i in range(steps)])).judge_input


def test_saved_set_is_read_on_first_use(serve: Any, store: Store) -> None:
    """The judge is built before the set exists (as the sidecar does) and reads the newest at first use."""
    judge: Judge = build_judge(
        "refund-criteria",
        {"type": "criteria", "criteria_set": "refunds"},
        client_for(serve(answer_by_steps)),
        "cfg",
        store_factory=store.clone,
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
    llm = serve(answer_by_steps)
    pinned = criteria_judge_factory(
        "j", {"criteria_set": "refunds", "version": 1}, client_for(llm), "cfg", store_factory=store.clone
    )
    newest = criteria_judge_factory(
        "j", {"criteria_set": "refunds"}, client_for(llm), "cfg", store_factory=store.clone
    )
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


def test_a_saved_set_without_a_store_says_to_name_one(serve: Any) -> None:
    """Built with no store (a CLI command given no --store), a saved-set judge is a ConfigError
    saying where the set could come from instead."""
    with pytest.raises(ConfigError, match="none was named: pass --store DIR"):
        criteria_judge_factory("j", {"criteria_set": "refunds"}, client_for(serve(answer_by_steps)), "cfg")


def test_each_sidecar_reads_its_own_store(
    serve: Any, start_sidecar: Any, chdb_dir: Path, tmp_path: Path
) -> None:
    """Two sidecars in one process, each with a saved set `refunds` of its own in its own
    database: each one's configured judge scores with its own sidecar's set (the store is passed
    to each judge it builds, on start and on reload, not bound once for the process)."""
    llm = serve(answer_by_steps)
    config = tmp_path / "judges.yaml"
    judge = {"name": "j", "type": "criteria", "model": "m", "base_url": llm.base_url, "api_key": "t"}
    config.write_text(yaml.safe_dump({"judges": [{**judge, "options": {"criteria_set": "refunds"}}]}))
    one_criterion = copy.deepcopy(SET_DOCUMENT)
    one_criterion["criteria"] = one_criterion["criteria"][:1]
    sidecars = []
    for index, document in enumerate([SET_DOCUMENT, one_criterion]):
        database = f"own_{index}_{uuid.uuid4().hex[:8]}"
        own = Store(parse_store(str(chdb_dir), database))
        migrate(own, CRITERIA_MIGRATIONS)
        save_set(own, parse_criteria_set(document, "t"), source="t")  # before start: the worker reads it
        own.close()
        sidecars.append(
            start_sidecar(str(config), database=database, spool_dir=str(tmp_path / f"spool{index}"))
        )
    # A reload of the first sidecar's judges, now that the second exists, still reads its own store.
    before = online_judge(sidecars[0])
    assert sidecars[0].reload()
    deadline = time.monotonic() + 60
    while online_judge(sidecars[0]) is before:  # the worker takes the new judges on its next cycle
        assert time.monotonic() < deadline, "the reloaded judges were not taken within 60 s"
        time.sleep(0.05)
    first, second = (online_judge(sidecar) for sidecar in sidecars)
    assert [r.metric for r in first.evaluate(a_run(3))] == ["refunds:completeness", "refunds:politeness"]
    assert [r.metric for r in second.evaluate(a_run(3))] == ["refunds:completeness"]


def online_judge(sidecar: Any) -> Judge:
    worker = next(w for w in sidecar.workers if isinstance(w, JudgeWorker))
    return worker.judges[0].judge


def test_cli_audit_reads_a_saved_sets_version_from_the_store(
    store: Store, chdb_dir: Path, database: str, tmp_path: Path
) -> None:
    """`agenttrail audit` without a sidecar builds the configured judges on the store it reads, so
    a saved-set criteria judge lists the saved version (it used to fail: no store to read it from)."""
    from click.testing import CliRunner
    from trajectory_rows import agent_run, store_runs

    from agenttrail.evaluators.cli.main import cli
    from agenttrail.evaluators.composition import ALL_MIGRATIONS

    migrate(store, ALL_MIGRATIONS)
    saved = save_set(store, parse_criteria_set(SET_DOCUMENT, "t"), source="t").stored
    [run] = store_runs(store, [agent_run(start=time.time() - 60, tools=["lookup"])])
    config = tmp_path / "agenttrail.yaml"
    judge = {
        "name": "rq",
        "type": "criteria",
        "model": "m",
        "api_key": "k",
        "options": {"criteria_set": "refunds"},
    }
    config.write_text(yaml.safe_dump({"judges": [judge]}))
    where = ["--store", str(chdb_dir), "--database", database, "--config", str(config)]
    result = CliRunner().invoke(cli, ["audit", run.trace_id, *where, "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = {row["evaluator"]: row for row in map(json.loads, result.output.splitlines())}
    assert (rows["rq"]["version"], rows["rq"]["decision"]) == (saved.version, "pending")
