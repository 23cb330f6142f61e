"""Configured judges, built and wired: into the sidecar (worker, health, audit route) and the CLI."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agenttrail.collector.sidecar import Sidecar
from agenttrail.collector.store import Store
from agenttrail.evaluators.audit import AuditSubject, audit_params, audit_run
from agenttrail.evaluators.judge_config import JudgesConfig, JudgeSpec
from agenttrail.evaluators.judge_runs import OnlineJudge
from agenttrail.evaluators.judge_worker import JudgeWorker
from agenttrail.evaluators.judges.registry import ClientPool, JudgeDefinition
from agenttrail.evaluators.worker import EVALUATOR, EvaluatorConfig


def build_online_judge(spec: JudgeSpec, pool: ClientPool | None = None) -> OnlineJudge:
    """The judge a spec describes. Judges with equal model settings share one client from `pool`,
    so they share its budget and its limit of calls in flight."""
    definition = JudgeDefinition.from_mapping({"name": spec.name, **spec.options}, spec.source)
    judge = (pool or ClientPool()).build(definition, spec.source)
    session = getattr(judge, "scope", "run") == "session"
    return OnlineJudge(spec, judge, definition.settings.concurrency, session, spec.session_idle_s)


def build_online_judges(config: JudgesConfig, pool: ClientPool | None = None) -> list[OnlineJudge]:
    """Every enabled judge of the config, built (ConfigError names the file, judge and key)."""
    pool = pool or ClientPool()
    return [build_online_judge(spec, pool) for spec in config.enabled]


def audit_subjects(
    evaluator: EvaluatorConfig,
    config: JudgesConfig,
    judges: Sequence[OnlineJudge],
    states: Mapping[str, str] | None = None,
) -> list[AuditSubject]:
    """The deterministic evaluator, then every configured judge in file order."""
    subjects = [AuditSubject(EVALUATOR, evaluator.version, evaluator.version)]
    built = {judge.name: judge for judge in judges}
    for spec in config.judges:
        judge = built.get(spec.name)
        if judge is None:
            subjects.append(AuditSubject(spec.name, "", "", "disabled"))
            continue
        state = (states or {}).get(spec.name, "ok")
        subjects.append(
            AuditSubject(
                spec.name, judge.version, judge.queue_key, "" if state == "ok" else state, backfill_hint=True
            )
        )
    return subjects


# Judging waits while this many spans are queued for storage (an ingest burst is being absorbed).
INGEST_BACKLOG_SPANS = 5_000


def ingest_backlog(sidecar: Sidecar) -> int:
    return sidecar.pipeline.queued_rows if sidecar.pipeline is not None else 0


def install_judges(
    sidecar: Sidecar,
    config_file: str | None,
    evaluator: EvaluatorConfig,
    build: Callable[[JudgesConfig], list[OnlineJudge]] = build_online_judges,
) -> JudgeWorker | None:
    """The judge worker (when judges are configured), its /healthz entry and the audit route."""
    config = JudgesConfig.from_file(config_file)
    judges = build(config)
    worker: JudgeWorker | None = None
    if judges:
        worker = JudgeWorker(
            sidecar.new_store,
            judges,
            lookback_s=evaluator.lookback_s,
            poll_interval_s=evaluator.poll_interval_s,
            ingest_busy=lambda: ingest_backlog(sidecar) >= INGEST_BACKLOG_SPANS,
        )
        sidecar.add_worker(worker)
        sidecar.on_assembled.append(worker.wake)
        sidecar.health_details["judges"] = worker.status
    read_store: list[Store] = []

    def decisions_route(params: dict[str, str]) -> list[dict[str, Any]]:
        trace_id = audit_params(params)
        if not read_store:
            read_store.append(sidecar.new_store())
        states = worker.status() if worker else {}
        subjects = audit_subjects(evaluator, config, judges, states)
        return audit_run(read_store[0], trace_id, subjects, lookback_s=evaluator.lookback_s)

    sidecar.add_read_route("/api/v1/decisions", decisions_route)
    return worker
