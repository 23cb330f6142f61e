"""What a reload of a config section changed among its named definitions (judges, alert rules,
alert channels): one shape for the judges' and the alerts' reloads, their logs, admin answers
and CLI lines."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def reads_other_file(config_file: str | None, answer: Mapping[str, Any]) -> bool:
    """A reload's admin `answer` came from a sidecar reading another config file than the one
    the caller named (the CLI says so: the sidecar reloads its own file)."""
    return bool(config_file) and Path(str(config_file)).resolve() != Path(answer["config_file"])


@dataclass(frozen=True, slots=True)
class NamedChanges:
    """Names added, changed (definition not equal), removed and unchanged: in the new section's
    order, removed ones in the old's."""

    added: list[str]
    changed: list[str]
    removed: list[str]
    unchanged: list[str]

    @classmethod
    def between(cls, before: Mapping[str, Any], after: Mapping[str, Any]) -> NamedChanges:
        return cls(
            added=[name for name in after if name not in before],
            changed=[name for name in after if name in before and before[name] != after[name]],
            removed=[name for name in before if name not in after],
            unchanged=[name for name in after if name in before and before[name] == after[name]],
        )

    @classmethod
    def from_json(cls, answer: Mapping[str, Any]) -> NamedChanges:
        return cls(*(list(answer[key]) for key in ("added", "changed", "removed", "unchanged")))

    def to_json(self) -> dict[str, list[str]]:
        return {
            "added": self.added,
            "changed": self.changed,
            "removed": self.removed,
            "unchanged": self.unchanged,
        }

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)

    def describe(self) -> str:
        """`added a, b; changed c; removed d`, or "" when nothing changed."""
        parts = (("added", self.added), ("changed", self.changed), ("removed", self.removed))
        return "; ".join(f"{what} {', '.join(names)}" for what, names in parts if names)
