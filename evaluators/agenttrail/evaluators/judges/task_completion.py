"""The task completion judge, after UFO's EvaluationAgent.

Inputs: the user request, the tools (APIs) available, the trajectory (tool calls with arguments
and results), the final response, and optionally screenshots (``screenshots: all`` or
``first_and_last``; ``none`` sends none), as ``image_url`` parts. Scope ``run`` judges one agent
run; ``session`` judges every run of the conversation (``JudgeInput.runs``, in order; a run
without them is a session of one).

Method: decompose the request into sub-goals, judge each, then the whole. The result has
``details = {"sub_scores": {sub-goal: yes|no|unsure}, "complete": yes|no|unsure}`` and the
reason as explanation. Score: yes = 1, no = 0, unsure = missing (score None, label "unsure";
not an error).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from agenttrail.evaluators.judges.base import ChatJudgeClient, JudgeCall, JudgeInput, JudgeResult
from agenttrail.evaluators.judges.prompt_judge import (
    Options,
    PromptJudge,
    as_choice,
    as_examples,
    result_from_call,
)
from agenttrail.evaluators.judges.render import data_section, render_run, render_session

Screenshots = Literal["none", "all", "first_and_last"]
Scope = Literal["run", "session"]
_VERDICTS: Final = ["yes", "no", "unsure"]
_SCORES: Final[dict[str, float | None]] = {"yes": 1.0, "no": 0.0, "unsure": None}

_INSTRUCTIONS = """You are an evaluation agent. You judge whether an AI agent completed the \
request of its user, from the evidence of what it did.

You are given: the user request; the tools (APIs) the agent could call, with their descriptions; \
the trajectory of actions it took (each tool call with its arguments and result, or its error); \
its final response;{screenshots} {scope}

Method:
1. Decompose the user request into its sub-goals: the distinct things that must be true or done \
for the request to be fulfilled.
2. For each sub-goal, decide from the evidence whether it was achieved: "yes", "no", or "unsure" \
when the evidence does not allow a decision.
3. Decide whether the whole request was completed: "yes", "no" or "unsure". A claim by the agent \
that it succeeded is not evidence by itself; look for tool results that show it.

Answer with a JSON object: `sub_scores` (a list of {{"sub_goal": ..., "evaluation": \
"yes"|"no"|"unsure"}}), `reason` (why, citing the evidence), `complete` ("yes"|"no"|"unsure")."""
_SCREENSHOTS_NOTE = " and screenshots of the screen taken while it worked, in order;"
_SCOPE_NOTE: Final[dict[str, str]] = {
    "run": "all for one agent run.",
    "session": "for every run of one conversation, in order: judge whether the user's requests "
    "across the conversation were completed by its end.",
}
_RUN_SECTIONS: Final = ("user_input", "trajectory", "final_response")


class TaskCompletionJudge(PromptJudge):
    """UFO-style: sub-goals judged yes/no/unsure, then complete yes/no/unsure (unsure -> missing)."""

    schema_name = "task_completion"

    def __init__(
        self,
        client: ChatJudgeClient,
        *,
        name: str = "task_completion",
        screenshots: Screenshots = "none",
        scope: Scope = "run",
        few_shot_examples: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        self.screenshots = screenshots
        self.scope = scope
        schema = {
            "type": "object",
            "properties": {
                "sub_scores": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "sub_goal": {"type": "string"},
                            "evaluation": {"type": "string", "enum": _VERDICTS},
                        },
                        "required": ["sub_goal", "evaluation"],
                        "additionalProperties": False,
                    },
                },
                "reason": {"type": "string"},
                "complete": {"type": "string", "enum": _VERDICTS},
            },
            "required": ["sub_scores", "reason", "complete"],
            "additionalProperties": False,
        }
        instructions = _INSTRUCTIONS.format(
            screenshots=_SCREENSHOTS_NOTE if screenshots != "none" else "", scope=_SCOPE_NOTE[scope]
        )
        super().__init__(
            client,
            name=name,
            instructions=instructions,
            schema=schema,
            sections=("user_input", "available_tools", "trajectory", "final_response"),
            examples=few_shot_examples,
            meaning={"screenshots": screenshots, "scope": scope},
        )

    def _runs(self, run: JudgeInput) -> tuple[JudgeInput, ...]:
        return (run.runs or (run,)) if self.scope == "session" else (run,)

    def render(self, run: JudgeInput) -> str:
        if self.scope == "run":
            return render_run(run, self.sections)
        runs = self._runs(run)
        tools: dict[str, Any] = {}  # every tool the session's runs offered, first description kept
        for member in (*runs, run):
            for tool in member.available_tools:
                tools.setdefault(str(tool.get("name")), tool)
        described = data_section("available_tools", list(tools.values()) or None)
        return f"{described}\n\n{render_session(runs, _RUN_SECTIONS)}"

    def images(self, run: JudgeInput) -> Sequence[str]:
        if self.screenshots == "none":
            return ()
        shots = [shot for r in self._runs(run) for shot in r.screenshots]
        if self.screenshots == "first_and_last" and len(shots) > 2:
            return [shots[0], shots[-1]]
        return shots

    def interpret(self, value: Any, call: JudgeCall) -> list[JudgeResult]:
        complete = value["complete"]
        sub_scores = {item["sub_goal"]: item["evaluation"] for item in value["sub_scores"]}
        return [
            self.result(
                **result_from_call(
                    call,
                    score=_SCORES[complete],
                    label=complete,
                    explanation=value["reason"],
                    details={"sub_scores": sub_scores, "complete": complete},
                )
            )
        ]

    @classmethod
    def from_options(
        cls, name: str, options: Mapping[str, Any], client: ChatJudgeClient, source: str
    ) -> TaskCompletionJudge:
        """UFO EvaluationAgent: sub-goals, complete yes/no/unsure; scope run|session; screenshots."""
        read = Options(options, source, "task_completion")
        judge = cls(
            client,
            name=name,
            screenshots=read.get("screenshots", "none", as_choice("none", "all", "first_and_last")),  # type: ignore[arg-type]
            scope=read.get("scope", "run", as_choice("run", "session")),  # type: ignore[arg-type]
            few_shot_examples=read.get("few_shot_examples", (), as_examples),
        )
        read.done()
        return judge
