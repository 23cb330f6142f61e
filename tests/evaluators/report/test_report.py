"""`agenttrail report` on seeded stored data: the rows it reads, the HTML page, its PNGs, its sources."""

from __future__ import annotations

import base64
import re
import struct
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from agenttrail.collector.schema import migrate
from agenttrail.evaluators.cli.main import cli
from agenttrail.evaluators.monitoring.report_data import Report, ReportQuery, report_rows
from agenttrail.evaluators.monitoring.stats import parse_bucket
from agenttrail.evaluators.scoring.schema import EVALUATOR_MIGRATIONS

from .seed import HOURS, seed_runs

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run_report(*args: str) -> Result:

    return CliRunner().invoke(cli, ["report", *args], catch_exceptions=False)


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk, after checking the signature and chunk type."""
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def embedded_pngs(page: str) -> list[bytes]:
    return [base64.b64decode(b64) for b64 in re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", page)]


def test_rows_reflect_the_seeded_runs_scores_drift_and_alerts(store: Any, seeded: dict[str, Any]) -> None:
    """Bucketed counts add up to the stored runs; bot's scores fall after the midpoint; drift and
    alert rows come from their tables; the worst runs are the right ones."""
    now = datetime.fromtimestamp(seeded["now"], UTC)
    query = ReportQuery(since=now - timedelta(hours=HOURS + 1), until=now)
    report = Report.from_rows(report_rows(store, query))
    bot_runs = [run for run in seeded["runs"] if run.agent == "bot"]
    assert report.bucket_s == 900  # 7 hours in at most 60 buckets
    assert (
        sum(b.runs for b in report.agents["bot"].runs)
        == len(bot_runs)
        == report.agents["bot"].summary["runs"]
    )
    assert sum(b.failures for b in report.agents["bot"].runs) == sum(run.failure for run in bot_runs) > 0
    assert report.agents["helper"].summary["failures"] == 0

    midpoint = datetime.fromtimestamp(seeded["midpoint"], UTC)
    recall = report.agents["bot"].scores["trajectory_recall"]
    before = [b.mean for b in recall if b.start + timedelta(seconds=900) <= midpoint]
    after = [b.mean for b in recall if b.start >= midpoint]
    assert min(before) > 0.75
    assert max(after) < 0.55
    assert set(report.agents["bot"].scores) == {"trajectory_recall"}  # latency/failure are run metrics

    [drift] = report.agents["bot"].drift
    assert drift["metric"] == "trajectory_recall"
    assert drift["recent_value"] == 0.4
    assert not report.agents["helper"].drift  # Drifted = 0 is not a drift point
    [alert] = report.agents["bot"].alerts
    assert alert.rule == "failure_rate_spike"
    assert alert.start.timestamp() == pytest.approx(seeded["fired"], abs=0.01)
    assert alert.end is not None
    assert alert.end.timestamp() == pytest.approx(seeded["resolved"], abs=0.01)
    assert not report.agents["helper"].alerts

    worst = report.agents["bot"].worst
    assert len(worst["failed"]) == 5
    assert all(run["failure"] for run in worst["failed"])
    slowest = [run["latency_s"] for run in worst["slowest"]]
    assert slowest == sorted(slowest, reverse=True)
    assert slowest[0] == max(run.latency_s for run in bot_runs)
    assert all(run["start"] > midpoint.isoformat()[:19] for run in worst["lowest_scored"])
    assert "failed" not in report.agents["helper"].worst


def test_html_report_embeds_readable_pngs_and_every_section(
    seeded: dict[str, Any], chdb_dir: Path, database: str, tmp_path: Path
) -> None:
    """The page has an overview, a section per agent with a valid PNG, drift, alerts and worst runs."""
    out = tmp_path / "report.html"
    result = run_report("--store", str(chdb_dir), "--database", database, "--since", "7h", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.output
    page = out.read_text()
    images = embedded_pngs(page)
    assert len(images) == 2
    for image in images:
        width, height = png_size(image)
        assert width >= 800
        assert height >= 600
        assert len(image) > 20_000  # three panels of lines and bars, not an empty canvas
    for heading in ("Overview", "Agent bot", "Agent helper", "Drift detected", "Alert periods", "Worst runs"):
        assert heading in page
    for section in ("Latest failed runs", "Slowest runs", "Lowest-scored runs"):
        assert page.count(section) == 2
    assert "failure_rate_spike" in page
    assert "mann_whitney" in page
    assert "ToolError" in page  # a failed run's trajectory shows the failing tool call
    assert page.count("No drift detected in this range.") == 1  # helper only


def test_png_format_writes_one_image_per_agent(
    seeded: dict[str, Any], chdb_dir: Path, database: str, tmp_path: Path
) -> None:
    """--format png writes PNG files only, one per agent (one with --agent)."""
    out = tmp_path / "pngs"
    common = ["--store", str(chdb_dir), "--database", database, "--since", "7h", "--format", "png"]
    assert run_report(*common, "--out", str(out)).exit_code == 0
    assert sorted(path.name for path in out.iterdir()) == ["agenttrail-bot.png", "agenttrail-helper.png"]
    assert png_size((out / "agenttrail-bot.png").read_bytes())[0] >= 800
    only = tmp_path / "only"
    assert run_report(*common, "--agent", "helper", "--bucket", "1h", "--out", str(only)).exit_code == 0
    assert [path.name for path in only.iterdir()] == ["agenttrail-helper.png"]


@pytest.mark.timeout(600)  # a sidecar start, a seeded store and a report on a loaded 2-core machine
def test_report_reads_through_a_running_sidecar(start_sidecar: Any, tmp_path: Path) -> None:
    """While serve holds the store, the report is read over its /api/v1/report route."""
    sidecar = start_sidecar()
    seed_runs(sidecar.store)
    address = f"http://{sidecar.http.address}"
    params = urllib.parse.urlencode({"since": "7h", "agent": "bot"})
    with urllib.request.urlopen(f"{address}/api/v1/report?{params}", timeout=120) as response:
        body = response.read().decode()
    assert '"kind": "summary"' in body
    assert '"agent": "helper"' not in body
    assert "alert_history" not in body  # the sidecar has the alerts tables: nothing to note

    out = tmp_path / "r.html"
    result = run_report("--server", address, "--since", "7h", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert len(embedded_pngs(out.read_text())) == 2
    assert "alert periods are not shaded" not in out.read_text()


def test_report_on_a_store_serve_never_opened_creates_the_monitoring_tables(
    store: Any, chdb_dir: Path, database: str, tmp_path: Path
) -> None:
    """`agenttrail report` on a store without the drift and alert tables creates them and reports."""
    migrate(store, EVALUATOR_MIGRATIONS)
    seed_runs(store)
    out = tmp_path / "r.html"
    result = run_report("--store", str(chdb_dir), "--database", database, "--since", "7h", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert {"drift_events", "alert_history"} <= {row[0] for row in store.query("SHOW TABLES")}
    assert len(embedded_pngs(out.read_text())) == 2
    assert "No drift detected in this range." in out.read_text()


def test_bad_options_are_usage_errors(tmp_path: Path) -> None:
    """A bucket outside 1s-1d or an empty range is refused before any data is read."""
    store = ["--store", str(tmp_path / "none")]
    result = CliRunner().invoke(cli, ["report", *store, "--bucket", "2d"])
    assert result.exit_code == 2
    assert "between 1s and 1d" in result.output
    result = CliRunner().invoke(cli, ["report", *store, "--since", "1h", "--until", "2h"])
    assert result.exit_code == 2
    assert "range is empty" in result.output
    assert parse_bucket("15m") == 900
