"""The composition root: the whole sidecar, built in one place.

`build_sidecar` creates what `agenttrail serve` runs, in the order that matters: the
collector's sidecar (store, spool, receivers, writer, assembler, HTTP and gRPC fronts), then
each evaluator part on it. Nothing installs itself by being imported; a new part is one line
here. The heavy modules load inside `build_sidecar`, so the CLI, which imports this module for
the migration lists and the config sections, starts without them.

    criteria          the criteria-sets table, the store saved-set judges read, its read route
    drift monitor     the drift table and monitor, the stats and drift read routes
    evaluator         the online scoring worker and the scores route (scoring/)
    judges            the judge worker, its reload on SIGHUP, the decisions and judges routes
    alerts            the rule evaluator and its delivery
    export, report    OTLP and Prometheus metrics, the report route
    evaluation API    gRPC, sharing the judges' clients (and so each model's budget)
    admin             write endpoints and backfill jobs at /api/v1/admin
    console, MCP      the pages at /console and the tools at /mcp/, reading all of the above
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from agenttrail.collector.schema import MIGRATIONS, Migration
from agenttrail.evaluators import config_sections
from agenttrail.evaluators.judges.criteria.sets import CRITERIA_MIGRATIONS
from agenttrail.evaluators.monitoring.alerts.schema import ALERT_MIGRATIONS
from agenttrail.evaluators.monitoring.drift_events import MONITORING_MIGRATIONS
from agenttrail.evaluators.scoring.schema import EVALUATOR_MIGRATIONS

if TYPE_CHECKING:
    from agenttrail.collector.config import SidecarConfig
    from agenttrail.collector.sidecar import Sidecar

# The tables writing commands need (references, scores, decisions) on top of the collector's.
STORE_MIGRATIONS: Final = (*MIGRATIONS, *EVALUATOR_MIGRATIONS)
# Every table a read command may touch, so the drift and alert tables exist for whichever runs first.
READ_MIGRATIONS: Final = (*STORE_MIGRATIONS, *MONITORING_MIGRATIONS, *ALERT_MIGRATIONS)
# What `agenttrail schema` prints: every migration the sidecar runs.
SCHEMA_MIGRATIONS: Final[tuple[Migration, ...]] = tuple(
    dict.fromkeys((*MIGRATIONS, *READ_MIGRATIONS, *CRITERIA_MIGRATIONS))
)
# The config file sections the evaluators own, their settings and parsers: the CLI's loader
# checks a file against them (`serve`, `config show`) and refuses a section nobody owns.
CONFIG_SECTIONS: Final = config_sections.CONFIG_SECTIONS


def build_sidecar(config: SidecarConfig, config_file: str | None = None) -> Sidecar:
    """The sidecar `serve` runs, every evaluator part installed, not started yet."""
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
    from agenttrail.evaluators.scoring.worker import EvaluatorConfig

    sidecar = Sidecar(config)
    install_criteria(sidecar)  # first: judges built below find the saved sets' store
    install_monitoring(sidecar, config_file)
    evaluator = EvaluatorConfig.from_file(config_file)
    install_scoring(sidecar, evaluator)
    judge_clients = ClientPool()  # online and API judging share each model's budget
    judges = install_judges(sidecar, config_file, evaluator, judge_clients)
    install_alerts(sidecar, config_file)
    install_export_and_report(sidecar, config_file)
    api_judges = install_api(sidecar, evaluator.metrics, config_file, judge_clients)
    judges.also.append(api_judges.reloaded)  # a judges reload reaches the evaluation API too
    install_admin(sidecar, judges)
    install_console(sidecar, config_file)  # after the workers: it finds them on the sidecar
    install_mcp(sidecar, config_file)
    return sidecar
