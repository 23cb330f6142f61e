"""Verification (AgentEval): does a criterion notice when a run is made worse?

A disturbed copy of a run has a share of its steps (tool calls) or of the sentences of its
final response removed, chosen by a seeded RNG so a report can be reproduced. Both copies are
quantified; per criterion the report says how often the original scored higher, the same, or
lower.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agenttrail.evaluators.judges.base import ChatJudgeClient, JudgeInput
from agenttrail.evaluators.judges.criteria.model import CriteriaSet
from agenttrail.evaluators.judges.criteria.quantifier import quantify_run
from agenttrail.evaluators.judges.criteria.robustness import parallel_map
from agenttrail.evaluators.judges.criteria.runs import Run

Mode = Literal["steps", "sentences"]
DEFAULT_SHARE = 0.25
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_sentences(text: str) -> list[str]:
    return [part for part in _SENTENCE_END.split(text.strip()) if part]


def _drop(count: int, share: float, rng: random.Random) -> set[int]:
    """Indices to remove: round(share * count), at least one, never all (a run must remain)."""
    if count < 2:
        return set()
    removed = min(max(1, round(share * count)), count - 1)
    return set(rng.sample(range(count), removed))


def disturb(run: JudgeInput, mode: Mode, share: float, rng: random.Random) -> JudgeInput | None:
    """A copy with a share of steps or final-response sentences removed; None if nothing can go."""
    if mode == "steps":
        gone = _drop(len(run.tool_calls), share, rng)
        if not gone:
            return None
        kept = tuple(call for i, call in enumerate(run.tool_calls) if i not in gone)
        return dataclasses.replace(run, tool_calls=kept)
    if not isinstance(run.output, str):
        return None
    sentences = split_sentences(run.output)
    gone = _drop(len(sentences), share, rng)
    if not gone:
        return None
    return dataclasses.replace(run, output=" ".join(s for i, s in enumerate(sentences) if i not in gone))


@dataclass(frozen=True, slots=True)
class CriterionVerification:
    criterion: str
    compared: int  # pairs where both copies got a score
    original_higher: int
    same: int
    original_lower: int

    @property
    def higher_share(self) -> float | None:
        return self.original_higher / self.compared if self.compared else None

    def to_json(self) -> dict[str, Any]:
        return {
            "criterion": self.criterion,
            "compared": self.compared,
            "original_higher": self.original_higher,
            "same": self.same,
            "original_lower": self.original_lower,
            "higher_share": self.higher_share,
        }


@dataclass(frozen=True, slots=True)
class Verification:
    criteria: tuple[CriterionVerification, ...]
    runs: int  # runs given
    skipped: int  # runs with nothing to remove (fewer than two steps or sentences)
    mode: Mode
    share: float
    seed: int


def verify(
    client: ChatJudgeClient,
    criteria_set: CriteriaSet,
    version: str,
    runs: Sequence[Run],
    *,
    mode: Mode = "steps",
    share: float = DEFAULT_SHARE,
    seed: int = 0,
    concurrency: int = 4,
) -> Verification:
    if not 0.0 < share < 1.0:
        raise ValueError(f"the share to remove must be between 0 and 1, got {share}")
    rng = random.Random(seed)
    pairs = []
    for run in runs:
        disturbed = disturb(run.judge_input, mode, share, rng)
        if disturbed is not None:
            pairs.append((run.judge_input, disturbed))
    inputs = [judged for pair in pairs for judged in pair]
    results = parallel_map(
        lambda judged: quantify_run(client, criteria_set, version, judged), inputs, concurrency
    )
    report = []
    for position, criterion in enumerate(criteria_set.criteria):
        higher = same = lower = 0
        for original, changed in zip(results[0::2], results[1::2], strict=True):
            a, b = original[position].score, changed[position].score
            if a is None or b is None:
                continue
            higher += a > b
            same += a == b
            lower += a < b
        report.append(CriterionVerification(criterion.name, higher + same + lower, higher, same, lower))
    return Verification(tuple(report), len(runs), len(runs) - len(pairs), mode, share, seed)
