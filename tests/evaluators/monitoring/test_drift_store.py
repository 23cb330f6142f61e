"""Drift over stored runs: the ClickHouse loading, the sidecar's drift monitor, routes and CLI."""

from __future__ import annotations

import json
import random
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agenttrail.collector.errors import ConfigError
from agenttrail.collector.schema import migrate
from agenttrail.evaluators.cli.main import cli
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.monitoring.drift import Baseline, DriftQuery, analyse_drift
from agenttrail.evaluators.monitoring.drift_monitor import DriftConfig
from agenttrail.evaluators.monitoring.stats import StatsQuery, query_stats

from .synthetic import Run, store_runs

HOUR = 3600


def drifting_runs(now: float, seed: int = 1) -> list[Run]:
    """`bot` fails 5 % then 40 % in the last hour, its precision drops; `steady` does not change."""
    rng = random.Random(seed)
    runs = []
    for agent in ("bot", "steady"):
        for recent in (False, True):
            count, offset = (120, 0) if recent else (300, HOUR)
            worse = recent and agent == "bot"
            runs.extend(
                Run(
                    start=now - offset - rng.uniform(1, HOUR - 1) * (1 if recent else 23),
                    agent=agent,
                    version="v2" if recent else "v1",
                    latency_s=rng.lognormvariate(0.5 if worse else 0.0, 0.5),
                    failure=rng.random() < (0.4 if worse else 0.05),
                    tools=[("search", "ok")] * rng.randint(1, 3),
                    scores={"trajectory_precision": rng.gauss(0.5 if worse else 0.8, 0.1)},
                )
                for _ in range(count)
            )
    return runs


def drifted_metrics(results: list[Any], agent: str) -> set[str]:
    return {r.metric for r in results if r.drifted and r.agent == agent}


def test_rolling_baseline_finds_the_injected_drift_in_stored_runs(store: Any) -> None:
    """Recent hour against the 24 hours before, read from chDB: the degraded agent drifts in
    failure rate, latency and precision; the steady one drifts in nothing."""
    migrate(store, ALL_MIGRATIONS)
    now = time.time()
    store_runs(store, drifting_runs(now))
    query = DriftQuery(
        recent_s=HOUR, baseline=Baseline(rolling_s=24 * HOUR), now=datetime.fromtimestamp(now, UTC)
    )
    results = analyse_drift(store, query)
    assert {"failure_rate", "latency", "trajectory_precision"} <= drifted_metrics(results, "bot")
    assert drifted_metrics(results, "steady") == set()
    counts = {(r.agent, r.metric): (r.baseline_n, r.recent_n) for r in results}
    assert counts[("bot", "failure_rate")] == (300, 120)
    assert counts[("bot", "trajectory_precision")] == (300, 120)


def test_version_baseline_compares_against_the_pinned_version(store: Any) -> None:
    """--baseline-version v1 compares the recent window's other versions with all v1 runs."""
    migrate(store, ALL_MIGRATIONS)
    now = time.time()
    store_runs(store, drifting_runs(now, seed=2))
    query = DriftQuery(
        recent_s=HOUR, baseline=Baseline(version="v1"), agent="bot", now=datetime.fromtimestamp(now, UTC)
    )
    results = analyse_drift(store, query)
    assert {r.agent for r in results} == {"bot"}
    assert "failure_rate" in drifted_metrics(results, "bot")
    assert next(r for r in results if r.metric == "latency").baseline == "version v1"


def test_too_few_recent_runs_is_insufficient_data(store: Any) -> None:
    """Ten recent runs, however bad, are reported as insufficient data, not drift."""
    migrate(store, ALL_MIGRATIONS)
    now = time.time()
    rng = random.Random(4)
    runs = [
        Run(start=now - HOUR - rng.uniform(1, 20 * HOUR), failure=rng.random() < 0.05) for _ in range(200)
    ]
    runs += [Run(start=now - rng.uniform(1, HOUR - 1), failure=True, latency_s=30.0) for _ in range(10)]
    store_runs(store, runs)
    results = analyse_drift(
        store,
        DriftQuery(
            recent_s=HOUR, baseline=Baseline(rolling_s=24 * HOUR), now=datetime.fromtimestamp(now, UTC)
        ),
    )
    assert results
    assert {r.status for r in results} == {"insufficient_data"}


def drift_config(tmp_path: Path) -> Path:
    path = tmp_path / "agenttrail.yaml"
    path.write_text(
        "drift:\n  interval_s: 3600\n  recent: 1h\n  baseline: 24h\n  min_samples: 30\n  alpha: 0.01\n"
    )
    return path


