"""Adding or editing a task's reference from the console, and re-scoring the runs it affects.

The reference is stored exactly as `agenttrail references load` stores it (a new version per
changed task). Re-scoring goes through the online evaluator (`scoring.rescore`, which
`agenttrail references load --rescore` uses too): the task's runs within its `lookback_s` go
back in its queue and are scored against the new version; the page says how many runs were queued.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.store import Store
from agenttrail.evaluators.scoring.reference_store import (
    LoadResult,
    StoredReference,
    latest_references,
    store_reference_set,
)
from agenttrail.evaluators.scoring.references import ReferenceSetError, parse_reference_set

_VERSIONS = """
SELECT Version, Entry, ContentHash, Source, toUnixTimestamp64Milli(LoadedAt)
FROM references FINAL WHERE Task = {task:String} ORDER BY Version DESC
"""


class ReferenceFormError(AgentTrailError, ValueError):
    """What the user typed is not a valid reference; the message says which field and why."""


def versions(store: Store, task: str) -> list[dict[str, Any]]:
    return [
        {
            "version": int(v),
            "entry": json.loads(entry),
            "hash": digest,
            "source": source,
            "loaded_at_ms": int(at),
        }
        for v, entry, digest, source, at in store.query(_VERSIONS, {"task": task})
    ]


def entry_text(reference: StoredReference) -> str:
    """A stored entry as the YAML the edit form shows (without its task: the form has a field)."""
    document = reference.entry.to_json()
    document.pop("task")
    if document.get("expected_response") is None:
        document.pop("expected_response")
    for key in ("metrics", "options"):
        if not document.get(key):
            document.pop(key)
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)


def save_reference(store: Store, task: str, text: str, *, source: str) -> LoadResult:
    """Parse the form's YAML/JSON (an entry, or just a trajectory list) and store it for `task`."""
    task = task.strip()
    if not task:
        raise ReferenceFormError("task: give the task key the runs carry (agenttrail.task)")
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ReferenceFormError(f"reference: not valid YAML or JSON ({exc})") from exc
    if document is None:
        raise ReferenceFormError("reference: empty; give reference_trajectory: [...] or a list of calls")
    try:
        reference_set = parse_reference_set({task: document}, source="the form")
    except ReferenceSetError as exc:
        raise ReferenceFormError(str(exc)) from exc
    return store_reference_set(store, reference_set, source=source)


def reference_list(store: Store) -> list[tuple[str, StoredReference, int]]:
    """(task, current reference, runs of the task in the last day)."""
    references = latest_references(store)
    counts = (
        dict(
            store.query(
                "SELECT Task, count() FROM trajectories WHERE IsDeleted = 0 "
                "AND Task IN {tasks:Array(String)} AND Start >= now64(6) - toIntervalDay(1) GROUP BY Task",
                {"tasks": list(references)},
            )
        )
        if references
        else {}
    )
    return [(task, ref, int(counts.get(task, 0))) for task, ref in sorted(references.items())]
