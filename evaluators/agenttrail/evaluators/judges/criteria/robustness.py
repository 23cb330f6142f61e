"""Is a criteria set trustworthy? Repeat the quantifier, and check it separates good from bad runs.

Robustness (AgentEval): quantify the same runs k times; per criterion report the mean, the
spread (std across repetitions of one run, averaged over runs) and whether successful runs
score higher than failed ones. Spreads and gaps are also given relative to the criterion's
value range, so one threshold fits 0-2 and 0-10 scales alike.
"""

from __future__ import annotations

import importlib
import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from agenttrail.evaluators.judges.base import ChatJudgeClient, JudgeResult
from agenttrail.evaluators.judges.criteria.model import CriteriaSet
from agenttrail.evaluators.judges.criteria.quantifier import quantify_run
from agenttrail.evaluators.judges.criteria.runs import Run

DEFAULT_MAX_SPREAD = 0.15  # relative std across repetitions above which a criterion is unstable
DEFAULT_MIN_GAP = 0.1  # relative success-minus-failure mean below which it does not separate

T = TypeVar("T")
R = TypeVar("R")


def parallel_map(function: Callable[[T], R], items: Iterable[T], concurrency: int) -> list[R]:
    """`function` over `items` with at most `concurrency` calls in flight, results in order."""
    items = list(items)
    if concurrency <= 1 or len(items) <= 1:
        return [function(item) for item in items]
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="agenttrail-criteria") as pool:
        return list(pool.map(function, items))


def repeat_quantify(
    client: ChatJudgeClient,
    criteria_set: CriteriaSet,
    version: str,
    runs: Sequence[Run],
    repetitions: int,
    concurrency: int = 4,
) -> list[list[list[JudgeResult]]]:
    """results[run][repetition] = that repetition's results (one per criterion)."""
    jobs = [(i, k) for i in range(len(runs)) for k in range(repetitions)]
    flat = parallel_map(
        lambda job: quantify_run(client, criteria_set, version, runs[job[0]].judge_input), jobs, concurrency
    )
    return [flat[i * repetitions : (i + 1) * repetitions] for i in range(len(runs))]


def mann_whitney_greater(better: Sequence[float], worse: Sequence[float]) -> float | None:
    """One-sided Mann-Whitney U p-value for `better` > `worse`; None without scipy or data."""
    if not better or not worse:
        return None
    try:
        stats: Any = importlib.import_module("scipy.stats")
    except ImportError:
        return None
    result = stats.mannwhitneyu(better, worse, alternative="greater")
    p = float(result.pvalue)
    return None if math.isnan(p) else p


@dataclass(frozen=True, slots=True)
class CriterionRobustness:
    criterion: str
    values: int  # numeric values obtained (runs x repetitions minus errors)
    errors: int
    mean: float | None
    spread: float | None  # mean over runs of the std across that run's repetitions
    relative_spread: float | None  # spread / value range
    success_mean: float | None
    failure_mean: float | None
    gap: float | None  # success_mean - failure_mean
    relative_gap: float | None
    p_value: float | None  # Mann-Whitney U, successes > failures (per-run means)
    unstable: bool
    separates: bool | None  # None when there are not both successful and failed runs

    @property
    def flags(self) -> list[str]:
        flags = ["unstable"] if self.unstable else []
        if self.separates is False:
            flags.append("does not separate")
        return flags

    def to_json(self) -> dict[str, Any]:
        document = {item.name: getattr(self, item.name) for item in fields(self)}
        document["flags"] = self.flags
        return document


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def robustness_report(
    criteria_set: CriteriaSet,
    runs: Sequence[Run],
    results: Sequence[Sequence[Sequence[JudgeResult]]],
    successful: set[str],
    failed: set[str],
    *,
    max_spread: float = DEFAULT_MAX_SPREAD,
    min_gap: float = DEFAULT_MIN_GAP,
) -> list[CriterionRobustness]:
    """Per criterion statistics from `repeat_quantify` output; successful/failed are trace ids."""
    report = []
    for position, criterion in enumerate(criteria_set.criteria):
        per_run: list[list[float]] = []
        errors = 0
        for repetitions in results:
            values = []
            for repetition in repetitions:
                score = repetition[position].score
                if score is None:
                    errors += 1
                else:
                    values.append(score)
            per_run.append(values)
        every = [value for values in per_run for value in values]
        stds = [statistics.pstdev(values) for values in per_run if len(values) >= 2]
        spread = _mean(stds)
        run_means = {
            run.trace_id: statistics.fmean(values)
            for run, values in zip(runs, per_run, strict=True)
            if values
        }
        good = [mean for trace, mean in run_means.items() if trace in successful]
        bad = [mean for trace, mean in run_means.items() if trace in failed]
        success_mean, failure_mean = _mean(good), _mean(bad)
        gap = None if success_mean is None or failure_mean is None else success_mean - failure_mean
        relative_spread = None if spread is None else spread / criterion.value_range
        relative_gap = None if gap is None else gap / criterion.value_range
        report.append(
            CriterionRobustness(
                criterion=criterion.name,
                values=len(every),
                errors=errors,
                mean=_mean(every),
                spread=spread,
                relative_spread=relative_spread,
                success_mean=success_mean,
                failure_mean=failure_mean,
                gap=gap,
                relative_gap=relative_gap,
                p_value=mann_whitney_greater(good, bad),
                unstable=relative_spread is not None and relative_spread > max_spread,
                separates=None if relative_gap is None else relative_gap >= min_gap,
            )
        )
    return report
