"""Criteria set documents: round trips, ordering of accepted values, content hashes, file formats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenttrail.evaluators.judges.criteria.model import (
    CriteriaError,
    dump_document,
    load_criteria_file,
    parse_criteria_set,
)

from .support import SET_DOCUMENT

words = st.text(alphabet="abcdefghij ", min_size=1, max_size=12).filter(lambda s: s.strip())


@st.composite
def documents(draw: Any) -> dict[str, Any]:
    names = draw(
        st.lists(words.map(str.strip), min_size=1, max_size=4, unique_by=lambda s: " ".join(s.split()))
    )
    criteria = []
    for name in names:
        labels = draw(st.lists(words.map(str.strip), min_size=2, max_size=4, unique_by=str.casefold))
        values = draw(st.lists(st.integers(-5, 10), min_size=len(labels), max_size=len(labels), unique=True))
        criteria.append(
            {
                "name": name,
                "description": f"About {name}.",
                "accepted_values": [{"label": lb, "value": v} for lb, v in zip(labels, values, strict=True)],
            }
        )
    return {"name": "s", "task": "t", "criteria": criteria}


@given(documents())
def test_round_trip_and_sorted_values(document: dict[str, Any]) -> None:
    """Parsing what to_json wrote gives the same set; accepted values are ordered by number."""
    parsed = parse_criteria_set(document, "doc")
    assert parse_criteria_set(parsed.to_json(), "again") == parsed
    for criterion in parsed.criteria:
        numbers = [a.value for a in criterion.accepted_values]
        assert numbers == sorted(numbers)


def test_hash_ignores_name_and_notes_but_not_criteria() -> None:
    """The content hash (what a version means) follows task and criteria only."""
    base = parse_criteria_set(SET_DOCUMENT, "t")
    renamed = parse_criteria_set({**SET_DOCUMENT, "notes": {"x": 1}}, "t", name="other")
    retasked = parse_criteria_set({**SET_DOCUMENT, "task": "Something else"}, "t")
    assert base.content_hash == renamed.content_hash
    assert base.content_hash != retasked.content_hash


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_files_round_trip(tmp_path: Path, suffix: str) -> None:
    """A set written as JSON or YAML reads back equal."""
    parsed = parse_criteria_set(SET_DOCUMENT, "t")
    path = tmp_path / f"set{suffix}"
    dump_document(parsed.to_json(), path)
    assert load_criteria_file(path) == parsed
    assert path.read_text().startswith("{" if suffix == ".json" else "name: refunds")


def test_unreadable_files_say_which(tmp_path: Path) -> None:
    """A missing file and a broken one are CriteriaErrors naming the file."""
    with pytest.raises(CriteriaError, match="cannot read"):
        load_criteria_file(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("criteria: [")
    with pytest.raises(CriteriaError, match=r"broken\.yaml is neither JSON nor YAML"):
        load_criteria_file(broken)
