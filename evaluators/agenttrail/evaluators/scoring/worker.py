"""The online evaluator: scores newly assembled (and re-assembled) runs against their references.

Its queue is a query, not a watermark: recent trajectories with no decision for this
evaluator version and revision. After scoring it records a decision (scored, sampled out,
error), so a restart resumes exactly where work stopped, and a re-assembled run (new revision)
is scored again. The query over the whole lookback costs in proportion to the runs stored (a
second per million), so between full scans (every `full_scan_interval_s`, and whenever the
shards change) the worker only looks at runs assembled since its last empty queue, less a
margin for rows assembled just before they became visible: a cursor that only narrows the
query, never decides what is pending. Several workers on one store heartbeat into it and take
disjoint shares of runs by trace-id hash (run_queue.py, shared with the judge worker); writes
are keyed so that an overlap while workers join or leave replaces rows instead of duplicating
them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agenttrail.collector.config import read_section
from agenttrail.collector.errors import ConfigError
from agenttrail.collector.store import Store
from agenttrail.evaluators.metrics import parse_metric
from agenttrail.evaluators.scoring.deleted_runs import delete_scores_of_deleted_runs
from agenttrail.evaluators.scoring.metric_pool import MetricPool, Outcome, RunToScore, score_runs
from agenttrail.evaluators.scoring.references import ReferenceEntry
from agenttrail.evaluators.scoring.run_queue import (
    RECENT,
    DecisionRow,
    RunQueueWorker,
    now_stamp,
    pending_batch,
    record_decisions,
)
from agenttrail.evaluators.scoring.schema import ScoredRunRow

log = logging.getLogger(__name__)

EVALUATOR = "trajectory"
# How often the worker deletes the scores of runs re-assembly deleted (deleted_runs.py).
SWEEP_INTERVAL_S = 5.0
# A run assembled at T may become readable a little after T (the insert, a server's replicas,
# another host's clock). The cursor stays CURSOR_LAG_S behind the last drained query, and every
# MARGIN_SCAN_INTERVAL_S one query (a margin scan) reaches CURSOR_MARGIN_S further back, so a row
# readable up to CURSOR_MARGIN_S late is scored within that interval, one later at the full scan.
# Every query reading the 30 s margin cost the pending keys ~400 ms a batch at 7,000 runs/s (the
# window's runs grouped, their decisions joined), ~50 with the 2 s lag (asm24).
CURSOR_MARGIN_S = 30.0
CURSOR_LAG_S = 2.0
MARGIN_SCAN_INTERVAL_S = 10.0
_SINCE_CURSOR = " AND t.AssembledAt >= fromUnixTimestamp64Micro({cursor_us:Int64})"
DEFAULT_METRICS = (
    "trajectory_exact_match",
    "trajectory_in_order_match",
    "trajectory_any_order_match",
    "trajectory_precision",
    "trajectory_recall",
)
_PENDING_COLUMNS = """t.TraceId, t.RootSpanId, t.Agent, t.Task, toUnixTimestamp64Micro(t.Start), t.LatencyS,
t.Failure, t.ToolCalls, t.Revision, t.AgentVersion, toUnixTimestamp64Micro(t.AssembledAt)"""


def sample_fraction(trace_id: str) -> float:
    """Where a trace falls in [0, 1): the same for every evaluator and judge, so they sample the same runs."""
    return int(trace_id[:16], 16) / 2**64


@dataclass(frozen=True, slots=True)
class SamplingRule:
    rate: float
    agent: str | None = None
    task: str | None = None

    def applies(self, agent: str, task: str) -> bool:
        return (self.agent is None or self.agent == agent) and (self.task is None or self.task == task)


@dataclass(frozen=True, slots=True)
class EvaluatorConfig:
    """The `evaluators:` section of the config file."""

    metrics: tuple[str, ...] = DEFAULT_METRICS
    sample_rate: float = 1.0
    rules: tuple[SamplingRule, ...] = ()  # first matching rule wins over sample_rate
    always_sample_failures: bool = True
    poll_interval_s: float = 0.5
    lookback_s: int = 86_400
    batch_size: int = 2000
    full_scan_interval_s: float = 60.0
    processes: int = 0  # > 0: compute the metrics in that many worker processes (metric_pool.py)

    def __post_init__(self) -> None:
        for text in self.metrics:
            try:
                parse_metric(text)
            except ValueError as exc:
                raise ConfigError(f"evaluators.metrics: {exc}") from exc
        for rate in (self.sample_rate, *(rule.rate for rule in self.rules)):
            if not 0.0 <= rate <= 1.0:
                raise ConfigError(f"evaluators: sample rate {rate} must be between 0 and 1")
        if isinstance(self.processes, bool) or not isinstance(self.processes, int) or self.processes < 0:
            raise ConfigError(
                f"evaluators.processes: {self.processes!r} is not a whole number >= 0 "
                "(0: metrics computed in serve's own process)"
            )

    @property
    def version(self) -> str:
        """Names what the scores mean: changes when the metric set changes, not the sampling."""
        digest = hashlib.sha256(json.dumps(sorted(self.metrics)).encode()).hexdigest()[:12]
        return f"{EVALUATOR}-{digest}"

    def rate_for(self, agent: str, task: str) -> float:
        for rule in self.rules:
            if rule.applies(agent, task):
                return rule.rate
        return self.sample_rate

    def sampled(self, trace_id: str, agent: str, task: str, failed: bool) -> bool:
        if failed and self.always_sample_failures:
            return True
        return sample_fraction(trace_id) < self.rate_for(agent, task)

    @classmethod
    def from_mapping(cls, section: Mapping[str, Any], source: str = "config") -> EvaluatorConfig:
        known = {
            "metrics",
            "sample_rate",
            "rules",
            "always_sample_failures",
            "poll_interval_s",
            "lookback_s",
            "batch_size",
            "full_scan_interval_s",
            "processes",
        }
        unknown = set(section) - known
        if unknown:
            raise ConfigError(
                f"{source}: unknown evaluators setting(s) {sorted(unknown)}; known: {sorted(known)}"
            )
        try:
            rules = tuple(
                SamplingRule(float(rule["rate"]), rule.get("agent"), rule.get("task"))
                for rule in section.get("rules", [])
            )
            values: dict[str, Any] = {
                key: section[key] for key in known - {"rules", "metrics"} if key in section
            }
            if "metrics" in section:
                values["metrics"] = tuple(str(metric) for metric in section["metrics"])
            return cls(rules=rules, **values)
        except ConfigError as exc:  # from __post_init__, which does not know the file
            raise ConfigError(f"{source}: {exc}") from exc
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{source}: evaluators section is invalid ({exc})") from exc

    @classmethod
    def from_file(cls, path: str | None) -> EvaluatorConfig:
        if not path:
            return cls()
        return cls.from_mapping(read_section(path, "evaluators"), f"config file {path}")


@dataclass
class WorkerCounters:
    scored_runs: int = 0
    sampled_out: int = 0
    errors: int = 0
    cycles: int = 0
    forgotten_runs: int = 0  # deleted runs whose scores the sweep removed
    last_error: str = ""
    score_delays_s: list[float] = field(default_factory=list)


class EvaluatorWorker(RunQueueWorker):
    """Scores runs in a background thread; `run_once` does one cycle (tests call it directly)."""

    name = "evaluator"

    def __init__(
        self,
        store_factory: Callable[[], Store],
        config: EvaluatorConfig | None = None,
        *,
        worker_id: str | None = None,
        heartbeat_s: float = 1.0,
    ) -> None:
        self.config = config or EvaluatorConfig()
        super().__init__(
            store_factory,
            what="evaluator cycle",
            thread_name="agenttrail-evaluator",
            poll_interval_s=self.config.poll_interval_s,
            worker_id=worker_id,
            heartbeat_s=heartbeat_s,
        )
        self.version = self.config.version
        self.counters = WorkerCounters()
        self._swept_at = float("-inf")
        self._cursor_s: float | None = None  # None: the next query scans the whole lookback
        self._full_scan_at = float("-inf")
        self._margin_scan_at = float("-inf")
        self.margin_scan_interval_s = MARGIN_SCAN_INTERVAL_S
        self._shard: tuple[int, int] | None = None
        self._pool: MetricPool | None = None

    def queue_keys(self) -> list[str]:
        return [self.version]

    def cycle(self) -> None:
        """Forget the scores of deleted runs (every few seconds), then drain the queue."""
        if time.monotonic() - self._swept_at >= SWEEP_INTERVAL_S:
            self._swept_at = time.monotonic()
            self.counters.forgotten_runs += delete_scores_of_deleted_runs(self.store)
        super().cycle()

    def count_failure(self, message: str) -> None:
        self.counters.errors += 1
        self.counters.last_error = message

    def run_once(self) -> int:
        """Score one batch of pending runs; returns how many runs were decided."""
        self.counters.cycles += 1
        self._heartbeat()
        shard = self.shards()[self.version]
        if shard != self._shard or time.monotonic() - self._full_scan_at >= self.config.full_scan_interval_s:
            self._shard, self._cursor_s = shard, None  # another worker's runs may be ours now
        full_scan, asked_at = self._cursor_s is None, time.time()
        margin_scan = time.monotonic() - self._margin_scan_at >= self.margin_scan_interval_s
        params: dict[str, Any] = {"lookback": self.config.lookback_s}
        since_s: float | None = None
        if self._cursor_s is not None:
            # The reach covers rows that became readable late since the last margin scan too.
            since_s = self._cursor_s - (CURSOR_MARGIN_S + self.margin_scan_interval_s if margin_scan else 0.0)
            params["cursor_us"] = int(since_s * 1e6)
        batch = pending_batch(
            self.store,
            self.version,
            _PENDING_COLUMNS,
            where=RECENT if full_scan else RECENT + _SINCE_CURSOR,
            params=params,
            shard=shard,
            limit=self.config.batch_size,
            lower_bound=not full_scan,  # the cursor bounds AssembledAt from below: a few seconds' runs
            # A decision follows its run's assembly: none about the window's runs is older than it
            # (less the clocks' skew, the margin's).
            decided_since_s=None if since_s is None else since_s - CURSOR_MARGIN_S,
        )
        rows = batch.rows
        if not rows:
            if not batch.keys:
                self._drained(asked_at, full_scan, margin_scan)
            return 0
        references = self.references()
        # trace id, agent, task, failure: who is sampled; calls, task, latency, failure: what scoring reads
        sampled = [self.config.sampled(row[0], row[2], row[3], bool(row[6])) for row in rows]
        runs = [
            RunToScore(row[7], row[3], row[5], bool(row[6]))
            for row, take in zip(rows, sampled, strict=True)
            if take
        ]
        outcomes = iter(self._compute(runs, {task: stored.entry for task, stored in references.items()}))
        scores: list[ScoredRunRow] = []
        decisions: list[DecisionRow] = []
        now, stamp = now_stamp()
        for row, take in zip(rows, sampled, strict=True):
            trace_id, root, agent, task, start_us, latency_s, _, _, revision, agent_version, _ = row
            decision, detail = "scored", ""
            if not take:
                decision = "sampled_out"
                self.counters.sampled_out += 1
            else:
                reference = references.get(task) if task else None
                outcome = next(outcomes)
                if isinstance(outcome, str):
                    decision, detail = "error", outcome
                    self.counters.errors += 1
                    results = {}
                else:
                    results = outcome
                if decision == "scored" and reference is None:
                    detail = f"no reference for task {task!r}" if task else "run has no task"
                metrics = [(metric, value) for metric, value in results.items() if value is not None]
                if metrics:
                    scores.append(
                        ScoredRunRow(
                            TraceId=trace_id,
                            RootSpanId=root,
                            Evaluator=EVALUATOR,
                            EvaluatorVersion=self.version,
                            Agent=agent,
                            Task=task,
                            RunStart=f"{start_us / 1e6:.6f}",
                            Revision=revision,
                            ReferenceVersion=reference.version if reference else 0,
                            CreatedAt=stamp,
                            AgentVersion=agent_version,
                            Metrics=[metric for metric, _ in metrics],
                            Scores=[value for _, value in metrics],
                            Labels=[metric_label(metric, value) for metric, value in metrics],
                        )
                    )
                if decision == "scored":
                    self.counters.scored_runs += 1
                    self.counters.score_delays_s.append(now - (start_us / 1e6 + latency_s))
            decisions.append(
                DecisionRow(
                    TraceId=trace_id,
                    RootSpanId=root,
                    Evaluator=EVALUATOR,
                    EvaluatorVersion=self.version,
                    Revision=revision,
                    Decision=decision,
                    Detail=detail,
                    WorkerId=self.worker_id,
                    DecidedAt=stamp,
                )
            )
        # One row a run, expanded into `scores` by its view (migration 123).
        self.store.insert("scores_runs", scores)
        # Decisions last: a crash in between only means these runs are scored again (same keys).
        record_decisions(self.store, decisions)
        # By the keys: a batch short of rows (one merged away between the reads) is not all that
        # was pending, and a drained query moves the cursor to it, past an older backlog.
        self.queue_drained = batch.keys < self.config.batch_size
        if self.queue_drained:
            self._drained(asked_at, full_scan, margin_scan)
        elif self._cursor_s is not None:
            # A full batch is the window's oldest pending runs (by AssembledAt): every run readable
            # then and assembled before its last is decided, so the window need not reach back
            # past it; it would grow with a backlog until the queue drained. Never past the query
            # itself, whatever another host's clock stamped.
            last_s = min(max(row[-1] for row in rows) / 1e6, asked_at)
            self._cursor_s = max(self._cursor_s, last_s - CURSOR_LAG_S)
        return len(rows)

    @property
    def cursor_s(self) -> float | None:
        """The lower bound on AssembledAt of the next ordinary query (None: a full scan)."""
        return self._cursor_s

    def rescan(self) -> None:
        """Runs older than the cursor went back in the queue (re-scoring a task): scan the whole
        lookback at once instead of at the next full scan, with the references read again (they
        went back for a new reference, which the references' 2 s cache may not hold yet)."""
        self._cursor_s = None
        self._references_at = float("-inf")
        self.wake()

    def _drained(self, asked_at: float, full_scan: bool, margin_scan: bool) -> None:
        """Every run readable when the query was asked is decided now: move the cursor up to it."""
        self._cursor_s = asked_at - CURSOR_LAG_S
        if full_scan:
            self._full_scan_at = time.monotonic()
        if full_scan or margin_scan:
            self._margin_scan_at = time.monotonic()

    def _compute(self, runs: list[RunToScore], references: dict[str, ReferenceEntry]) -> list[Outcome]:
        """The runs' metrics: in the worker processes if `processes` asks for them, else here."""
        if not self.config.processes:
            return score_runs(runs, references, self.config.metrics)
        if self._pool is None:
            self._pool = MetricPool(self.config.processes)
        return self._pool.score(runs, references, self.config.metrics)

    def stop(self, timeout_s: float = 10.0) -> None:
        super().stop(timeout_s)
        if self._pool is not None:
            self._pool.close()


def metric_label(metric: str, value: float) -> str:
    """The pass/fail (or ok/failed) label stored beside a metric value; empty for continuous metrics."""
    if metric in ("latency", "trajectory_precision", "trajectory_recall", "tool_correctness"):
        return ""
    if metric == "failure":
        return "failed" if value else "ok"
    return "pass" if value >= 1.0 else "fail"
