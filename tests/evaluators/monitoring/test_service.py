"""The stats and drift commands' service functions, called without click: the values they
check, the read they describe (route, parameters) and its rows computed on a real chDB store."""

from __future__ import annotations

import time
from typing import Any

import pytest
from trajectory_rows import agent_run, store_runs

from agenttrail.collector.queries import QueryError
from agenttrail.collector.schema import migrate
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.monitoring.drift_monitor import DriftConfig
from agenttrail.evaluators.monitoring.service import drift_first, drift_read, stats_read

HOUR = 3600.0


@pytest.fixture
def runs_store(store: Any) -> Any:
    """Agent `a` healthy for the day before the last hour, failing most runs in it; `b` healthy."""
    migrate(store, ALL_MIGRATIONS)
    now = time.time()
    runs = [agent_run(start=now - 2 * HOUR - i * 60, agent="a", task="refund") for i in range(40)]
    runs += [
        agent_run(start=now - 30 * 60 + i * 30, agent="a", task="refund", failure=i % 5 != 0)
        for i in range(40)
    ]
    runs += [agent_run(start=now - 20 * 60 + i, agent="b", task="search") for i in range(3)]
    store_runs(store, runs)
    return store


def test_stats_read_counts_the_runs_of_the_agent_asked(runs_store: Any) -> None:
    query, read = stats_read(since="3h", agent="a", bucket="1d", by="task")
    assert (read.route, read.params["agent"], read.params["bucket"], query.by) == (
        "/api/v1/stats",
        "a",
        "1d",
        ("task",),
    )
    rows = read.local(runs_store)
    assert {row["agent"] for row in rows} == {"a"}
    assert sum(row["runs"] for row in rows) == 80
    failures = sum(round(row["failure_rate"] * row["runs"]) for row in rows)
    assert failures == 32


@pytest.mark.parametrize(
    ("given", "message"),
    [({"bucket": "7"}, "--bucket"), ({"since": "yesterday"}, "yesterday"), ({"by": "colour"}, "colour")],
)
def test_stats_read_refuses_values_it_cannot_read(given: dict[str, str], message: str) -> None:
    with pytest.raises(QueryError, match=message):
        stats_read(**given)


def test_drift_read_finds_the_failure_rate_drift_with_given_settings(runs_store: Any) -> None:
    """The recent hour against the day before: `a`'s failure rate drifted; min_samples given here
    beats the config and goes into the route's parameters too."""
    read = drift_read(
        DriftConfig(), recent="1h", baseline="23h", agent="a", metrics=["failure_rate"], min_samples=10
    )
    assert read.route == "/api/v1/drift"
    assert (read.params["min_samples"], read.params["metric"], read.params["agent"]) == (
        "10",
        "failure_rate",
        "a",
    )
    rows = read.local(runs_store)
    [row] = [row for row in rows if row["test"] == "two_proportion_z"]
    assert (row["agent"], row["status"], row["recent_n"], row["baseline_n"]) == ("a", "drift", 40, 40)
    fussy = drift_read(
        DriftConfig(), recent="1h", baseline="23h", agent="a", metrics=["failure_rate"], min_samples=100
    )
    assert {row["status"] for row in fussy.local(runs_store)} == {"insufficient_data"}


def test_drift_read_uses_the_section_it_is_given(runs_store: Any) -> None:
    """The parsed `drift:` section's min_samples decides, when none is given here."""
    fussy = DriftConfig.from_mapping({"min_samples": 100}, "test")
    read = drift_read(fussy, recent="1h", baseline="23h", agent="a", metrics=["failure_rate"])
    assert {row["status"] for row in read.local(runs_store)} == {"insufficient_data"}
    assert "min_samples" not in read.params, "the sidecar's own section decides there"


def test_drift_read_refuses_bad_values() -> None:
    with pytest.raises(QueryError, match="recent"):
        drift_read(DriftConfig(), recent="soon")
    with pytest.raises(QueryError, match="min_samples"):
        drift_read(DriftConfig(), min_samples="many")  # type: ignore[arg-type]


def test_drift_first_puts_drift_before_no_drift_before_the_rest() -> None:
    rows = [{"status": "insufficient_data"}, {"status": "no_drift"}, {"status": "drift"}]
    assert [row["status"] for row in drift_first(rows)] == ["drift", "no_drift", "insufficient_data"]
