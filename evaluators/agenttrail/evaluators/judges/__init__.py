"""LLM judges (spec/judges.md), usable from Python::

    from agenttrail.evaluators.judges import JudgeInput, JudgeSettings, OpenAIJudgeClient, TaskCompletionJudge

    client = OpenAIJudgeClient(JudgeSettings(model="gpt-4o-mini"))
    judge = TaskCompletionJudge(client)
    for result in judge.evaluate(JudgeInput.from_trajectory(row)):  # a `trajectories --format json` row
        print(result.metric, result.score, result.label, result.explanation, result.error)

Or from configuration: ``build_judge(name, {"type": "trajectory_accuracy", "continuous": True},
client, source)``.

The wing owns the judge kinds and their shared client (`base`, `client`, `budget`,
`prompt_judge`, `render`, `validation`, the type catalogue `registry`), criteria-based judging
(`criteria/`), the online judges in the sidecar (`config` parses the `judges:` section,
`setup` installs them, `worker` samples runs and `runs` reads and stores them) and the scores
that combine judges with the deterministic metrics (`combined`); `service` is what `agenttrail
audit` and `judges list|reload` do. Imports scoring and metrics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agenttrail.instrumentation._lazy import lazy_attributes

if TYPE_CHECKING:
    from agenttrail.evaluators.judges.base import (
        BudgetExhausted,
        ChatJudgeClient,
        Judge,
        JudgeCall,
        JudgeInput,
        JudgeResult,
    )
    from agenttrail.evaluators.judges.budget import BudgetTracker, JudgeBudget
    from agenttrail.evaluators.judges.client import JudgeSettings, OpenAIJudgeClient
    from agenttrail.evaluators.judges.registry import (
        JUDGE_TYPES,
        ClientPool,
        JudgeDefinition,
        build_judge,
        judge_types,
        parse_judge_definitions,
    )
    from agenttrail.evaluators.judges.rubric import RubricJudge, final_response_judge
    from agenttrail.evaluators.judges.task_completion import TaskCompletionJudge
    from agenttrail.evaluators.judges.tool_selection import ToolSelectionJudge
    from agenttrail.evaluators.judges.trajectory_accuracy import TrajectoryAccuracyJudge

# Loaded on first use: importing a module of this wing (say `judges.criteria.sets` for its migrations)
# runs this file, and the judge catalogue pulls in yaml, the metrics and the scoring worker.
_LAZY = {
    "BudgetExhausted": "agenttrail.evaluators.judges.base",
    "ChatJudgeClient": "agenttrail.evaluators.judges.base",
    "Judge": "agenttrail.evaluators.judges.base",
    "JudgeCall": "agenttrail.evaluators.judges.base",
    "JudgeInput": "agenttrail.evaluators.judges.base",
    "JudgeResult": "agenttrail.evaluators.judges.base",
    "BudgetTracker": "agenttrail.evaluators.judges.budget",
    "JudgeBudget": "agenttrail.evaluators.judges.budget",
    "JudgeSettings": "agenttrail.evaluators.judges.client",
    "OpenAIJudgeClient": "agenttrail.evaluators.judges.client",
    "JUDGE_TYPES": "agenttrail.evaluators.judges.registry",
    "ClientPool": "agenttrail.evaluators.judges.registry",
    "JudgeDefinition": "agenttrail.evaluators.judges.registry",
    "build_judge": "agenttrail.evaluators.judges.registry",
    "judge_types": "agenttrail.evaluators.judges.registry",
    "parse_judge_definitions": "agenttrail.evaluators.judges.registry",
    "RubricJudge": "agenttrail.evaluators.judges.rubric",
    "final_response_judge": "agenttrail.evaluators.judges.rubric",
    "TaskCompletionJudge": "agenttrail.evaluators.judges.task_completion",
    "ToolSelectionJudge": "agenttrail.evaluators.judges.tool_selection",
    "TrajectoryAccuracyJudge": "agenttrail.evaluators.judges.trajectory_accuracy",
}


__getattr__ = lazy_attributes(__name__, _LAZY)

__all__ = [
    "JUDGE_TYPES",
    "BudgetExhausted",
    "BudgetTracker",
    "ChatJudgeClient",
    "ClientPool",
    "Judge",
    "JudgeBudget",
    "JudgeCall",
    "JudgeDefinition",
    "JudgeInput",
    "JudgeResult",
    "JudgeSettings",
    "OpenAIJudgeClient",
    "RubricJudge",
    "TaskCompletionJudge",
    "ToolSelectionJudge",
    "TrajectoryAccuracyJudge",
    "build_judge",
    "final_response_judge",
    "judge_types",
    "parse_judge_definitions",
]
