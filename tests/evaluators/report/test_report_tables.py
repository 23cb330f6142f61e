"""The report's tables: a drift that lasts many checks is one row (first and last detection, how
many checks), p-values below 1e-4 say so, effect sizes are named, latencies carry units."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from agenttrail.evaluators.monitoring.report import drift_episodes, render_html
from agenttrail.evaluators.monitoring.report_data import AgentReport, Report, RunBucket

START = datetime(2025, 1, 1, tzinfo=UTC)


def event(minute: int, test: str, p_value: float | None, recent: float) -> dict[str, Any]:
    return {
        "detected_at": (START + timedelta(minutes=minute)).isoformat().replace("+00:00", "Z"),
        "agent": "bot",
        "task": "",
        "metric": "failure_rate" if test != "mann_whitney_u" else "latency",
        "test": test,
        "p_value": p_value,
        "effect_size": 0.61,
        "baseline_n": 200,
        "recent_n": 60,
        "baseline_value": 0.05 if test != "mann_whitney_u" else 0.012,
        "recent_value": recent,
        "detail": "",
    }


def test_repeated_drift_is_one_row_with_readable_figures() -> None:
    """16 checks of the same drift make one row; the latest check's figures are shown."""
    events = [event(m, "two_proportion_z", 1e-9, 0.3 + m / 1000) for m in range(16)]
    events.append(event(3, "mann_whitney_u", 0.0021, 0.0345))
    [rate, latency] = drift_episodes(events)
    assert (rate["checks"], rate["first"], rate["last"]) == (
        16,
        events[0]["detected_at"],
        events[15]["detected_at"],
    )
    assert rate["recent_value"] == 0.315
    assert latency["checks"] == 1
    agent = AgentReport(
        "bot",
        summary={
            "runs": 10,
            "failures": 1,
            "p50": 0.0042,
            "p95": 0.012,
            "p99": 1.5,
            "tool_errors": 0,
            "tool_calls": 3,
            "input_tokens": 0,
            "output_tokens": 0,
        },
        runs=[RunBucket(START, 10, 1, 0.0042, 0.012, 1.5)],
        drift=events,
    )
    page = render_html(
        Report(since=START, until=START + timedelta(hours=1), bucket_s=300, agents={"bot": agent}),
        {"bot": b""},
    )
    drift_table = page[page.index("Drift detected") : page.index("Alert periods")]
    assert drift_table.count("<tr>") == 1 + 2  # the header and one row per drift
    assert "&lt; 1e-4" in drift_table
    assert "0.0000" not in page
    assert "Cohen&#x27;s h +0.61" in drift_table
    assert "Cliff&#x27;s delta +0.61" in drift_table
    assert "5.0%" in drift_table
    assert "31.5%" in drift_table
    assert "12 ms" in drift_table
    assert "34.5 ms" in drift_table
    assert "4.2 ms" in page
    assert "1.5 s" in page


def test_a_change_detectors_drift_says_where_it_alarmed() -> None:
    """A Page-Hinkley drift (no p-value) reads as its alarm and threshold from the stored event,
    as `agenttrail drift` prints it; a two-sample test's row has its p and the stored adjusted p."""
    from agenttrail.evaluators.monitoring.drift import DriftResult
    from agenttrail.evaluators.monitoring.drift_events import event_detail

    def stored(test: str, p_value: float | None, p_adjusted: float | None, note: str) -> dict[str, Any]:
        result = DriftResult(
            "bot", "", "latency", test, "drift", p_value, p_adjusted, 0.9, "mean_shift_sd", 200, 60,
            0.012, 0.0345, START, START, "24h", note,
        )  # fmt: skip
        return {**event(5, "mann_whitney_u", p_value, 0.0345), "test": test, "detail": event_detail(result)}

    alarm = '{"change_at_run": 37, "direction": "up", "threshold": 12.0}'
    events = [stored("page_hinkley", None, None, alarm), stored("mann_whitney_u", 0.0021, 0.0042, "")]
    summary = {"runs": 0, "failures": 0, "p50": None, "p95": None, "p99": None, "tool_errors": 0}
    summary |= {"tool_calls": 0, "input_tokens": 0, "output_tokens": 0}
    agent = AgentReport("bot", summary=summary, runs=[], drift=events)
    page = render_html(
        Report(since=START, until=START + timedelta(hours=1), bucket_s=300, agents={"bot": agent}),
        {"bot": b""},
    )
    drift_table = page[page.index("Drift detected") : page.index("Alert periods")]
    assert "alarm at run 38 of 60, up; threshold 12 sd" in drift_table
    assert "p 0.0021, adj 0.0042" in drift_table
