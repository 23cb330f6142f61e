"""The metrics export and the report route, added to every sidecar (from `install_evaluator`)."""

from __future__ import annotations

from agenttrail.collector.sidecar import Sidecar
from agenttrail.evaluators.monitoring.export_config import MetricsExportConfig
from agenttrail.evaluators.monitoring.exporter import install_metrics_export
from agenttrail.evaluators.monitoring.report import install_report_route


def install_export_and_report(sidecar: Sidecar, config: MetricsExportConfig) -> None:
    """The metrics export (Prometheus /metrics, OTLP) and the report's read route."""
    install_metrics_export(sidecar, config)
    install_report_route(sidecar)
