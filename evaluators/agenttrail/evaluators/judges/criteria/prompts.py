"""How criteria prompts show runs to the model: the judges' delimited data sections."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from agenttrail.evaluators.judges.base import JudgeInput
from agenttrail.evaluators.judges.render import Section, system_message, user_message
from agenttrail.evaluators.judges.render import render_run as render_sections

RUN_SECTIONS: Final[tuple[Section, ...]] = ("user_input", "trajectory", "final_response")

__all__ = ["render_run", "render_runs", "system_message", "user_message"]


def render_run(run: JudgeInput, prefix: str = "") -> str:
    """Request, numbered tool steps and final response, each in its own data section."""
    return render_sections(run, RUN_SECTIONS, prefix)


def render_runs(runs: Sequence[JudgeInput], kind: str) -> str:
    """Several example runs, sections named `<kind>_<n>.<section>`."""
    return "\n\n".join(
        f"{kind.replace('_', ' ').capitalize()} {n}:\n\n{render_run(run, f'{kind}_{n}.')}"
        for n, run in enumerate(runs, start=1)
    )
