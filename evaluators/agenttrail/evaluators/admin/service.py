"""What `agenttrail backfill` does, as a function tests and other callers use without click:
judge past runs with one configured judge, on the store itself or, while `serve` holds it, as a
job in the sidecar (started through the admin API and followed until it ends).

Errors are the project's: the judge cannot be built (ConfigError and the judges' own errors),
`BackfillFailed` when the backfill itself fails or the sidecar stops the job. Ctrl-C while
following a job cancels it in the sidecar and is raised again for the caller to report.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agenttrail.collector.errors import AgentTrailError

if TYPE_CHECKING:
    from agenttrail.collector.cli import SidecarApi
    from agenttrail.collector.queries import TrajectoryFilter
    from agenttrail.collector.store import Store
    from agenttrail.evaluators.judges.config import JudgeSpec

Progress = Callable[[dict[str, Any]], None]


class BackfillFailed(AgentTrailError):
    """A backfill stopped on an error, or the sidecar running it cancelled or failed the job; what
    was decided stays decided and the same command continues with the rest."""


@dataclass(frozen=True, slots=True)
class BackfillSummary:
    """What a backfill decided (or, dry run, would judge), as the report the admin API sends."""

    judge: str
    version: str
    dry_run: bool
    decided: int
    decisions: dict[str, int]
    would: dict[str, int]
    prompt_tokens: int
    completion_tokens: int
    cost: float
    paused: str | None  # why it stopped early (a spent budget); the undecided runs stay pending

    @classmethod
    def from_json(cls, report: dict[str, Any]) -> BackfillSummary:
        return cls(**{name: report[name] for name in cls.__dataclass_fields__})


def backfill_judge(
    target: SidecarApi | Store,
    spec: JudgeSpec,
    runs: TrajectoryFilter,
    *,
    dry_run: bool = False,
    progress: Progress = lambda report: None,
    started: Callable[[str], None] = lambda job: None,
    poll_s: float = 0.3,
) -> BackfillSummary:
    """Judge the runs `runs` selects that `spec`'s current version has not decided yet (dry run:
    count them). On a store, here with the judge `spec` builds; through a sidecar's API, as a job
    there with the judge it has in force (`started` gets the job id, `progress` each new report;
    the sidecar refuses a `spec` whose fingerprint differs from its own)."""
    from agenttrail.collector.store import Store

    if isinstance(target, Store):
        return _backfill_here(target, spec, runs, dry_run, progress)
    return _backfill_in_sidecar(target, spec, runs, dry_run, progress, started, poll_s)


def _backfill_here(
    store: Store, spec: JudgeSpec, runs: TrajectoryFilter, dry_run: bool, progress: Progress
) -> BackfillSummary:
    from agenttrail.evaluators.admin.backfill import backfill
    from agenttrail.evaluators.judges.registry import ClientPool
    from agenttrail.evaluators.judges.setup import build_online_judge

    # A saved criteria set is read from the store being backfilled.
    online = build_online_judge(spec, ClientPool(store_factory=lambda: store))
    try:
        report = backfill(store, online, runs, dry_run=dry_run, progress=lambda r: progress(r.to_json()))
    except AgentTrailError as exc:
        raise BackfillFailed(str(exc)) from exc
    return BackfillSummary.from_json(report.to_json())


def _backfill_in_sidecar(
    api: SidecarApi,
    spec: JudgeSpec,
    runs: TrajectoryFilter,
    dry_run: bool,
    progress: Progress,
    started: Callable[[str], None],
    poll_s: float,
) -> BackfillSummary:
    from agenttrail.evaluators.routes import ADMIN_PREFIX

    body = {"judge": spec.name, "fingerprint": spec.fingerprint, "runs": runs.to_params(), "dry_run": dry_run}
    job = api.post_json(f"{ADMIN_PREFIX}/backfill", body)
    path = f"{ADMIN_PREFIX}/backfill/{job['id']}"
    started(str(job["id"]))
    decided = 0
    try:
        while job["state"] == "running":
            time.sleep(poll_s)
            job = api.get_lines(path, {})[0]
            if job["report"]["decided"] != decided:
                decided = job["report"]["decided"]
                progress(job["report"])
    except KeyboardInterrupt:
        api.post_json(f"{path}/cancel", {})
        raise
    if job["state"] == "failed":
        raise BackfillFailed(f"the backfill failed in the sidecar: {job['error']}")
    if job["state"] == "cancelled":
        raise BackfillFailed(
            f"the sidecar cancelled the backfill (is serve stopping?) after {job['report']['decided']} "
            "run(s); the same command continues with the rest"
        )
    return BackfillSummary.from_json(job["report"])
