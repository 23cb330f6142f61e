"""What `agenttrail mcp` prepares before serving stdio, called without click on a chDB store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agenttrail.collector.errors import ConfigError
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.mcp_server.service import stdio_session


def test_the_session_migrates_the_store_and_reads_the_default_metrics(store: Any, tmp_path: Path) -> None:
    config = tmp_path / "agenttrail.yaml"
    config.write_text("evaluators:\n  metrics: [trajectory_recall, latency]\n")
    session = stdio_session(store, str(config), ALL_MIGRATIONS)
    assert session.metrics == ("trajectory_recall", "latency")
    assert store.query("EXISTS TABLE drift_events")[0][0] == 1, "every table, as serve would make"
    first, second = session.open_store(), session.open_store()
    assert first is store
    assert second is not store
    second.close()


def test_a_bad_config_file_closes_the_store(store: Any, tmp_path: Path) -> None:
    config = tmp_path / "agenttrail.yaml"
    config.write_text("evaluators:\n  metrics: [no_such_metric]\n")
    closed: list[bool] = []
    original = store.close
    store.close = lambda: (closed.append(True), original())  # type: ignore[method-assign]
    with pytest.raises(ConfigError, match="no_such_metric"):
        stdio_session(store, str(config), ALL_MIGRATIONS)
    assert closed == [True]
