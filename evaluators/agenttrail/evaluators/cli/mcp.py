"""`agenttrail mcp`: the MCP tools over stdio for a coding assistant (Claude Code, Cursor, ...).

The `mcp` SDK loads inside the command, never when the CLI starts.
"""

from __future__ import annotations

import click

from agenttrail.collector.cli import SidecarApi, cli_error, config_from, read_via, store_options
from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store


@click.command("mcp")
@store_options
@click.option("--server", help="Relay to a running sidecar's HTTP API at this URL (http://host:4318).")
def mcp_command(store: str | None, database: str | None, config_file: str | None, server: str | None) -> None:
    """Serve the MCP tools (runs, versions, drift, alerts, metrics, read-only SQL) over stdio."""
    from agenttrail.evaluators.composition import ALL_MIGRATIONS
    from agenttrail.evaluators.mcp_server.http import PREFIX
    from agenttrail.evaluators.mcp_server.stdio import serve_relay, serve_store
    from agenttrail.evaluators.scoring.worker import EvaluatorConfig

    config = config_from({"store": store, "database": database}, config_file)
    source = read_via(config, server)
    if isinstance(source, SidecarApi):
        serve_relay(f"{source.base_url}{PREFIX}/", source.token)
        return
    try:
        migrate(source, ALL_MIGRATIONS)  # a store no sidecar has run yet still has every table
        metrics = EvaluatorConfig.from_file(config_file).metrics
    except AgentTrailError as exc:
        source.close()
        raise cli_error(exc) from exc
    opened = [source]

    def open_store() -> Store:
        return opened.pop() if opened else source.clone()

    serve_store(open_store, metrics)
