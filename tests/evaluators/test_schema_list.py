"""The one schema list the composition root builds: the collector's first, every wing's in it,
what serve applies, and every statement safe to run twice (two processes may)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agenttrail.collector.config import SidecarConfig
from agenttrail.collector.schema import MIGRATIONS, migrate
from agenttrail.collector.store import Store
from agenttrail.evaluators.composition import ALL_MIGRATIONS, build_sidecar
from agenttrail.evaluators.judges.criteria.sets import CRITERIA_MIGRATIONS
from agenttrail.evaluators.monitoring.alerts.schema import ALERT_MIGRATIONS
from agenttrail.evaluators.monitoring.drift_events import MONITORING_MIGRATIONS
from agenttrail.evaluators.scoring.schema import EVALUATOR_MIGRATIONS


def test_one_ordered_list_with_the_collectors_first() -> None:
    versions = [m.version for m in ALL_MIGRATIONS]
    assert versions == sorted(set(versions))
    assert ALL_MIGRATIONS[: len(MIGRATIONS)] == MIGRATIONS
    assert all(m.version >= 100 for m in ALL_MIGRATIONS[len(MIGRATIONS) :])
    owned = (*EVALUATOR_MIGRATIONS, *CRITERIA_MIGRATIONS, *MONITORING_MIGRATIONS, *ALERT_MIGRATIONS)
    assert set(ALL_MIGRATIONS) == {*MIGRATIONS, *owned}


def test_serve_applies_the_one_list(tmp_path: Any, start_sidecar: Callable[..., Any]) -> None:
    """The sidecar the composition root builds applies exactly that list (its parts add none),
    and a started one records every version of it in its store."""
    assert build_sidecar(SidecarConfig(store=str(tmp_path / "store"))).migrations == ALL_MIGRATIONS
    store = start_sidecar().store
    recorded = store.query("SELECT Version, Checksum FROM schema_migrations FINAL ORDER BY Version")
    assert recorded == [(m.version, m.checksum) for m in ALL_MIGRATIONS]


def schema_of(store: Store) -> list[tuple[Any, ...]]:
    return store.query(
        "SELECT name, create_table_query FROM system.tables WHERE database = currentDatabase() ORDER BY name"
    )


def test_every_statement_is_safe_to_run_twice(store: Store) -> None:
    """Each statement run again on a migrated store succeeds and changes no table or view."""
    migrate(store, ALL_MIGRATIONS)
    before = schema_of(store)
    for migration in ALL_MIGRATIONS:
        for statement in migration.statements:
            store.command(statement)
    assert schema_of(store) == before
