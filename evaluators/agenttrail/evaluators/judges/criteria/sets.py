"""Reviewed criteria sets in the store, versioned: saving changed content adds a version.

A version is a number that increases per set name plus the content hash of what the
quantifier sees (task and criteria). Saving the same content again adds nothing. Scores carry
`EvaluatorVersion` = "v<number>-<hash12>", so results of different versions never mix.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

from agenttrail.collector.schema import Migration
from agenttrail.collector.store import Store
from agenttrail.evaluators.judges.criteria.model import CriteriaError, CriteriaSet, parse_criteria_set

CRITERIA_SETS = """
CREATE TABLE IF NOT EXISTS criteria_sets (
    Name String,
    Version UInt32,
    ContentHash String,
    Definition String,
    Source String,
    SavedAt DateTime64(3)
) ENGINE = ReplacingMergeTree
ORDER BY (Name, Version)
"""


class CriteriaSetRow(NamedTuple):
    """A `criteria_sets` row: one saved version of a set."""

    Name: str
    Version: int
    ContentHash: str
    Definition: str  # CriteriaSet.to_json as JSON text
    Source: str
    SavedAt: str  # `seconds.fraction` text


CRITERIA_MIGRATIONS: tuple[Migration, ...] = (
    Migration(115, "criteria sets (AgentEval criteria discovery)", (CRITERIA_SETS,)),
)

_COLUMNS = "Name, Version, ContentHash, Definition, Source, toUnixTimestamp64Milli(SavedAt)"


@dataclass(frozen=True, slots=True)
class StoredCriteriaSet:
    criteria_set: CriteriaSet
    number: int
    content_hash: str
    source: str
    saved_at_ms: int

    @property
    def version(self) -> str:
        return f"v{self.number}-{self.content_hash[:12]}"

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> StoredCriteriaSet:
        name, number, digest, definition, source, saved = row
        parsed = parse_criteria_set(json.loads(definition), f"stored criteria set {name} v{number}")
        return cls(parsed, int(number), digest, source, int(saved))


@dataclass(frozen=True, slots=True)
class SaveResult:
    stored: StoredCriteriaSet
    added: bool  # False: the same content was already the latest version


def latest_sets(store: Store) -> list[StoredCriteriaSet]:
    """The newest version of every set, by name."""
    sql = f"SELECT {_COLUMNS} FROM criteria_sets FINAL ORDER BY Name, Version DESC LIMIT 1 BY Name"
    return [StoredCriteriaSet.from_row(row) for row in store.query(sql)]


def set_versions(store: Store, name: str) -> list[StoredCriteriaSet]:
    """Every version of one set, newest first."""
    sql = f"SELECT {_COLUMNS} FROM criteria_sets FINAL WHERE Name = {{name:String}} ORDER BY Version DESC"
    return [StoredCriteriaSet.from_row(row) for row in store.query(sql, {"name": name})]


def get_set(store: Store, name: str, version: int | None = None) -> StoredCriteriaSet:
    """One version of a set (the newest by default); CriteriaError says what exists."""
    versions = set_versions(store, name)
    if not versions:
        known = ", ".join(s.criteria_set.name for s in latest_sets(store)) or "none saved yet"
        raise CriteriaError(f"no criteria set named {name!r} (known: {known}); save one with `criteria save`")
    if version is None:
        return versions[0]
    for stored in versions:
        if stored.number == version:
            return stored
    numbers = ", ".join(str(s.number) for s in reversed(versions))
    raise CriteriaError(f"criteria set {name!r} has no version {version} (versions: {numbers})")


def save_set(store: Store, criteria_set: CriteriaSet, *, source: str) -> SaveResult:
    """Add a version when the content differs from the newest one; otherwise return that one."""
    versions = set_versions(store, criteria_set.name)
    digest = criteria_set.content_hash
    if versions and versions[0].content_hash == digest:
        return SaveResult(versions[0], added=False)
    number = versions[0].number + 1 if versions else 1
    now = time.time()
    definition = json.dumps(criteria_set.to_json(), ensure_ascii=False)
    store.insert(
        "criteria_sets", [CriteriaSetRow(criteria_set.name, number, digest, definition, source, f"{now:.3f}")]
    )
    return SaveResult(StoredCriteriaSet(criteria_set, number, digest, source, int(now * 1000)), added=True)
