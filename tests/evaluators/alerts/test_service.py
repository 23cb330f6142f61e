"""The alerts commands' service functions, called without click: the values they check, the
reads they describe, and their rows on a real chDB store (alerts, history, a replay)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from agenttrail.collector.errors import ConfigError
from agenttrail.collector.queries import QueryError
from agenttrail.evaluators import config_sections
from agenttrail.evaluators.monitoring.alerts.config import AlertsConfig
from agenttrail.evaluators.monitoring.alerts.evaluator import AlertEvaluator
from agenttrail.evaluators.monitoring.alerts.service import (
    UnknownRule,
    alerts_read,
    history_read,
    replay_read,
    summarise_replay,
)

from .data import insert_runs

HOUR = 3600.0
MINUTE = 60.0
SPIKE = {
    "name": "spike",
    "kind": "failure_rate_spike",
    "params": {"window": "15m", "baseline": "24h", "factor": 3, "floor": 0.1, "min_runs": 10},
    "for": "10m",
}


def write_config(tmp_path: Path, **rule: Any) -> AlertsConfig:
    """The `alerts:` section with SPIKE (changed by `rule`), parsed as the CLI hands it over."""
    path = tmp_path / "agenttrail.yaml"
    path.write_text(yaml.safe_dump({"alerts": {"rules": [{**SPIKE, **rule}]}}))
    return config_sections.load_alerts(str(path), {})


def test_replay_read_replays_the_configured_rule_over_stored_runs(alert_store: Any, tmp_path: Path) -> None:
    """A burst of failures 1h45m-1h30m ago: pending, firing `for` later, resolved; nothing stored."""
    now = time.time()
    insert_runs(alert_store, agent="checkout", at=now - 2 * HOUR, count=200, spread_s=2 * HOUR)
    insert_runs(alert_store, agent="checkout", at=now - 1.5 * HOUR, count=40, failed=20, spread_s=30 * MINUTE)
    insert_runs(alert_store, agent="checkout", at=now, count=60, spread_s=1.5 * HOUR)
    read = replay_read("spike", write_config(tmp_path), since="4h", step="5m", now=now)
    assert (read.route, read.params) == (
        "/api/v1/alerts/test",
        {"rule": "spike", "since": "4h", "step": "5m"},
    )
    events = read.local(alert_store)
    assert [(e["from"], e["to"]) for e in events] == [
        ("inactive", "pending"),
        ("pending", "firing"),
        ("firing", "resolved"),
    ]
    assert summarise_replay(events) == (1, 1)
    assert alert_store.query("SELECT count() FROM alert_history")[0][0] == 0


def test_replay_read_refuses_what_it_cannot_run(alert_store: Any, tmp_path: Path) -> None:
    """An unknown rule (found when the store is read: a sidecar replays its own rules) names the
    configured ones; too many steps fail before any read, as a bad rule fails its parsing."""
    with pytest.raises(UnknownRule, match=r"no alert rule named 'spik' \(rules: spike\)"):
        replay_read("spik", write_config(tmp_path)).local(alert_store)
    with pytest.raises(QueryError, match="use a larger --step"):
        replay_read("spike", write_config(tmp_path), since="30d", step="1m")
    with pytest.raises(ConfigError, match="factor"):
        write_config(tmp_path, params={"factor": "big"})


def test_alerts_and_history_reads_list_what_the_evaluator_recorded(alert_store: Any) -> None:
    now = time.time()
    insert_runs(alert_store, agent="checkout", at=now, count=30, failed=15, spread_s=5 * MINUTE)
    config = AlertsConfig.from_mapping({"rules": [{**SPIKE, "for": "0s"}]}, "test")
    evaluator = AlertEvaluator(alert_store.clone, config, clock=lambda: now)
    evaluator.run_once()
    evaluator.stop()

    [alert] = alerts_read().local(alert_store)
    assert (alert["rule"], alert["state"], alert["labels"]) == ("spike", "firing", {"agent": "checkout"})
    assert alerts_read(rule="other").local(alert_store) == []
    assert alerts_read(show_all=True, since="1h", limit=5).params["all"] == "1"
    transitions = [
        row for row in history_read(rule="spike").local(alert_store) if row["event"] == "transition"
    ]
    assert [(row["from"], row["to"]) for row in transitions] == [
        ("pending", "firing"),
        ("inactive", "pending"),
    ]
    assert history_read(rule="other").local(alert_store) == []
    with pytest.raises(QueryError, match="soon"):
        alerts_read(since="soon")
