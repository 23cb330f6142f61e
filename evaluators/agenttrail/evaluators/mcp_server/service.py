"""What `agenttrail mcp` does before it serves, as a function tests call without click: on a
store no sidecar holds, migrate it to every table, take the evaluators' metrics as tools' default, and
hand out the store (then clones of it, one per tool call's thread); the stdio loop itself is
`stdio.serve_store` (or `serve_relay` to the sidecar holding the store, at `relay_url`).

Errors are the project's (a store that cannot be migrated); the store is closed before one is
raised. The `evaluators:` section comes parsed (the CLI reads it env over file, as serve does).
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
    from agenttrail.evaluators.scoring.worker import EvaluatorConfig


@dataclass(frozen=True, slots=True)
class StdioSession:
    """What the stdio server needs: a store per caller, and the metrics tools default to."""

    open_store: Callable[[], Store]
    metrics: tuple[str, ...]


def stdio_session(
    store: Store, evaluator: EvaluatorConfig, migrations: Sequence[Migration] = ()
) -> StdioSession:
    """`store` migrated (a store no sidecar has run yet still gets every table) with the
    evaluator's metrics; `open_store` gives `store` first, then clones."""
    try:
        migrate(store, tuple(migrations))
    except AgentTrailError:
        store.close()
        raise
    opened = [store]

    def open_store() -> Store:
        return opened.pop() if opened else store.clone()

    return StdioSession(open_store, tuple(evaluator.metrics))


def relay_url(api: SidecarApi) -> str:
    """The MCP endpoint of the sidecar holding the store."""
    from agenttrail.evaluators.mcp_server.http import PREFIX

    return f"{api.base_url}{PREFIX}/"
