"""What `agenttrail mcp` does before it serves, as a function tests call without click: on a
store no sidecar holds, migrate it to every table and read the evaluators' default metrics, and
hand out the store (then clones of it, one per tool call's thread); the stdio loop itself is
`stdio.serve_store` (or `serve_relay` to the sidecar holding the store, at `relay_url`).

Errors are the project's (a store that cannot be migrated, a config file that cannot be used);
the store is closed before one is raised.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.schema import Migration, migrate

if TYPE_CHECKING:
    from agenttrail.collector.cli import SidecarApi
    from agenttrail.collector.store import Store


@dataclass(frozen=True, slots=True)
class StdioSession:
    """What the stdio server needs: a store per caller, and the metrics tools default to."""

    open_store: Callable[[], Store]
    metrics: tuple[str, ...]


def stdio_session(
    store: Store, config_file: str | None, migrations: Sequence[Migration] = ()
) -> StdioSession:
    """`store` migrated (a store no sidecar has run yet still gets every table) with the config
    file's evaluator metrics; `open_store` gives `store` first, then clones."""
    from agenttrail.evaluators.scoring.worker import EvaluatorConfig

    try:
        migrate(store, tuple(migrations))
        metrics = tuple(EvaluatorConfig.from_file(config_file).metrics)
    except AgentTrailError:
        store.close()
        raise
    opened = [store]

    def open_store() -> Store:
        return opened.pop() if opened else store.clone()

    return StdioSession(open_store, metrics)


def relay_url(api: SidecarApi) -> str:
    """The MCP endpoint of the sidecar holding the store."""
    from agenttrail.evaluators.mcp_server.http import PREFIX

    return f"{api.base_url}{PREFIX}/"
