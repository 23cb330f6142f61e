"""What every judge takes and returns (spec/judges.md), shared by online, offline and API use.

A judge turns one `JudgeInput` (a run, or a whole conversation) into one or more
`JudgeResult`s. Judges talk to the model only through a `ChatJudgeClient`, so budget,
retries, validation, usage and tracing live in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agenttrail.collector.errors import AgentTrailError


@dataclass(frozen=True, slots=True)
class JudgeInput:
    """One run as a judge sees it; tool calls have the `trajectories --format json` shape."""

    trace_id: str = ""
    agent: str = ""
    task: str = ""
    conversation_id: str = ""
    input: Any = None  # the user request
    output: Any = None  # the final response
    tool_calls: tuple[Mapping[str, Any], ...] = ()
    failure: bool = False
    reference_trajectory: tuple[Mapping[str, Any], ...] | None = None  # name, input, output
    expected_response: Any = None
    available_tools: tuple[Mapping[str, Any], ...] = ()  # name, description, parameters (JSON schema)
    screenshots: tuple[str, ...] = ()  # image URIs or data: URIs
    runs: tuple[JudgeInput, ...] = ()  # a session: every run of the conversation, in order

    @classmethod
    def from_trajectory(cls, row: Mapping[str, Any], **extra: Any) -> JudgeInput:
        """From a row in the `agenttrail trajectories --format json` shape.

        The row may also carry `reference_trajectory`, `expected_response`, `available_tools`,
        `screenshots` and `runs` (rows of the same shape); keyword arguments override the row.
        Other keys (start, latency_s, tokens, ...) are ignored.
        """
        values = {**row, **extra}
        reference = values.get("reference_trajectory")
        runs = values.get("runs") or ()
        return cls(
            trace_id=str(values.get("trace_id") or ""),
            agent=str(values.get("agent") or ""),
            task=str(values.get("task") or ""),
            conversation_id=str(values.get("conversation_id") or ""),
            input=values.get("input"),
            output=values.get("output"),
            tool_calls=tuple(values.get("tool_calls") or ()),
            failure=bool(values.get("failure")),
            reference_trajectory=None if reference is None else tuple(reference),
            expected_response=values.get("expected_response"),
            available_tools=tuple(values.get("available_tools") or ()),
            screenshots=tuple(values.get("screenshots") or ()),
            runs=tuple(run if isinstance(run, JudgeInput) else cls.from_trajectory(run) for run in runs),
        )


@dataclass(frozen=True, slots=True)
class JudgeResult:
    """One stored judge verdict. A failed call has `error` set and `score` None, never 0."""

    judge: str
    version: str  # hash of the judge's prompt and settings
    metric: str  # what is stored in scores.Metric (the judge name, or judge:criterion)
    score: float | None = None
    label: str = ""
    explanation: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)  # e.g. sub_scores
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cost: float = 0.0
    error: str = ""


@dataclass(frozen=True, slots=True)
class JudgeCall:
    """The outcome of one structured model call, after retries and at most one repair."""

    value: Any = None  # the validated JSON answer; None when `error` is set
    error: str = ""
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cost: float = 0.0


# Checks a parsed answer; raises ValueError saying what is wrong (sent back for one repair).
Validator = Callable[[Any], Any]


class ChatJudgeClient(Protocol):
    """The one way judges reach a model (implemented over the `openai` package)."""

    def complete_json(
        self,
        messages: Sequence[Mapping[str, Any]],
        schema: Mapping[str, Any],
        *,
        schema_name: str,
        validate: Validator | None = None,
        judge: str = "",
    ) -> JudgeCall: ...


class Judge(Protocol):
    name: str
    version: str

    def evaluate(self, run: JudgeInput) -> list[JudgeResult]: ...


class BudgetExhausted(AgentTrailError):
    """The judge budget for the current hour or day is spent; judging pauses until `resume_at`."""

    def __init__(self, message: str, resume_at: float) -> None:
        super().__init__(message)
        self.resume_at = resume_at  # unix seconds
