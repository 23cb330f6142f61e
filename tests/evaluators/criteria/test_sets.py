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
from agenttrail.evaluators.cli_criteria import criteria
from agenttrail.evaluators.criteria.model import CriteriaError, parse_criteria_set
from agenttrail.evaluators.criteria.sets import CRITERIA_MIGRATIONS, get_set, latest_sets, save_set

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
