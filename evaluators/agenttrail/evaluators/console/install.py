"""The console's part of `agenttrail serve`: the `/api/v1/runs` read route and the pages at
`/console`, behind the sidecar's bearer token."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agenttrail.collector.sidecar import Sidecar
from agenttrail.evaluators.console.runs import RunsFilter, list_runs
from agenttrail.evaluators.judges.setup import LiveJudges, audit_subjects
from agenttrail.evaluators.monitoring.alerts.config import AlertRule
from agenttrail.evaluators.scoring.audit import AuditSubject
from agenttrail.evaluators.scoring.worker import EvaluatorConfig, EvaluatorWorker

PREFIX = "/console"


def install_console(
    sidecar: Sidecar,
    *,
    evaluator: EvaluatorConfig,
    alert_rules: Callable[[], Sequence[AlertRule]],
    scoring: EvaluatorWorker | None = None,
    judges: LiveJudges | None = None,
) -> None:
    """Add the runs read route and mount the console. The composition root hands over what it
    reads: the evaluator's settings, the alert rules in force, the evaluator's worker (woken
    when references change) and the judges in force (the rules and a run's audit as they are
    when the page is asked for, after any reload)."""
    store = sidecar.lazy_store()

    def runs_route(params: dict[str, str]) -> list[dict[str, Any]]:
        return list_runs(store(), RunsFilter.from_params(params)).runs

    sidecar.add_read_route("/api/v1/runs", runs_route)
    from agenttrail.evaluators.console.app import ConsoleSettings, create_app

    def judge_subjects() -> list[AuditSubject]:
        # Read per page, not at install: a saved criteria set's version comes from the store,
        # which is not open until the sidecar starts.
        if judges is None:
            return []
        return audit_subjects(evaluator, judges.config, judges.judges)[1:]

    settings = ConsoleSettings(
        bearer_token=sidecar.config.bearer_token,
        evaluator=evaluator,
        judges=judge_subjects,
        alert_rules=alert_rules,
        on_references_changed=scoring.rescan if scoring else None,
    )
    sidecar.mount_app(PREFIX, create_app(sidecar.new_store, settings), announce="web console")
