"""The tool selection judge (DeepEval ToolCorrectness with available_tools) and tool correctness.

The judge sees the user input, the available tool schemas and the tools called (with their
arguments), and returns a score in [0, 1] with a reason. A run without available tools is
missing: there is nothing to select from.

The judge also reports ``tool_correctness`` = min(judge score, deterministic tool correctness
against the reference trajectory) and ``tool_correctness_success``, exactly as spec/metrics.md
says; the deterministic part is `metrics.correctness.tool_correctness`. By default (option
absent) it does so for every judged run that has a reference, with the metric's default
parameters, and says nothing for the others. The ``tool_correctness`` option sets the
parameters (``true`` or a mapping: threshold, strict_mode, should_exact_match,
should_consider_ordering, evaluation_params) and reports them for every run: without a reference
both are missing; without available tools the judge is not called and tool correctness is the
deterministic score alone. ``false`` turns them off. If the judge call fails, tool correctness
is an error too (a min with an unknown value is unknown). Offline, a ``tool_correctness``
metric asked for beside the judge takes the min itself, with the metric's parameters
(`agenttrail.evaluators.judges.combined`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from agenttrail.collector.errors import ConfigError
from agenttrail.collector.runs import predicted_calls
from agenttrail.evaluators.judges.base import ChatJudgeClient, JudgeCall, JudgeInput, JudgeResult
from agenttrail.evaluators.judges.prompt_judge import (
    Options,
    PromptJudge,
    as_examples,
    result_from_call,
)
from agenttrail.evaluators.metrics.calls import ABSENT, ToolCall
from agenttrail.evaluators.metrics.correctness import tool_correctness

_INSTRUCTIONS = """You are an expert evaluator of how AI agents choose tools. Given the user input, \
the tools that were available to the agent (names, descriptions, parameter schemas) and the tools \
it actually called (with their arguments), judge whether it selected the right tools.

Consider: were the called tools the appropriate ones, among those available, for what the user \
asked? Were tools needed for the request left uncalled? Were irrelevant or redundant tools called? \
Were the arguments sensible for the request? Do not judge whether the tools' results were good.

Score from 0 to 1: 1 = exactly the right tools for the request; 0 = wrong tools, or the needed \
tools not used at all; values in between for partly right selections.

Answer with a JSON object: `reason` (why, naming the tools), then `score` (a number from 0 to 1)."""

TOOL_CORRECTNESS_PARAMS: Final = frozenset(
    {"threshold", "strict_mode", "should_exact_match", "should_consider_ordering", "evaluation_params"}
)


def reference_calls(reference: Sequence[Mapping[str, Any]]) -> list[ToolCall]:
    """Reference steps (name, input, output) as metric calls; an absent or null input is a wildcard."""
    calls = []
    for step in reference:
        given = step.get("input", ABSENT)
        arguments = given if given is None or isinstance(given, dict) else ABSENT
        calls.append(ToolCall(str(step["name"]), arguments, step.get("output", ABSENT)))
    return calls


def _tool_correctness_params(value: Any) -> dict[str, Any] | None:
    if value is False:
        return None
    if value is True:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"expected true, false or a mapping of tool_correctness parameters, got {value!r}")
    unknown = sorted(set(value) - TOOL_CORRECTNESS_PARAMS)
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown}; known: {sorted(TOOL_CORRECTNESS_PARAMS)}")
    params = dict(value)
    if "evaluation_params" in params:
        params["evaluation_params"] = tuple(params["evaluation_params"])
    tool_correctness([], [], **params)  # the metric checks its own parameters
    return params


class ToolSelectionJudge(PromptJudge):
    """DeepEval-style tool selection (0-1 + reason); optionally completes tool correctness (min)."""

    schema_name = "tool_selection"

    def __init__(
        self,
        client: ChatJudgeClient,
        *,
        name: str = "tool_selection",
        tool_correctness: Mapping[str, Any] | bool | None = None,
        few_shot_examples: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        # None: the min where the rule applies (judged, with a reference); False: never.
        self.combine_always = tool_correctness is not None and tool_correctness is not False
        try:
            self.tool_correctness = (
                None
                if tool_correctness is False
                else _tool_correctness_params(True if tool_correctness is None else tool_correctness)
            )
        except ValueError as exc:
            raise ConfigError(f"judge {name}: tool_correctness: {exc}") from exc
        super().__init__(
            client,
            name=name,
            instructions=_INSTRUCTIONS,
            schema={
                "type": "object",
                "properties": {
                    "reason": {"type": "string"},
                    "score": {"type": "number", "minimum": 0, "maximum": 1},
                },
                "required": ["reason", "score"],
                "additionalProperties": False,
            },
            sections=("user_input", "available_tools", "trajectory"),
            examples=few_shot_examples,
            meaning={"tool_correctness": self.tool_correctness, "always": self.combine_always},
        )

    @property
    def outputs(self) -> tuple[str, ...]:
        combined = (
            ("tool_correctness", "tool_correctness_success") if self.tool_correctness is not None else ()
        )
        return (self.name, *combined)

    def missing_reason(self, run: JudgeInput) -> str:
        return "" if run.available_tools else "no available tools for this run: nothing to select from"

    def interpret(self, value: Any, call: JudgeCall) -> list[JudgeResult]:
        return [
            self.result(**result_from_call(call, score=float(value["score"]), explanation=value["reason"]))
        ]

    def evaluate(self, run: JudgeInput) -> list[JudgeResult]:
        (selection,) = super().evaluate(run)
        if self.tool_correctness is None:
            return [selection]
        applies = run.reference_trajectory is not None and bool(run.available_tools)
        if not self.combine_always and not applies:
            return [selection]
        return [selection, *self._combined(run, selection)]

    def _combined(self, run: JudgeInput, selection: JudgeResult) -> list[JudgeResult]:
        """tool_correctness = min(selection score, deterministic score), and its success flag."""
        names = ("tool_correctness", "tool_correctness_success")
        if run.reference_trajectory is None:
            reason = "no reference trajectory for this run"
            return [self.result(metric, explanation=reason, details={"missing": reason}) for metric in names]
        if selection.error:
            error = f"tool selection judge failed: {selection.error}"
            return [self.result(metric, error=error) for metric in names]
        judged = selection.score is not None  # None: missing (no available tools), so not part of the min

        def judge(*_: Any) -> tuple[float, str]:
            return float(selection.score or 0.0), selection.explanation

        outcome = tool_correctness(
            reference_calls(run.reference_trajectory),
            predicted_calls(run.tool_calls),
            available_tools=run.available_tools if judged else None,
            user_input=None if run.input is None else str(run.input),
            tool_selection=judge if judged else None,
            **(self.tool_correctness or {}),
        )
        details = {"selection_score": outcome.selection_score}
        return [
            self.result(names[0], score=outcome.score, explanation=outcome.reason, details=details),
            self.result(names[1], score=1.0 if outcome.success else 0.0, label=str(outcome.success).lower()),
        ]

    @classmethod
    def from_options(
        cls, name: str, options: Mapping[str, Any], client: ChatJudgeClient, source: str
    ) -> ToolSelectionJudge:
        """DeepEval tool selection over available_tools (0-1 + reason); tool_correctness: min with it."""
        read = Options(options, source, "tool_selection")
        judge = cls(
            client,
            name=name,
            tool_correctness=read.get("tool_correctness", None, _tool_correctness_params),
            few_shot_examples=read.get("few_shot_examples", (), as_examples),
        )
        read.done()
        return judge
