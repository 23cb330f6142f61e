"""What `agenttrail mcp` prepares before serving stdio, called without click on a chDB store."""

from __future__ import annotations

from typing import Any

import pytest

from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.schema import Migration
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.mcp_server.service import stdio_session
from agenttrail.evaluators.scoring.worker import EvaluatorConfig


def test_the_session_migrates_the_store_and_takes_the_evaluators_metrics(store: Any) -> None:
    evaluator = EvaluatorConfig.from_mapping({"metrics": ["trajectory_recall", "latency"]}, "test")
    session = stdio_session(store, evaluator, ALL_MIGRATIONS)
    assert session.metrics == ("trajectory_recall", "latency")
    assert store.query("EXISTS TABLE drift_events")[0][0] == 1, "every table, as serve would make"
    first, second = session.open_store(), session.open_store()
    assert first is store
    assert second is not store
    second.close()


def test_a_failed_migration_closes_the_store(store: Any) -> None:
    broken = Migration(999_999, "broken", ("CREATE TABLE no_such_db.t (x UInt8) ENGINE = Memory",))
    closed: list[bool] = []
    original = store.close
    store.close = lambda: (closed.append(True), original())  # type: ignore[method-assign]
    with pytest.raises(AgentTrailError):
        stdio_session(store, EvaluatorConfig(), (*ALL_MIGRATIONS, broken))
    assert closed == [True]