@pytest.mark.slow
def test_drift_monitor_writes_drift_events_in_one_cycle(
    store: Any, start_sidecar: Any, tmp_path: Path
) -> None:
    """A real sidecar's drift monitor runs a check at start and writes every result to
    drift_events with the agreed columns; the degraded agent's rows say Drifted = 1."""
    migrate(store, ALL_MIGRATIONS)
    store_runs(store, drifting_runs(time.time()))
    sidecar = start_sidecar(str(drift_config(tmp_path)))
    monitor = next(worker for worker in sidecar.workers if worker.name == "drift")
    deadline = time.monotonic() + 60
    while monitor.counters.checks == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert monitor.counters.checks >= 1
    rows = store.query(
        "SELECT Agent, Metric, Test, Drifted, PValue, EffectSize, BaselineN, RecentN, Detail "
        "FROM drift_events ORDER BY Agent, Metric, Test"
    )
    assert len(rows) == monitor.counters.events_written
    drifted = {(agent, metric) for agent, metric, _, flag, *_ in rows if flag}
    assert ("bot", "failure_rate") in drifted
    assert not any(agent == "steady" for agent, _ in drifted)
    z_test = next(r for r in rows if r[:3] == ("bot", "failure_rate", "two_proportion_z"))
    assert z_test[4] < 0.01
    assert z_test[5] > 0.2
    assert z_test[6:8] == (300, 120)
    assert json.loads(z_test[8])["status"] == "drift"
    columns = [
        row[0]
        for row in store.query(
            "SELECT name FROM system.columns WHERE table = 'drift_events' "
            "AND database = currentDatabase() ORDER BY position"
        )
    ]
    assert columns == [
        "DetectedAt", "Agent", "Task", "Metric", "Test", "Drifted", "PValue", "EffectSize", "BaselineN",
        "RecentN", "BaselineValue", "RecentValue", "WindowStart", "WindowEnd", "Detail",
    ]  # fmt: skip


@pytest.mark.slow
def test_stats_and_drift_commands_read_through_the_running_sidecar(
    store: Any, start_sidecar: Any, chdb_dir: Path, database: str, tmp_path: Path
) -> None:
    """While serve holds the store, `agenttrail stats` and `agenttrail drift` answer through
    /api/v1/stats and /api/v1/drift (JSON lines), with the same figures as the local query.

    The sidecar requires a bearer token: without it the commands get its 401, which shows they
    asked it over HTTP (this process could read the same embedded store directly)."""
    migrate(store, ALL_MIGRATIONS)
    now = time.time()
    store_runs(store, drifting_runs(now, seed=3))
    start_sidecar(str(drift_config(tmp_path)), bearer_token="drift-t0ken")
    runner = CliRunner(env={"AGENTTRAIL_BEARER_TOKEN": "drift-t0ken"})
    base = ["--store", str(chdb_dir), "--database", database, "--format", "json"]
    since, until = datetime.fromtimestamp(now - 2 * HOUR, UTC), datetime.fromtimestamp(now + 1, UTC)
    period = ["--since", since.isoformat(), "--until", until.isoformat(), "--bucket", "15m", "--by", "model"]
    for command in (["stats", *base, *period], ["drift", *base, "--agent", "bot"]):
        refused = CliRunner(env={"AGENTTRAIL_BEARER_TOKEN": None}).invoke(cli, command)
        assert refused.exit_code != 0
        assert "answered 401" in refused.output, refused.output
        assert "give this command serve's token in AGENTTRAIL_BEARER_TOKEN" in refused.output
    wrong = CliRunner(env={"AGENTTRAIL_BEARER_TOKEN": "not-it"}).invoke(cli, ["stats", *base, *period])
    assert "answered 401" in wrong.output
    assert "is not serve's" in wrong.output
    stats = runner.invoke(cli, ["stats", *base, *period])
    assert stats.exit_code == 0, stats.output
    rows = [json.loads(line) for line in stats.output.splitlines()]
    local = query_stats(store, StatsQuery(since=since, until=until, bucket_s=900, by=("model",)))
    assert rows == json.loads(json.dumps(local))
    assert sum(row["runs"] for row in rows if row["agent"] == "bot") >= 120
    drift = runner.invoke(cli, ["drift", *base, "--recent", "1h", "--baseline", "24h", "--agent", "bot"])
    assert drift.exit_code == 0, drift.output
    results = [json.loads(line) for line in drift.output.splitlines()]
    assert any(r["metric"] == "failure_rate" and r["drifted"] for r in results)
    bad = runner.invoke(cli, ["stats", *base, "--bucket", "2d"])
    assert bad.exit_code != 0
    assert "out of range" in bad.output


def test_drift_config_section_is_checked(tmp_path: Path) -> None:
    """Unknown keys and bad values in `drift:` are refused naming the file; the shipped example loads."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("drift:\n  intervals: 5\n")
    with pytest.raises(ConfigError, match="unknown drift setting"):
        DriftConfig.from_file(str(bad))
    bad.write_text("drift:\n  alpha: 2\n")
    with pytest.raises(ConfigError, match="alpha"):
        DriftConfig.from_file(str(bad))
    bad.write_text("drift:\n  recent: soon\n")
    with pytest.raises(ConfigError, match="not a duration"):
        DriftConfig.from_file(str(bad))
    shipped = DriftConfig.from_file(str(Path(__file__).parents[3] / "deploy" / "agenttrail.yaml"))
    assert shipped.enabled
    assert shipped.settings.min_samples == 30
    assert shipped.query().recent_s == HOUR
