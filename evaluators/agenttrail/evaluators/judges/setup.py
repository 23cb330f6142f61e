"""Configured judges, built and wired: into the sidecar (worker, health, audit route) and the CLI.

In a running sidecar the `judges:` section in force is a `LiveJudges`: handed over at start by
the composition root, replaced whole by a reload (`agenttrail judges reload`, or SIGHUP to
serve), which reads the config file again, only when every judge of the edited section builds;
a refused reload leaves the judges in force as they were.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenttrail.collector.errors import ConfigError
from agenttrail.collector.sidecar import Sidecar
from agenttrail.collector.store import Store
from agenttrail.evaluators.judges.config import JudgeConfigs, JudgesConfig, JudgeSpec
from agenttrail.evaluators.judges.registry import ClientPool, JudgeDefinition
from agenttrail.evaluators.judges.runs import OnlineJudge
from agenttrail.evaluators.judges.worker import JudgeWorker
from agenttrail.evaluators.reloads import NamedChanges
from agenttrail.evaluators.routes import JUDGES_ROUTE
from agenttrail.evaluators.scoring.audit import AuditSubject, audit_params, audit_run
from agenttrail.evaluators.scoring.worker import EVALUATOR, EvaluatorConfig

log = logging.getLogger(__name__)


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


class JudgeMismatch(ConfigError):
    """The running sidecar's judge differs from the one in the file the CLI was given."""


@dataclass(frozen=True, slots=True)
class ReloadSummary:
    """What a reload changed, by judge name (a judge changes when its settings or version do)."""

    config_file: str
    changes: NamedChanges
    judges: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {"config_file": self.config_file, **self.changes.to_json(), "judges": self.judges}


def judge_rows(config: JudgesConfig, judges: Sequence[OnlineJudge]) -> list[dict[str, Any]]:
    """Every configured judge in file order, as `agenttrail judges list --format json` prints it."""
    built = {judge.name: judge for judge in judges}
    rows = []
    for spec in config.judges:
        judge = built.get(spec.name)
        rows.append(
            {
                "name": spec.name,
                "type": str(spec.options.get("type", "")),
                "model": str(spec.options.get("model", "")),
                "enabled": spec.enabled,
                "version": judge.version if judge else "",
                "sample_rate": spec.sample_rate,
                "agents": list(spec.agents),
                "tasks": list(spec.tasks),
                "failure": spec.failure,
            }
        )
    return rows


class LiveJudges:
    """The judges in force in a running sidecar, and the reload that replaces them."""

    def __init__(
        self,
        config_file: str | None,
        pool: ClientPool | None = None,
        *,
        configs: JudgeConfigs | None = None,
        reread: Callable[[], JudgeConfigs] | None = None,
    ) -> None:
        """`configs`: the sections in force at start (None: read from `config_file`); `reread`:
        how a reload reads them again (the composition root's, with the environment's values;
        None: the file alone)."""
        self.config_file = config_file
        self._pool = pool or ClientPool()
        self._reread = reread or (lambda: JudgeConfigs.from_file(config_file))
        self.config = (configs or self._reread()).judges
        self.judges: tuple[OnlineJudge, ...] = tuple(build_online_judges(self.config, self._pool))
        self.worker: JudgeWorker | None = None
        # Others that read the judges' sections (the evaluation API): each checks the fresh
        # sections and returns the function that puts them in force, called only once every
        # check passed.
        self.also: list[Callable[[JudgeConfigs], Callable[[], None]]] = []
        self._lock = threading.Lock()

    def rows(self) -> list[dict[str, Any]]:
        config, judges = self.config, self.judges
        return judge_rows(config, judges)

    def reload(self) -> ReloadSummary:
        """Read the config file again; ConfigError (naming file, judge and key) leaves all as it was."""
        if not self.config_file:
            raise ConfigError(
                "serve was started without --config, so it has no judges section to reload; "
                "restart it with --config FILE"
            )
        with self._lock:
            fresh = self._reread()
            config = fresh.judges
            judges = tuple(build_online_judges(config, self._pool))
            swaps = [prepare(fresh) for prepare in self.also]
            summary = self._summary(config, judges)
            self.config, self.judges = config, judges
            for swap in swaps:
                swap()
            if self.worker is not None:
                self.worker.replace_judges(judges)
        log.info(
            "judges reloaded from %s: %s",
            summary.config_file,
            summary.changes.describe() or "nothing changed",
        )
        return summary

    def _summary(self, config: JudgesConfig, judges: Sequence[OnlineJudge]) -> ReloadSummary:
        def state(cfg: JudgesConfig, built: Sequence[OnlineJudge]) -> dict[str, tuple[JudgeSpec, str]]:
            versions = {judge.name: judge.queue_key for judge in built}
            return {spec.name: (spec, versions.get(spec.name, "")) for spec in cfg.judges}

        return ReloadSummary(
            config_file=str(Path(str(self.config_file)).resolve()),
            changes=NamedChanges.between(state(self.config, self.judges), state(config, judges)),
            judges=judge_rows(config, judges),
        )

    def for_backfill(self, name: str, fingerprint: str | None = None) -> OnlineJudge:
        """The judge a backfill runs: the one in force (sharing the online judge's client and
        budget), or built from its spec when disabled. `fingerprint` is the spec in the CLI's file."""
        with self._lock:
            config, judges = self.config, self.judges
        try:
            spec = config.get(name)
        except ConfigError as exc:
            raise JudgeMismatch(
                f"{exc}, in the running sidecar; if you just added it to the file, run "
                "`agenttrail judges reload` first"
            ) from exc
        if fingerprint and fingerprint != spec.fingerprint:
            raise JudgeMismatch(
                f"judge {name!r} in your config file differs from the one the running sidecar has in force; "
                "run `agenttrail judges reload` so serve takes the edit, then backfill again"
            )
        built = next((judge for judge in judges if judge.name == name), None)
        return built or build_online_judge(spec, self._pool)


def install_judges(
    sidecar: Sidecar,
    configs: JudgeConfigs,
    evaluator: EvaluatorConfig,
    pool: ClientPool | None = None,
    *,
    config_file: str | None = None,
    reread: Callable[[], JudgeConfigs] | None = None,
) -> LiveJudges:
    """The judge worker (idle while no judge is configured: a reload may add some), its /healthz
    entry, the audit route, the judges read route and SIGHUP's reload (`reread`: how it reads the
    sections of `config_file` again)."""
    live = LiveJudges(config_file, pool, configs=configs, reread=reread)
    worker = JudgeWorker(
        sidecar.new_store,
        live.judges,
        lookback_s=evaluator.lookback_s,
        poll_interval_s=evaluator.poll_interval_s,
        ingest_busy=lambda: ingest_backlog(sidecar) >= INGEST_BACKLOG_SPANS,
    )
    live.worker = worker
    sidecar.add_worker(worker)
    sidecar.on_assembled.append(worker.wake)
    sidecar.health_details["judges"] = worker.status
    sidecar.on_reload.append(live.reload)
    read_store: list[Store] = []

    def decisions_route(params: dict[str, str]) -> list[dict[str, Any]]:
        trace_id = audit_params(params)
        if not read_store:
            read_store.append(sidecar.new_store())
        subjects = audit_subjects(evaluator, live.config, live.judges, worker.status())
        return audit_run(read_store[0], trace_id, subjects, lookback_s=evaluator.lookback_s)

    sidecar.add_read_route("/api/v1/decisions", decisions_route)
    sidecar.add_read_route(JUDGES_ROUTE, lambda params: live.rows())
    return live
