"""Saved criteria sets: versions by content, list/show, and the store held by a running sidecar."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from agenttrail.collector.schema import migrate
from agenttrail.evaluators.cli.criteria import criteria
from agenttrail.evaluators.judges.criteria.model import CriteriaError, parse_criteria_set
from agenttrail.evaluators.judges.criteria.sets import CRITERIA_MIGRATIONS, get_set, latest_sets, save_set

from .support import SET_DOCUMENT, store_args, write_set


def edited(**changes: Any) -> dict[str, Any]:
    document = copy.deepcopy(SET_DOCUMENT)
    document.update(changes)
    return document


def test_versions_follow_content_not_notes(store: Any) -> None:
    """Same content saves nothing; changed criteria add the next version; notes alone change nothing."""
    migrate(store, CRITERIA_MIGRATIONS)
    first = save_set(store, parse_criteria_set(SET_DOCUMENT, "t"), source="a.yaml")
    again = save_set(store, parse_criteria_set(edited(notes={"merged": []}), "t"), source="b.yaml")
    changed_doc = edited()
    changed_doc["criteria"][1]["description"] = "The final answer is polite and warm."
    changed = save_set(store, parse_criteria_set(changed_doc, "t"), source="c.yaml")
    assert (first.added, first.stored.number) == (True, 1)
    assert (again.added, again.stored.number) == (False, 1)
    assert (changed.added, changed.stored.number) == (True, 2)
    assert first.stored.version.startswith("v1-")
    assert changed.stored.version != first.stored.version
    assert get_set(store, "refunds").number == 2
    assert get_set(store, "refunds", 1).criteria_set.criteria[1].description == "The final answer is polite."
    assert [s.criteria_set.name for s in latest_sets(store)] == ["refunds"]


def test_unknown_names_and_versions_say_what_exists(store: Any) -> None:
    """Asking for a missing set or version names the sets and versions there are."""
    migrate(store, CRITERIA_MIGRATIONS)
    save_set(store, parse_criteria_set(SET_DOCUMENT, "t"), source="a")
    with pytest.raises(CriteriaError, match=r"no criteria set named 'nope' \(known: refunds\)"):
        get_set(store, "nope")
    with pytest.raises(CriteriaError, match=r"no version 5 \(versions: 1\)"):
        get_set(store, "refunds", 5)


def invoke(*args: str) -> Any:
    return CliRunner().invoke(criteria, list(args))


def test_cli_save_list_show(chdb_dir: Path, database: str, tmp_path: Path) -> None:
    """save (with --name), list and show round-trip a reviewed set; a second save says unchanged."""
    target = store_args(chdb_dir, database)
    path = write_set(tmp_path / "set.json")
    saved = invoke("save", path, "--name", "refund-quality", *target)
    assert saved.exit_code == 0, saved.output
    assert saved.output.startswith("saved refund-quality version 1 (v1-")
    assert "unchanged: version 1" in invoke("save", path, "--name", "refund-quality", *target).output
    listed = invoke("list", *target, "--format", "json")
    [row] = [json.loads(line) for line in listed.stdout.splitlines()]
    assert (row["name"], row["number"], row["source"]) == ("refund-quality", 1, path)
    table = invoke("list", *target).stdout.splitlines()
    assert table[2].split()[:2] == ["refund-quality", row["version"]]
    shown = invoke("show", "refund-quality", *target)
    assert shown.exit_code == 0, shown.output
    body = yaml.safe_load(shown.stdout)
    assert body["name"] == "refund-quality"
    assert [c["name"] for c in body["criteria"]] == ["completeness", "politeness"]


def test_cli_save_refuses_a_proposals_file(chdb_dir: Path, database: str, tmp_path: Path) -> None:
    """Saving a critic's proposals file (not yet consolidated) is refused, naming the unknown key."""
    path = tmp_path / "proposals.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "proposals": []}))
    result = invoke("save", str(path), *store_args(chdb_dir, database))
    assert result.exit_code == 1
    assert "unknown key(s) ['proposals']" in result.output


