"""Seeded synthetic runs and scores, stored in chDB the way assembly and the evaluator store them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from otlp_builders import new_span_id, new_trace_id
from trajectory_rows import agent_run, deleted_row, insert_trajectories, run_row

from agenttrail.evaluators.scoring.schema import ScoreRow


@dataclass
class Run:
    start: float  # epoch seconds
    agent: str = "bot"
    task: str = "t"
    model: str = "m1"
    version: str = "v1"
    latency_s: float = 1.0
    failure: bool = False
    tools: Sequence[tuple[str, str]] = ()  # (name, "ok" | "error")
    input_tokens: int = 0
    output_tokens: int = 0
    scores: dict[str, float | None] = field(default_factory=dict)  # metric -> score (None: NULL)
    trace_id: str = field(default_factory=new_trace_id)
    root: str = field(default_factory=new_span_id)


def trajectory_row(run: Run, *, version: int = 1, deleted: bool = False) -> tuple[Any, ...]:
    """The row assembly stores for `run` at this version (its deletion row when `deleted`)."""
    assembled = agent_run(
        start=run.start,
        trace_id=run.trace_id,
        root_span_id=run.root,
        agent=run.agent,
        task=run.task,
        model=run.model,
        agent_version=run.version,
        latency_s=run.latency_s,
        failure=run.failure,
        error_type="E" if run.failure else "",
        tools=run.tools,
        input_tokens=run.input_tokens,
        output_tokens=run.output_tokens,
    )
    if deleted:
        return deleted_row(assembled, version=version)
    return run_row(assembled, revision=version, assembled_at=run.start)


def score_rows(
    run: Run, *, evaluator_version: str = "ev1", created: float | None = None, revision: int = 1
) -> list[ScoreRow]:
    stamp = f"{created if created is not None else run.start + 1:.6f}"
    return [
        ScoreRow(
            run.trace_id,
            run.root,
            metric,
            "trajectory",
            evaluator_version,
            score,
            "",
            "",
            run.agent,
            run.task,
            f"{run.start:.6f}",
            revision,
            1,
            "" if score is not None else "judge failed",
            stamp,
            # the evaluator writes the run's version; another evaluator here does not, as judges
            # do not (drift looks the run up in trajectories for those)
            AgentVersion=run.version if evaluator_version == "ev1" else None,
        )
        for metric, score in run.scores.items()
    ]


def store_runs(store: Any, runs: Sequence[Run]) -> None:
    """Trajectories plus their scores (also latency and failure, as the evaluator writes them)."""
    insert_trajectories(store, [trajectory_row(run) for run in runs])
    rows = [row for run in runs for row in score_rows(run)]
    rows += [
        row
        for run in runs
        for row in score_rows(
            Run(**{**run.__dict__, "scores": {"latency": run.latency_s, "failure": float(run.failure)}})
        )
    ]
    store.insert("scores", rows)
