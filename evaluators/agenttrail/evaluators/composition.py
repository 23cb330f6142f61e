"""The composition root: the whole sidecar, built in one place.

`build_sidecar` creates what `agenttrail serve` runs, in the order that matters: the
collector's sidecar (store, spool, receivers, writer, assembler, HTTP and gRPC fronts), then
each evaluator part on it. Nothing installs itself by being imported; a new part is one line
here. The heavy modules load inside `build_sidecar`, so the CLI, which imports this module for
the migration list and the config sections, starts without them.

    schema            ALL_MIGRATIONS, handed to the Sidecar, applied by its start()
    criteria          the criteria sets' read route (saved-set judges get the store via ClientPool)
    drift monitor     the drift monitor, the stats and drift read routes
    evaluator         the online scoring worker and the scores route (scoring/)
    judges            the judge worker, its reload on SIGHUP, the decisions and judges routes
    alerts            the rule evaluator, its delivery and its reload on SIGHUP
    export, report    OTLP and Prometheus metrics, the report route
    evaluation API    gRPC, sharing the judges' clients (and so each model's budget)
    admin             write endpoints and backfill jobs at /api/v1/admin
    console, MCP      the pages at /console and the tools at /mcp/, reading all of the above
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from agenttrail.collector.schema import MIGRATIONS, Migration, combine
from agenttrail.evaluators import config_sections
from agenttrail.evaluators.judges.criteria.sets import CRITERIA_MIGRATIONS
from agenttrail.evaluators.monitoring.alerts.schema import ALERT_MIGRATIONS
from agenttrail.evaluators.monitoring.drift_events import MONITORING_MIGRATIONS
from agenttrail.evaluators.scoring.schema import EVALUATOR_MIGRATIONS

if TYPE_CHECKING:
    from agenttrail.collector.config import SidecarConfig
    from agenttrail.collector.sidecar import Sidecar

# The one schema: the collector's migrations (1-99), then each wing's, in version order. `serve`
# applies it, every command that opens the store applies it first (so any table exists for
# whichever runs first), `agenttrail schema` prints it. A new wing's list is added here.
ALL_MIGRATIONS: Final[tuple[Migration, ...]] = combine(
    MIGRATIONS,  # collector: spans, arrivals, trajectories
    EVALUATOR_MIGRATIONS,  # scoring 100, judges 110, monitoring rollups 116-119
    CRITERIA_MIGRATIONS,  # 115
    MONITORING_MIGRATIONS,  # drift events 120
    ALERT_MIGRATIONS,  # 130
)
# The config file sections the evaluators own, their settings and parsers: the CLI's loader
# checks a file against them (`serve`, `config show`) and refuses a section nobody owns.
CONFIG_SECTIONS: Final = config_sections.CONFIG_SECTIONS


def build_sidecar(config: SidecarConfig, config_file: str | None = None) -> Sidecar:
    """The sidecar `serve` runs, every evaluator part installed, not started yet. The evaluators'
    sections are read here, once (file, then the environment over it), and each part is handed
    its parsed section; a bad one raises ConfigError before anything is built."""
    from agenttrail.collector.sidecar import Sidecar
    from agenttrail.evaluators.admin.api import install_admin
    from agenttrail.evaluators.api import install_api
    from agenttrail.evaluators.console.install import install_console
    from agenttrail.evaluators.judges import ClientPool
    from agenttrail.evaluators.judges.criteria.install import install_criteria
    from agenttrail.evaluators.judges.setup import install_judges
    from agenttrail.evaluators.mcp_server.install import install_mcp
    from agenttrail.evaluators.monitoring.alerts.install import install_alerts
    from agenttrail.evaluators.monitoring.export_install import install_export_and_report
    from agenttrail.evaluators.monitoring.install import install_monitoring
    from agenttrail.evaluators.scoring.install import install_scoring

    settings = config_sections.load(config_file)
    sidecar = Sidecar(config, ALL_MIGRATIONS)
    install_criteria(sidecar)
    install_monitoring(sidecar, settings.drift)
    evaluator = settings.evaluators
    scoring = install_scoring(sidecar, evaluator)
    # Online and API judging share each model's budget; saved criteria sets are read from this
    # sidecar's own store (passed, not bound globally: two sidecars in a process keep apart).
    judge_clients = ClientPool(store_factory=sidecar.new_store)
    judges = install_judges(
        sidecar,
        settings.judges,
        evaluator,
        judge_clients,
        config_file=config_file,
        reread=lambda: config_sections.load_judges(config_file),  # a reload reads the file again
    )
    # After the judges' reload: a reload warns about the edited sections it does not take.
    sidecar.on_reload.append(config_sections.restart_needed_check(config_file))
    alerts = install_alerts(
        sidecar,
        settings.alerts,
        reread=(lambda: config_sections.load_alerts(config_file)) if config_file else None,
        config_file=config_file,
    )
    install_export_and_report(sidecar, settings.metrics_export)
    api_judges = install_api(sidecar, evaluator.metrics, settings.judges, judge_clients)
    judges.also.append(api_judges.reloaded)  # a judges reload reaches the evaluation API too
    install_admin(sidecar, judges, scoring, alerts)
    install_console(
        sidecar, evaluator=evaluator, alert_rules=lambda: alerts.config.rules, scoring=scoring, judges=judges
    )
    install_mcp(sidecar, evaluator.metrics)
    return sidecar
