"""What the monitoring read commands (`stats`, `drift`, `alerts`, `report`) share: their
`--format`/`--server` options, usage errors, and one way to make the read their service
describes (`collector.reads.ReadRequest`).

`read_rows` asks the running sidecar's route while it holds the embedded store (or `--server`),
else computes the rows on the store itself after migrating it to every table the sidecar has
(`composition.ALL_MIGRATIONS`), so the drift and alert tables exist for whichever command runs first.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from agenttrail.collector.cli import config_from
from agenttrail.collector.cli import read_rows as collector_read_rows
from agenttrail.collector.queries import QueryError
from agenttrail.collector.reads import ReadRequest
from agenttrail.evaluators.composition import ALL_MIGRATIONS

format_option = click.option(
    "--format", "output_format", type=click.Choice(["table", "json"]), default="table", show_default=True
)
server_option = click.option(
    "--server",
    help="Read from a running sidecar's HTTP API at this URL (http://host:4318), "
    "sending serve's token from AGENTTRAIL_BEARER_TOKEN.",
)


def read_rows(
    store: str | None, database: str | None, config_file: str | None, server: str | None, read: ReadRequest
) -> list[dict[str, Any]]:
    """The rows a service's `read` describes: from the running sidecar's route, or computed on
    the store when nothing holds it."""
    config = config_from({"store": store, "database": database}, config_file)
    return collector_read_rows(config, server, read.route, read.params, read.local, ALL_MIGRATIONS)


@contextmanager
def usage_errors(param_hint: str | None = None) -> Iterator[None]:
    """A value the user gave that cannot be read is a usage error (exit 2), not a failure."""
    try:
        yield
    except QueryError as exc:
        raise click.BadParameter(str(exc), param_hint=param_hint) from exc
