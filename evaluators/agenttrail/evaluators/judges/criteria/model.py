"""Criteria and criteria sets (AgentEval): what a critic proposes and a quantifier scores.

A criterion has a name, a description and accepted values: ordered labels, each with a number
("Not clear" 0, "Moderately clear" 1, "Very clear" 2). A criteria set is what a user reviews
in a file (JSON or YAML) and saves with a version:

    name: refund-quality
    task: "Refund a customer's order"
    criteria:
      - name: clarity
        description: The final answer says plainly what was done.
        accepted_values: [{label: Not clear, value: 0}, {label: Very clear, value: 2}]
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agenttrail.collector.errors import AgentTrailError


class CriteriaError(AgentTrailError):
    """A criteria set or a critic's answer is not valid; the message says where and what."""


@dataclass(frozen=True, slots=True)
class AcceptedValue:
    label: str
    value: float

    def to_json(self) -> dict[str, Any]:
        value: float | int = int(self.value) if self.value.is_integer() else self.value
        return {"label": self.label, "value": value}


@dataclass(frozen=True, slots=True)
class Criterion:
    name: str
    description: str
    accepted_values: tuple[AcceptedValue, ...]  # ordered by value, lowest first

    @property
    def labels(self) -> list[str]:
        return [accepted.label for accepted in self.accepted_values]

    @property
    def value_range(self) -> float:
        """Highest minus lowest value (at least 1e-9), to compare spreads across scales."""
        return max(self.accepted_values[-1].value - self.accepted_values[0].value, 1e-9)

    def value_of(self, label: str) -> float:
        for accepted in self.accepted_values:
            if accepted.label == label:
                return accepted.value
        raise KeyError(label)

    def embedding_text(self) -> str:
        return f"{self.name}: {self.description}"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "accepted_values": [accepted.to_json() for accepted in self.accepted_values],
        }


@dataclass(frozen=True, slots=True)
class CriteriaSet:
    name: str
    criteria: tuple[Criterion, ...]
    task: str = ""
    notes: Mapping[str, Any] = field(default_factory=dict)  # e.g. which criteria were merged

    def __post_init__(self) -> None:
        _check_unique([c.name for c in self.criteria], f"criteria set {self.name!r}", "criterion")

    def criterion(self, name: str) -> Criterion:
        for criterion in self.criteria:
            if criterion.name == name:
                return criterion
        raise KeyError(name)

    @property
    def content_hash(self) -> str:
        """What the set means to a quantifier: task and criteria, not notes or its name."""
        content = {"task": self.task, "criteria": [c.to_json() for c in self.criteria]}
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()

    @property
    def draft_version(self) -> str:
        """The evaluator version of a set used straight from a file, before it is saved."""
        return f"draft-{self.content_hash[:12]}"

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {"name": self.name, "task": self.task}
        document["criteria"] = [c.to_json() for c in self.criteria]
        if self.notes:
            document["notes"] = dict(self.notes)
        return document


def _check_unique(names: Sequence[str], where: str, what: str) -> None:
    seen: set[str] = set()
    for name in names:
        key = name.casefold()
        if key in seen:
            raise CriteriaError(f"{where}: {what} {name!r} appears more than once")
        seen.add(key)


def parse_criterion(raw: Any, where: str) -> Criterion:
    """One criterion from JSON; raises CriteriaError naming `where` and the field at fault."""
    if not isinstance(raw, Mapping):
        raise CriteriaError(f"{where}: expected an object with name, description, accepted_values")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise CriteriaError(f"{where}: 'name' must be a non-empty string")
    name = " ".join(name.split())
    where = f"{where} ({name})"
    if ":" in name:
        raise CriteriaError(f"{where}: a name may not contain ':' (it separates set and criterion)")
    description = raw.get("description")
    if not isinstance(description, str) or not description.strip():
        raise CriteriaError(f"{where}: 'description' must be a non-empty string")
    values = raw.get("accepted_values")
    if not isinstance(values, list) or len(values) < 2:
        raise CriteriaError(f"{where}: 'accepted_values' must list at least two {{label, value}} pairs")
    accepted: list[AcceptedValue] = []
    for index, item in enumerate(values):
        if not isinstance(item, Mapping):
            raise CriteriaError(f"{where}: accepted_values[{index}] must be an object {{label, value}}")
        label, value = item.get("label"), item.get("value")
        if not isinstance(label, str) or not label.strip():
            raise CriteriaError(f"{where}: accepted_values[{index}].label must be a non-empty string")
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise CriteriaError(f"{where}: accepted_values[{index}].value must be a number, got {value!r}")
        accepted.append(AcceptedValue(label.strip(), float(value)))
    _check_unique([a.label for a in accepted], where, "label")
    numbers = [a.value for a in accepted]
    if len(set(numbers)) != len(numbers):
        raise CriteriaError(f"{where}: two accepted values share one number; each label needs its own")
    accepted.sort(key=lambda a: a.value)
    return Criterion(name, " ".join(description.split()), tuple(accepted))


def parse_criteria_list(raw: Any, where: str) -> tuple[Criterion, ...]:
    if not isinstance(raw, list) or not raw:
        raise CriteriaError(f"{where}: 'criteria' must be a non-empty list")
    criteria = tuple(parse_criterion(item, f"{where}: criteria[{i}]") for i, item in enumerate(raw))
    _check_unique([c.name for c in criteria], where, "criterion")
    return criteria


def parse_criteria_set(raw: Any, where: str, *, name: str | None = None) -> CriteriaSet:
    """A criteria set document; `name` (e.g. from `--name`) overrides the document's."""
    if not isinstance(raw, Mapping):
        raise CriteriaError(f"{where}: expected a mapping with 'criteria' (and 'name', 'task')")
    unknown = set(raw) - {"name", "task", "criteria", "notes"}
    if unknown:
        raise CriteriaError(f"{where}: unknown key(s) {sorted(unknown)}; known: criteria, name, notes, task")
    set_name = name or raw.get("name")
    if not isinstance(set_name, str) or not set_name.strip() or ":" in set_name:
        raise CriteriaError(f"{where}: the set needs a 'name' without ':' (or pass --name)")
    task = raw.get("task") or ""
    if not isinstance(task, str):
        raise CriteriaError(f"{where}: 'task' must be a string")
    notes = raw.get("notes") or {}
    if not isinstance(notes, Mapping):
        raise CriteriaError(f"{where}: 'notes' must be a mapping")
    return CriteriaSet(set_name.strip(), parse_criteria_list(raw.get("criteria"), where), task, dict(notes))


def read_document(path: str | Path) -> Any:
    """A JSON or YAML file's content (YAML reads JSON too); CriteriaError naming the file."""
    import yaml  # here: the CLI imports this module (criteria migrations) before any file is read

    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise CriteriaError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise CriteriaError(f"{path} is neither JSON nor YAML: {exc}") from exc


def load_criteria_file(path: str | Path, *, name: str | None = None) -> CriteriaSet:
    """Read a criteria set from JSON or YAML (chosen by content: JSON is YAML)."""
    return parse_criteria_set(read_document(path), str(path), name=name)


def dump_document(document: Mapping[str, Any], path: str | Path) -> None:
    """Write JSON for a .json file, YAML otherwise (the form people review and edit)."""
    path = Path(path)
    if path.suffix.lower() == ".json":
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    else:
        import yaml

        text = yaml.safe_dump(dict(document), sort_keys=False, allow_unicode=True, width=100)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CriteriaError(f"cannot write {path}: {exc.strerror or exc}") from exc
