"""Alerting: rules over runs and scores, a pending/firing/resolved state machine persisted in
ClickHouse, and notifications to webhooks, Slack, Alertmanager and the log.

Import from the submodules (`alerts.config`, `alerts.install`, ...): this package imports
nothing itself, so a command that needs one of them does not load the rest.
"""
