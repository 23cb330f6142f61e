"""Fixtures for the alert tests: a migrated store and a real webhook receiver on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agenttrail.collector.schema import migrate
from agenttrail.evaluators.monitoring.alerts.schema import ALERT_MIGRATIONS
from agenttrail.evaluators.scoring.schema import EVALUATOR_MIGRATIONS

from .webhook_server import WebhookServer


@pytest.fixture
def alert_store(store: Any) -> Any:
    """The test's store with the evaluator's and the alerts' tables."""
    migrate(store, (*EVALUATOR_MIGRATIONS, *ALERT_MIGRATIONS))
    return store


@pytest.fixture
def webhook() -> Iterator[WebhookServer]:
    server = WebhookServer().start()
    yield server
    server.stop()
