"""Fixtures the monitoring tests share."""

from __future__ import annotations

import pytest

from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store
from agenttrail.evaluators.composition import ALL_MIGRATIONS


@pytest.fixture
def rollup_store(store: Store) -> Store:
    """The test's store with every migration, the evaluators' rollups included."""
    migrate(store, ALL_MIGRATIONS)
    return store
