"""`agenttrail drift` as a table: a one-line summary first, then every test (the ones that found
no drift marked ok), p-values never printed as 0, effect sizes with their names."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from agenttrail.collector.schema import migrate
from agenttrail.evaluators.cli.main import cli
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.monitoring.display import format_effect, format_p, format_value

from .synthetic import store_runs
from .test_drift_store import drifting_runs


def test_drift_table_lists_every_test_after_a_summary(store: Any, chdb_dir: Path, database: str) -> None:
    """The table has as many rows as the JSON has tests, drift first; the summary counts them."""
    migrate(store, ALL_MIGRATIONS)
    store_runs(store, drifting_runs(time.time(), seed=5))
    where = ["--store", str(chdb_dir), "--database", database, "--recent", "1h", "--baseline", "24h"]
    as_json = CliRunner().invoke(cli, ["drift", *where, "--format", "json"])
    assert as_json.exit_code == 0, as_json.output
    results = [json.loads(line) for line in as_json.output.splitlines()]
    drifted = [r for r in results if r["status"] == "drift"]
    stable = [r for r in results if r["status"] == "no_drift"]
    assert drifted
    assert stable
    table = CliRunner().invoke(cli, ["drift", *where])
    assert table.exit_code == 0, table.output
    summary, header, _rule, *rows = table.output.splitlines()
    assert summary.startswith(f"DRIFT in {len(drifted)} of {len(results)} tests (bot) over 2 agent(s)")
    assert f"{len(stable)} ok" in summary
    assert header.split()[:3] == ["agent", "metric", "test"]
    assert len(rows) == len(results)
    marks = [row.split()[0] for row in rows]
    assert marks == ["DRIFT"] * len(drifted) + ["ok"] * len(stable) + ["too"] * (
        len(results) - len(drifted) - len(stable)
    )
    assert any(row.split()[1] == "steady" for row in rows)  # the agent with no drift is listed too
    assert "0.0000" not in table.output
    assert "< 1e-4" in table.output
    assert "Cliff's delta" in table.output


def test_change_detectors_show_their_alarm_not_a_p_value(store: Any, chdb_dir: Path, database: str) -> None:
    """Page-Hinkley and the Bernoulli CUSUM have no p-value: their rows say where the detector
    alarmed and past which threshold (or that it did not), never an empty "p - p adj -"; the
    two-sample tests keep their p and adjusted p."""
    migrate(store, ALL_MIGRATIONS)
    store_runs(store, drifting_runs(time.time(), seed=5))
    where = ["--store", str(chdb_dir), "--database", database, "--recent", "1h", "--baseline", "24h"]
    table = CliRunner().invoke(cli, ["drift", *where, "--agent", "bot"])
    assert table.exit_code == 0, table.output
    rows = table.output.splitlines()[3:]
    detectors = [row for row in rows if row.split()[3] in ("page_hinkley", "bernoulli_cusum")]
    assert any(re.search(r"alarm at run \d+ of \d+, (up|down); threshold 12 sd ", row) for row in detectors)
    assert all(re.search(r"(alarm at run|no alarm).*threshold [\d.]+ (sd|log LR) ", row) for row in detectors)
    assert any(re.search(r"mann_whitney_u\s+p (< 1e-4|[\d.e-]+), adj ", row) for row in rows)


def test_display_formats() -> None:
    """p-values below 1e-4 say so; effects carry their name; latency has a unit, rates percent."""
    assert [format_p(p) for p in (None, 0.0, 3e-7, 0.00012, 0.0312, 0.5)] == [
        "-",
        "< 1e-4",
        "< 1e-4",
        "0.00012",
        "0.031",
        "0.5",
    ]
    assert format_effect("cliffs_delta", -0.4213) == "Cliff's delta -0.42"
    assert format_effect("cramers_v", None) == "Cramér's V"
    assert format_value("latency", 0.0123) == "12.3 ms"
    assert format_value("failure_rate", 0.283) == "28.3%"
    assert format_value("trajectory_precision", 0.81234) == "0.812"


def test_drift_reads_its_section_env_over_the_file(
    store: Any, chdb_dir: Path, database: str, tmp_path: Path
) -> None:
    """`agenttrail drift` takes the `drift:` section as serve does: AGENTTRAIL_DRIFT_MIN_SAMPLES
    beats the file's min_samples (every test then lacks data), and a bad value is exit 3 naming
    the variable."""
    migrate(store, ALL_MIGRATIONS)
    store_runs(store, drifting_runs(time.time(), seed=5))
    config = tmp_path / "agenttrail.yaml"
    config.write_text("drift:\n  min_samples: 10\n")
    where = ["--store", str(chdb_dir), "--database", database, "--config", str(config), "--format", "json"]
    command = ["drift", *where, "--recent", "1h", "--baseline", "24h", "--agent", "bot"]

    def statuses(env: dict[str, str]) -> set[str]:
        result = CliRunner().invoke(cli, command, env=env)
        assert result.exit_code == 0, result.output
        return {json.loads(line)["status"] for line in result.output.splitlines()}

    assert "drift" in statuses({}), "the file's min_samples lets the tests decide"
    assert statuses({"AGENTTRAIL_DRIFT_MIN_SAMPLES": "1000"}) == {"insufficient_data"}
    bad = CliRunner().invoke(cli, command, env={"AGENTTRAIL_DRIFT_MIN_SAMPLES": "many"})
    assert bad.exit_code == 3, bad.output
    assert "AGENTTRAIL_DRIFT_MIN_SAMPLES" in bad.output


def test_an_empty_comparison_says_what_emptied_it(store: Any, chdb_dir: Path, database: str) -> None:
    """A metric no run has, or a baseline version no run carries, is not "no runs in either
    window" with every test "too few" and nothing more: the summary names the options asked and
    says when the baseline had no run at all."""
    migrate(store, ALL_MIGRATIONS)
    store_runs(store, drifting_runs(time.time(), seed=5))
    where = ["--store", str(chdb_dir), "--database", database, "--recent", "1h"]
    unknown = CliRunner().invoke(cli, ["drift", *where, "--metric", "no_such_metric"])
    assert unknown.exit_code == 0, unknown.output
    assert unknown.output.strip() == "no runs in either window match --metric no_such_metric"
    version = CliRunner().invoke(cli, ["drift", *where, "--baseline-version", "9.9"])
    assert version.exit_code == 0, version.output
    summary = version.output.splitlines()[0]
    assert summary.endswith("with too few samples; the baseline (version 9.9) has no runs"), summary
