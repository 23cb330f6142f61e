"""The judge budget: tokens and/or cost per hour and per day, checked before every model call.

Windows are calendar UTC hours and days, so "resumes at" is a clear instant (the next hour or
midnight UTC). The check happens before a request; a request already in flight may take the
spend past the limit by its own size (at most ``concurrency`` requests), never further.

>>> tracker = BudgetTracker(JudgeBudget(tokens_per_hour=100), clock=lambda: 7200.0)
>>> tracker.record(tokens=120, cost=0.0)
>>> tracker.check()
Traceback (most recent call last):
...
agenttrail.evaluators.judges.base.BudgetExhausted: judge budget spent: 120 of 100 tokens per hour used \
since 1970-01-01T02:00:00Z; judging resumes at 1970-01-01T03:00:00Z
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

from agenttrail.collector.errors import ConfigError
from agenttrail.evaluators.judges.base import BudgetExhausted

_WINDOWS = (("hour", 3600), ("day", 86400))


@dataclass(frozen=True, slots=True)
class JudgeBudget:
    """Limits per calendar UTC hour and day; None means no limit of that kind."""

    tokens_per_hour: int | None = None
    tokens_per_day: int | None = None
    cost_per_hour: float | None = None
    cost_per_day: float | None = None

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if value is not None and (isinstance(value, bool) or not value > 0):
                raise ConfigError(f"budget.{item.name}: expected a positive number, got {value!r}")

    @property
    def limited(self) -> bool:
        return any(getattr(self, item.name) is not None for item in fields(self))

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None, source: str) -> JudgeBudget:
        """From the `budget:` mapping of a judge definition; unknown keys raise ConfigError."""
        if mapping is None:
            return cls()
        if not isinstance(mapping, Mapping):
            raise ConfigError(f"{source}: budget must be a mapping, got {type(mapping).__name__}")
        known = {item.name for item in fields(cls)}
        unknown = sorted(set(mapping) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown budget setting(s) {unknown}; known: {sorted(known)}")
        values: dict[str, Any] = {
            key: None if value is None else (int if key.startswith("tokens") else float)(value)
            for key, value in mapping.items()
        }
        try:
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{source}: budget: {exc}") from exc


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class BudgetTracker:
    """Spend in the current hour and day windows; thread-safe, shared by all judges of a client."""

    def __init__(self, budget: JudgeBudget, clock: Callable[[], float] = time.time) -> None:
        self.budget = budget
        self._clock = clock
        self._lock = threading.Lock()
        # window kind -> (window index, tokens, cost)
        self._spent: dict[str, tuple[int, int, float]] = {kind: (-1, 0, 0.0) for kind, _ in _WINDOWS}

    def _current(self, now: float) -> dict[str, tuple[int, int, float]]:
        current = {}
        for kind, length in _WINDOWS:
            index, tokens, cost = self._spent[kind]
            current[kind] = (
                (index, tokens, cost) if index == int(now // length) else (int(now // length), 0, 0.0)
            )
        return current

    def record(self, tokens: int, cost: float) -> None:
        """Add one request's usage to the current windows."""
        with self._lock:
            current = self._current(self._clock())
            self._spent = {kind: (index, t + tokens, c + cost) for kind, (index, t, c) in current.items()}

    def spent(self) -> dict[str, dict[str, float]]:
        """Tokens and cost used in the current hour and day, e.g. for a status page."""
        with self._lock:
            current = self._current(self._clock())
        return {kind: {"tokens": tokens, "cost": cost} for kind, (_, tokens, cost) in current.items()}

    def check(self) -> None:
        """Raise BudgetExhausted (which budget, how much, when judging resumes) if a limit is spent."""
        if not self.budget.limited:
            return
        now = self._clock()
        with self._lock:
            current = self._current(now)
        for kind, length in reversed(_WINDOWS):  # the day first: it resumes later
            index, tokens, cost = current[kind]
            for unit, used, limit in (
                ("tokens", tokens, getattr(self.budget, f"tokens_per_{kind}")),
                ("cost", cost, getattr(self.budget, f"cost_per_{kind}")),
            ):
                if limit is not None and used >= limit:
                    resume_at = float((index + 1) * length)
                    amount = (
                        f"{used} of {limit} tokens" if unit == "tokens" else f"cost {used:.4f} of {limit:g}"
                    )
                    raise BudgetExhausted(
                        f"judge budget spent: {amount} per {kind} used since {_iso(index * length)}; "
                        f"judging resumes at {_iso(resume_at)}",
                        resume_at,
                    )
