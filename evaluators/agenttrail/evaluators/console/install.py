"""The console's part of `agenttrail serve`: the `/api/v1/runs` read route and the pages at
`/console`, behind the sidecar's bearer token."""

from __future__ import annotations

from typing import Any

from agenttrail.collector.sidecar import Sidecar
from agenttrail.evaluators.console.runs import RunsFilter, list_runs
from agenttrail.evaluators.judges.config import JudgesConfig
from agenttrail.evaluators.judges.setup import audit_subjects
from agenttrail.evaluators.judges.worker import JudgeWorker
from agenttrail.evaluators.monitoring.alerts.config import AlertsConfig
from agenttrail.evaluators.monitoring.route_store import lazy_store
from agenttrail.evaluators.scoring.worker import EvaluatorConfig, EvaluatorWorker

PREFIX = "/console"


def install_console(sidecar: Sidecar, config_file: str | None) -> None:
    """Add the runs read route and mount the console (after the evaluators' workers exist)."""
    store = lazy_store(sidecar)

    def runs_route(params: dict[str, str]) -> list[dict[str, Any]]:
        return list_runs(store(), RunsFilter.from_params(params)).runs

    sidecar.add_read_route("/api/v1/runs", runs_route)
    from agenttrail.evaluators.console.app import ConsoleSettings, create_app

    evaluator = EvaluatorConfig.from_file(config_file)
    worker = next((w for w in sidecar.workers if isinstance(w, EvaluatorWorker)), None)
    judge_worker = next((w for w in sidecar.workers if isinstance(w, JudgeWorker)), None)
    judges = JudgesConfig.from_file(config_file)
    subjects = audit_subjects(evaluator, judges, judge_worker.judges if judge_worker else ())
    settings = ConsoleSettings(
        bearer_token=sidecar.config.bearer_token,
        evaluator=evaluator,
        judges=subjects[1:],
        alert_rules=AlertsConfig.from_file(config_file).rules,
        on_references_changed=worker.rescan if worker else None,
    )
    sidecar.mount_app(PREFIX, create_app(sidecar.new_store, settings))
