"""`agenttrail alerts`: active and past alerts, their history, and `alerts test RULE` (a replay);
what each reads is `monitoring/alerts/service.py`'s.

The group is added to `agenttrail` lazily by agenttrail.evaluators.cli.main. While `serve` holds
the embedded store, every subcommand asks the sidecar's read API (`/api/v1/alerts`, `/history`, `/test`);
`alerts test` then replays the rule as the sidecar has it configured; on the store, as the
`alerts:` section reads for serve (env AGENTTRAIL_ALERTS_<KEY> over the file).
"""

from __future__ import annotations

import click

from agenttrail.collector.cli import cli_error, emit_rows, store_options
from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.queries import QueryError
from agenttrail.evaluators import config_sections
from agenttrail.evaluators.cli.read import format_option, read_rows, server_option, usage_errors


def _labels(labels: dict[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in labels.items()) or "-"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


@click.group(invoke_without_command=True)
@store_options
@click.option("--all", "show_all", is_flag=True, help="Also resolved alerts, not only pending and firing.")
@click.option("--since", help="Only alerts updated since: ISO 8601 or a duration back from now (2h, 7d).")
@click.option("--rule", help="Only this rule.")
@click.option("--limit", default=200, show_default=True, type=click.IntRange(min=1))
@format_option
@server_option
@click.pass_context
def alerts(
    ctx: click.Context,
    store: str | None,
    database: str | None,
    config_file: str | None,
    show_all: bool,
    since: str | None,
    rule: str | None,
    limit: int,
    output_format: str,
    server: str | None,
) -> None:
    """Pending and firing alerts (with --all, resolved ones too): state, since, value, rule, group."""
    if ctx.invoked_subcommand is not None:
        return
    from agenttrail.evaluators.monitoring.alerts.service import alerts_read

    with usage_errors("--since"):
        read = alerts_read(show_all=show_all, since=since, rule=rule, limit=limit)
    rows = read_rows(store, database, config_file, server, read)
    empty = "no alerts" + ("" if show_all else " pending or firing (--all shows resolved ones)")
    emit_rows(
        rows,
        output_format,
        empty=empty + ("" if rows or rule else _no_rules_hint(config_file)),
        headers=["state", "since", "value", "threshold", "rule", "severity", "group", "summary"],
        cells=lambda row: (
            row["state"],
            (row["since"] or "")[:19],
            _number(row["value"]),
            _number(row["threshold"]),
            row["rule"],
            row["severity"],
            _labels(row["labels"]),
            row["annotations"].get("summary", ""),
        ),
    )


def _no_rules_hint(config_file: str | None) -> str:
    """Why there may be no alert at all: the config this command reads (serve's too, as a rule)
    has no rules, and serve alerts on nothing else. Empty when it has some or cannot be read."""
    try:
        configured = config_sections.load_alerts(config_file).rules
    except AgentTrailError:
        return ""
    if configured:
        return ""
    where = f"config {config_file}" if config_file else "no --config or AGENTTRAIL_CONFIG given"
    return (
        f"\nno alert rules are configured ({where}): serve raises alerts only for the rules under "
        "`alerts: rules:` in the config it runs with (deploy/agenttrail.yaml has examples)"
    )


@alerts.command("history")
@store_options
@click.option("--since", help="Only events since: ISO 8601 or a duration back from now (2h, 7d).")
@click.option("--rule", help="Only this rule.")
@click.option("--limit", default=200, show_default=True, type=click.IntRange(min=1))
@format_option
@server_option
def alerts_history(
    store: str | None,
    database: str | None,
    config_file: str | None,
    since: str | None,
    rule: str | None,
    limit: int,
    output_format: str,
    server: str | None,
) -> None:
    """Transitions, notifications and every delivery attempt with its outcome, newest first."""
    from agenttrail.evaluators.monitoring.alerts.service import history_read

    with usage_errors("--since"):
        read = history_read(since=since, rule=rule, limit=limit)
    rows = read_rows(store, database, config_file, server, read)
    emit_rows(
        rows,
        output_format,
        empty="no alert history",
        headers=["at", "rule", "group", "event", "change", "channel", "outcome", "try", "error"],
        cells=lambda row: (
            row["at"][:23],
            row["rule"],
            _labels(row["labels"]),
            row["event"],
            f"{row['from']} -> {row['to']}" if row["event"] == "transition" else row["notification"],
            row["channel"],
            row["delivery"],
            row["attempt"] or "",
            row["error"][:60],
        ),
    )


@alerts.command("test")
@click.argument("rule")
@store_options
@click.option("--since", default="24h", show_default=True, help="Replay from: ISO 8601 or a duration back.")
@click.option("--until", help="Replay until (default now), same forms as --since.")
@click.option("--step", default="1m", show_default=True, help="Evaluate the rule every STEP (30s, 1m, 5m).")
@format_option
@server_option
def alerts_test(
    rule: str,
    store: str | None,
    database: str | None,
    config_file: str | None,
    since: str,
    until: str | None,
    step: str,
    output_format: str,
    server: str | None,
) -> None:
    """Replay RULE over past data: when it would have gone pending, firing and resolved (nothing is sent)."""
    from agenttrail.evaluators.monitoring.alerts.service import replay_read, summarise_replay

    try:
        alerts_config = config_sections.load_alerts(config_file)  # env over the file, as serve
        read = replay_read(rule, alerts_config, since=since, until=until, step=step)
    except QueryError as exc:
        raise click.BadParameter(str(exc)) from exc
    except AgentTrailError as exc:
        raise cli_error(exc) from exc
    events = read_rows(store, database, config_file, server, read)
    emit_rows(
        events,
        output_format,
        empty=f"rule {rule} would not have changed state between {since} ago and now",
        headers=["at", "group", "transition", "value", "threshold", "notify", "detail"],
        cells=lambda event: (
            event["at"][:19],
            _labels(event["labels"]),
            f"{event['from']} -> {event['to']}",
            _number(event["value"]),
            _number(event["threshold"]),
            event["notify"] or "-",
            event["detail"],
        ),
    )
    if output_format == "table":
        summary = summarise_replay(events)
        click.echo(
            f"rule {rule} would have fired {summary.fired} time(s) in {summary.groups} group(s); "
            "replayed without notifying anyone",
            err=True,
        )


@alerts.command("reload")
@store_options
@server_option
def alerts_reload(
    store: str | None, database: str | None, config_file: str | None, server: str | None
) -> None:
    """Make the running sidecar take its config file's edited alerts section, without a restart.

    The same as SIGHUP to serve (or POST /api/v1/admin/alerts/reload). A section it refuses (exit 3,
    the error names the file, rule and key) leaves the rules in force as they were; a kept rule's
    firing alert is not announced again. With no sidecar running, checks the section as serve
    does when it starts."""
    from agenttrail.collector.cli import config_from, running_sidecar
    from agenttrail.evaluators.monitoring.alerts.service import AlertsChecked, reload_alerts

    config = config_from({"store": store, "database": database}, config_file)
    try:
        api = running_sidecar(config, server)
        if api is None and not config_file:
            raise click.UsageError(
                "no sidecar is running to reload; pass --config FILE to check an alerts section"
            )
        outcome = reload_alerts(api, config_file, lambda: config_sections.load_alerts(config_file))
    except AgentTrailError as exc:
        raise cli_error(exc) from exc
    if isinstance(outcome, AlertsChecked):
        click.echo(
            f"no sidecar holds the store at {config.store}: nothing to reload. {outcome.config_file}: "
            f"{len(outcome.rules)} rule(s) ({', '.join(outcome.rules) or 'none'}) and "
            f"{len(outcome.channels)} channel(s) valid; serve takes them when it starts"
        )
        return
    if outcome.other_file:
        click.echo(
            f"note: the sidecar reads its own config file {outcome.config_file}, not {config_file}", err=True
        )
    click.echo(f"alerts reloaded from {outcome.config_file}: {outcome.summary}")


__all__ = ["alerts"]
