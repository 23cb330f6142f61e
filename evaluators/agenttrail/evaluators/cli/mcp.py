"""`agenttrail mcp`: the MCP tools over stdio for a coding assistant (Claude Code, Cursor, ...).

The `mcp` SDK loads inside the command, never when the CLI starts; what the command prepares is
`mcp_server/service.py`'s. The tools' default metrics are the `evaluators:` section's, read as
serve reads it (env AGENTTRAIL_EVALUATORS_<KEY> over the file).
"""

from __future__ import annotations

import click

from agenttrail.collector.cli import SidecarApi, cli_error, config_from, read_via, store_options
from agenttrail.collector.errors import AgentTrailError


@click.command("mcp")
@store_options
@click.option(
    "--server",
    help="Relay to a running sidecar's HTTP API at this URL (http://host:4318), "
    "sending serve's token from AGENTTRAIL_BEARER_TOKEN.",
)
def mcp_command(store: str | None, database: str | None, config_file: str | None, server: str | None) -> None:
    """Serve the MCP tools (runs, versions, drift, alerts, metrics, read-only SQL) over stdio."""
    from agenttrail.evaluators import config_sections
    from agenttrail.evaluators.composition import ALL_MIGRATIONS
    from agenttrail.evaluators.mcp_server.service import relay_url, stdio_session
    from agenttrail.evaluators.mcp_server.stdio import serve_relay, serve_store

    config = config_from({"store": store, "database": database}, config_file)
    source = read_via(config, server)
    if isinstance(source, SidecarApi):
        serve_relay(relay_url(source), source.token)
        return
    try:
        try:
            evaluator = config_sections.load_evaluators(config_file)
        except AgentTrailError:
            source.close()
            raise
        session = stdio_session(source, evaluator, ALL_MIGRATIONS)
    except AgentTrailError as exc:
        raise cli_error(exc) from exc
    serve_store(session.open_store, session.metrics)
