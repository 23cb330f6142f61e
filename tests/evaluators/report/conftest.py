"""The report tests' seeded store: runs, scores, drift events and alerts (seed.py)."""

from __future__ import annotations

from typing import Any

import pytest

from agenttrail.collector.schema import migrate
from agenttrail.evaluators.scoring.schema import EVALUATOR_MIGRATIONS

from .seed import MONITORING_TABLES, seed_drift_and_alerts, seed_runs


@pytest.fixture
def seeded(store: Any) -> dict[str, Any]:
    migrate(store, (*EVALUATOR_MIGRATIONS, *MONITORING_TABLES))
    data = seed_runs(store)
    seed_drift_and_alerts(store, data)
    return data
