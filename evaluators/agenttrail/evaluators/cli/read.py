"""What the monitoring read commands (`stats`, `drift`, `alerts`, `report`) share: their
`--format`/`--server` options, the time range and usage errors, and one way to read.

`read_rows` asks the running sidecar's route while it holds the embedded store (or `--server`),
else computes the rows on the store itself after migrating it to every table the sidecar has
(`composition.ALL_MIGRATIONS`), so the drift and alert tables exist for whichever command runs first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import click

from agenttrail.collector.cli import config_from
from agenttrail.collector.cli import read_rows as collector_read_rows
from agenttrail.collector.queries import QueryError, parse_time
from agenttrail.collector.store import Store
from agenttrail.evaluators.composition import ALL_MIGRATIONS

format_option = click.option(
    "--format", "output_format", type=click.Choice(["table", "json"]), default="table", show_default=True
)
server_option = click.option(
    "--server", help="Read from a running sidecar's HTTP API at this URL (http://host:4318)."
)


def read_rows(
    store: str | None,
    database: str | None,
    config_file: str | None,
    server: str | None,
    route: str,
    params: dict[str, str],
    local: Callable[[Store], list[dict[str, Any]]],
) -> list[dict[str, Any]]:
    """Rows from the running sidecar's route, or computed on the store when nothing holds it."""
    config = config_from({"store": store, "database": database}, config_file)
    return collector_read_rows(config, server, route, params, local, ALL_MIGRATIONS)


def time_range(since: str, until: str | None) -> tuple[datetime, datetime]:
    """--since/--until (ISO 8601 or a duration back), both against the same now; until defaults to now."""
    now = datetime.now(UTC)
    return parse_time(since, now=now), parse_time(until, now=now) if until else now


@contextmanager
def usage_errors(param_hint: str | None = None) -> Iterator[None]:
    """A value the user gave that cannot be read is a usage error (exit 2), not a failure."""
    try:
        yield
    except QueryError as exc:
        raise click.BadParameter(str(exc), param_hint=param_hint) from exc
