"""Store reference sets in ClickHouse, versioned per task, and read the current ones back."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from agenttrail.collector.store import Store
from agenttrail.evaluators.scoring.references import ReferenceEntry, ReferenceSet, content_hash
from agenttrail.evaluators.scoring.schema import ReferenceRow

_LATEST = """
SELECT Task, argMax(Version, Version), argMax(Entry, Version), argMax(ContentHash, Version),
       argMax(Source, Version), toUnixTimestamp64Milli(argMax(LoadedAt, Version))
FROM references FINAL GROUP BY Task ORDER BY Task
"""


@dataclass(frozen=True, slots=True)
class StoredReference:
    entry: ReferenceEntry
    version: int
    content_hash: str
    source: str
    loaded_at_ms: int


@dataclass(frozen=True, slots=True)
class LoadResult:
    added: list[str]  # tasks new to the store
    updated: list[str]  # tasks whose reference changed: a new version
    unchanged: list[str]


def latest_references(store: Store) -> dict[str, StoredReference]:
    """The newest version of every task's reference."""
    result: dict[str, StoredReference] = {}
    for task, version, entry, digest, source, loaded in store.query(_LATEST):
        result[task] = StoredReference(
            ReferenceEntry.from_json(json.loads(entry)), int(version), digest, source, int(loaded)
        )
    return result


def reference_rows(store: Store) -> list[dict[str, Any]]:
    """Every task's current reference with its version: `references list --format json`."""
    return [
        {
            "task": task,
            "version": stored.version,
            "content_hash": stored.content_hash,
            "source": stored.source,
            **stored.entry.to_json(),
        }
        for task, stored in latest_references(store).items()
    ]


def store_reference_set(store: Store, reference_set: ReferenceSet, *, source: str) -> LoadResult:
    """Add a version for every task whose reference differs from the stored one; loading the
    same file twice adds nothing."""
    current = latest_references(store)
    rows: list[ReferenceRow] = []
    added: list[str] = []
    updated: list[str] = []
    unchanged: list[str] = []
    now = f"{time.time():.3f}"
    for task in sorted(reference_set.entries):
        entry = reference_set.entries[task]
        digest = content_hash([entry])
        existing = current.get(task)
        if existing is not None and existing.content_hash == digest:
            unchanged.append(task)
            continue
        version = existing.version + 1 if existing is not None else 1
        (updated if existing is not None else added).append(task)
        rows.append(
            ReferenceRow(task, version, json.dumps(entry.to_json(), ensure_ascii=False), digest, source, now)
        )
    store.insert("references", rows)
    return LoadResult(added, updated, unchanged)
