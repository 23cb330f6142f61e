"""Backfills run inside a sidecar: what `agenttrail backfill` asks for while `serve` holds the store.

A backfill can take minutes of judge calls, longer than an HTTP request should live, so the
sidecar runs each as a job on a thread of its own; the CLI starts it, polls its report (the same
`BackfillReport.to_json` it prints when it runs the backfill itself) and cancels it when
interrupted. One job per judge at a time: two would judge the same runs twice.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.queries import TrajectoryFilter
from agenttrail.collector.store import Store
from agenttrail.evaluators.admin.backfill import BackfillReport, backfill
from agenttrail.evaluators.judges.runs import OnlineJudge

log = logging.getLogger(__name__)

JobState = Literal["running", "done", "failed", "cancelled"]
KEEP_FINISHED = 20  # finished jobs kept for the CLI to read their last report


class BackfillBusy(AgentTrailError):
    """A backfill of the same judge is already running in this sidecar."""


@dataclass
class BackfillJob:
    id: str
    judge: str
    version: str
    report: dict[str, Any]
    state: JobState = "running"
    error: str = ""
    cancel: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "judge": self.judge,
            "version": self.version,
            "state": self.state,
            "error": self.error,
            "report": self.report,
        }


class BackfillJobs:
    """The sidecar's backfill jobs; a sidecar worker, so that stopping serve cancels them."""

    name = "backfill"

    def __init__(self, store_factory: Callable[[], Store]) -> None:
        self._store_factory = store_factory
        self._jobs: dict[str, BackfillJob] = {}
        self._lock = threading.Lock()

    def submit(self, online: OnlineJudge, runs: TrajectoryFilter, *, dry_run: bool = False) -> BackfillJob:
        """Start a backfill; BackfillBusy when this judge already has one running."""
        with self._lock:
            running = [j for j in self._jobs.values() if j.judge == online.name and j.state == "running"]
            if running:
                raise BackfillBusy(
                    f"a backfill of judge {online.name!r} is already running in the sidecar "
                    f"(job {running[0].id}); wait for it to finish, or interrupt the command that started it"
                )
            report = BackfillReport(online.name, online.version, dry_run).to_json()
            job = BackfillJob(os.urandom(6).hex(), online.name, online.version, report)
            self._jobs[job.id] = job
            finished = [key for key, old in self._jobs.items() if old.state != "running"]
            for key in finished[: max(0, len(finished) - KEEP_FINISHED)]:
                del self._jobs[key]
        job.thread = threading.Thread(
            target=self._run,
            args=(job, online, runs, dry_run),
            name=f"agenttrail-backfill-{job.id}",
            daemon=True,
        )
        job.thread.start()
        return job

    def get(self, job_id: str) -> BackfillJob | None:
        with self._lock:
            return self._jobs.get(job_id)

    def _run(self, job: BackfillJob, online: OnlineJudge, runs: TrajectoryFilter, dry_run: bool) -> None:
        def progress(report: BackfillReport) -> None:
            job.report = report.to_json()

        store: Store | None = None
        try:
            store = self._store_factory()
            report = backfill(
                store,
                online,
                runs,
                dry_run=dry_run,
                batch_size=max(8, 4 * online.concurrency),  # small batches: a cancel takes effect soon
                progress=progress,
                stopping=job.cancel.is_set,
            )
            job.report = report.to_json()
            job.state = "cancelled" if job.cancel.is_set() else "done"
        except Exception as exc:  # the job's answer, read by the CLI; the sidecar carries on
            log.exception("backfill of judge %r failed", job.judge)
            job.error = str(exc) or repr(exc)
            job.state = "failed"
        finally:
            if store is not None:
                store.close()

    def start(self) -> None:
        """Jobs start on request."""

    def stop(self, timeout_s: float = 10.0) -> None:
        """Cancel running jobs (between batches) and wait for them."""
        with self._lock:
            jobs = list(self._jobs.values())
        for job in jobs:
            job.cancel.set()
        for job in jobs:
            if job.thread is not None:
                job.thread.join(timeout_s)

    def alive(self) -> bool:
        return True  # each job's failure is reported in its state; none ends the sidecar
