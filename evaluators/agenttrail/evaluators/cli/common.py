"""What several command modules share and the group module (`main`) would otherwise lend them
by being imported: opening the store for a writing command."""

from __future__ import annotations

import click

from agenttrail.collector.cli import SidecarApi, cli_error, config_from, read_via
from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store
from agenttrail.evaluators.composition import ALL_MIGRATIONS


def open_store(store: str | None, database: str | None, config_file: str | None) -> Store:
    """The store itself, for writing commands (created if missing); refuses politely while serve
    holds an embedded store."""
    config = config_from({"store": store, "database": database}, config_file)
    source = read_via(config, None, create=True)
    if isinstance(source, SidecarApi):
        raise click.ClickException(
            f"the store is held by a running sidecar ({source.base_url}); stop it to change references, "
            "or point --store at a ClickHouse server that both can share"
        )
    try:
        migrate(source, ALL_MIGRATIONS)
    except AgentTrailError as exc:
        raise cli_error(exc) from exc
    return source