def test_save_refuses_while_serve_holds_the_store_and_reads_go_through_it(
    start_sidecar: Any, chdb_dir: Path, database: str, tmp_path: Path
) -> None:
    """With a sidecar holding the store, save says so politely; list/show read through its API."""
    sidecar = start_sidecar()
    migrate(sidecar.store, CRITERIA_MIGRATIONS)
    save_set(sidecar.store, parse_criteria_set(SET_DOCUMENT, "t"), source="before")
    result = invoke(
        "save", write_set(tmp_path / "set.json"), "--name", "other", *store_args(chdb_dir, database)
    )
    assert result.exit_code == 1
    assert "held by a running sidecar" in result.output
    listed = invoke("list", *store_args(chdb_dir, database), "--format", "json")
    assert listed.exit_code == 0, listed.output
    assert [json.loads(line)["name"] for line in listed.stdout.splitlines()] == ["refunds"]
    missing = invoke("show", "nope", *store_args(chdb_dir, database))
    assert missing.exit_code == 1
    assert "no criteria set named 'nope'" in missing.output


def test_a_missing_store_folder_is_created_by_save_and_named_by_show(tmp_path: Path) -> None:
    """save creates a store that does not exist yet; show on a missing folder says it does not
    exist and how to create it, never "pass --store" when --store was passed."""
    missing = invoke("show", "refund-quality", "--store", str(tmp_path / "nowhere"))
    assert missing.exit_code != 0
    assert f"no store at {tmp_path / 'nowhere'} (the folder does not exist)" in missing.output
    assert "or pass --store" not in missing.output
    target = ["--store", str(tmp_path / "new-store")]
    saved = invoke("save", write_set(tmp_path / "set.json"), "--name", "refund-quality", *target)
    assert saved.exit_code == 0, saved.output
    assert yaml.safe_load(invoke("show", "refund-quality", *target).stdout)["name"] == "refund-quality"


def test_the_documented_config_form_loads(tmp_path: Path) -> None:
    """The judges config shown in the criteria judge's docstring is accepted as it stands."""
    from agenttrail.evaluators.judges.config import JudgesConfig
    from agenttrail.evaluators.judges.criteria import judge as criteria_judge
    from agenttrail.evaluators.judges.registry import ClientPool
    from agenttrail.evaluators.judges.setup import build_online_judge

    doc = criteria_judge.__doc__ or ""
    block = doc.split("In a judges config", 1)[1].split("\n\n", 2)[1]
    document = {**yaml.safe_load(block), "judge_defaults": {"model": "m", "api_key": "k"}}
    [spec] = JudgesConfig.from_document(document, "docstring").judges
    pool = ClientPool(
        store_factory=lambda: pytest.fail("the set is read on first use, not when the judge is built")
    )
    built = build_online_judge(spec, pool)  # as the sidecar builds it (with its store)
    assert isinstance(built.judge, criteria_judge.CriteriaJudge)
    assert spec.version is None  # the set's version is a type option, not the judge's pin


def test_offline_evaluate_reads_a_saved_set_from_store(serve: Any, tmp_path: Path) -> None:
    """`agenttrail evaluate --judge FILE --store DIR` runs a criteria judge naming a saved set;
    without --store the error says to pass it, with no internal function name."""
    from agenttrail.evaluators.cli.offline import evaluate_command

    from .support import answer_by_steps, judge_args

    llm = serve(answer_by_steps)
    target = ["--store", str(tmp_path / "store")]
    assert (
        invoke("save", write_set(tmp_path / "set.json"), "--name", "refund-quality", *target).exit_code == 0
    )
    judges = tmp_path / "judges.yaml"
    item = {"name": "rq", "type": "criteria", "options": {"criteria_set": "refund-quality"}}
    judges.write_text(yaml.safe_dump([item]))
    rows = tmp_path / "rows.jsonl"
    row = {"query": "refund order 7", "response": "done", "predicted_trajectory": [{"name": "refund"}]}
    rows.write_text(json.dumps(row) + "\n")
    args = [str(rows), "--judge", str(judges), *judge_args(llm), "--format", "json"]
    unbound = CliRunner().invoke(evaluate_command, args)
    assert unbound.exit_code == 2
    assert "pass --store DIR" in unbound.output
    assert "store_factory" not in unbound.output
    result = CliRunner().invoke(evaluate_command, [*args, *target])
    assert result.exit_code == 0, result.output
    [instance] = json.loads(result.stdout)["instances"]
    assert instance["judges"]["refund-quality:completeness"]["label"] == "some steps"
    assert instance["judges"]["refund-quality:politeness"]["score"] == 1.0
