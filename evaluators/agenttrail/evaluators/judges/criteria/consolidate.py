"""Merge criteria proposed by several critic runs (AgentEval's consolidation step).

Each criterion is embedded as "name: description"; pairs whose cosine similarity reaches the
threshold are the same criterion, and so are chains of such pairs (connected groups). A group
keeps its most central member (highest mean similarity to the rest; the first proposed on a tie).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agenttrail.evaluators.judges.criteria.embeddings import Embedder, EmbeddingError
from agenttrail.evaluators.judges.criteria.model import CriteriaSet, Criterion

DEFAULT_THRESHOLD = 0.85


@dataclass(frozen=True, slots=True)
class MergeGroup:
    kept: Criterion
    merged: tuple[Criterion, ...]  # the others of the group, now represented by `kept`
    min_similarity: float  # lowest similarity of a merged member to the kept one

    def to_json(self) -> dict[str, Any]:
        return {
            "kept": self.kept.name,
            "merged": [criterion.name for criterion in self.merged],
            "min_similarity": round(self.min_similarity, 4),
        }


@dataclass(frozen=True, slots=True)
class Consolidation:
    criteria: tuple[Criterion, ...]
    groups: tuple[MergeGroup, ...]  # every group, singletons included, in proposal order
    threshold: float
    embedder: str

    def to_set(self, name: str, task: str = "") -> CriteriaSet:
        """The merged criteria as a set to review; its notes say what was merged."""
        notes = {
            "consolidated_with": self.embedder,
            "threshold": self.threshold,
            "merged": [group.to_json() for group in self.groups if group.merged],
        }
        return CriteriaSet(name, self.criteria, task, notes)


def cosine_matrix(vectors: Sequence[Sequence[float]]) -> list[list[float]]:
    norms = [math.sqrt(sum(x * x for x in vector)) or 1.0 for vector in vectors]
    unit = [[x / norm for x in vector] for vector, norm in zip(vectors, norms, strict=True)]
    return [[sum(a * b for a, b in zip(u, v, strict=True)) for v in unit] for u in unit]


def _groups(similarity: list[list[float]], threshold: float) -> list[list[int]]:
    """Connected components of the graph "similarity >= threshold", by union-find."""
    parent = list(range(len(similarity)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(similarity)):
        for j in range(i + 1, len(similarity)):
            if similarity[i][j] >= threshold:
                parent[root(j)] = root(i)
    members: dict[int, list[int]] = {}
    for i in range(len(similarity)):
        members.setdefault(root(i), []).append(i)
    return sorted(members.values(), key=lambda group: group[0])


def consolidate(
    criteria: Sequence[Criterion], embedder: Embedder, threshold: float = DEFAULT_THRESHOLD
) -> Consolidation:
    """One representative per group of similar criteria; names kept unique (a suffix on a clash)."""
    if not 0.0 < threshold <= 1.0:
        raise EmbeddingError(f"the similarity threshold must be in (0, 1], got {threshold}")
    if not criteria:
        return Consolidation((), (), threshold, embedder.name)
    vectors = embedder.embed([criterion.embedding_text() for criterion in criteria])
    if len(vectors) != len(criteria) or len({len(v) for v in vectors}) != 1:
        raise EmbeddingError(f"{embedder.name} returned vectors that do not match the criteria")
    similarity = cosine_matrix(vectors)
    groups: list[MergeGroup] = []
    used: dict[str, int] = {}
    kept_all: list[Criterion] = []
    for members in _groups(similarity, threshold):
        # Rounded so that float noise does not beat the first-proposed tie-break.
        centre = max(
            members,
            key=lambda i: (round(sum(similarity[i][j] for j in members) / len(members), 6), -i),
        )
        kept = criteria[centre]
        clash = used.get(kept.name.casefold(), 0)
        used[kept.name.casefold()] = clash + 1
        if clash:
            kept = Criterion(f"{kept.name} {clash + 1}", kept.description, kept.accepted_values)
        others = tuple(criteria[i] for i in members if i != centre)
        lowest = min((similarity[centre][i] for i in members if i != centre), default=1.0)
        groups.append(MergeGroup(kept, others, lowest))
        kept_all.append(kept)
    return Consolidation(tuple(kept_all), tuple(groups), threshold, embedder.name)
