"""The report's plots: drift marked on the panel of its metric, one readable label per instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from matplotlib.axes import Axes

from agenttrail.evaluators.monitoring.plots import draw_agent, drift_instants, merge_identical
from agenttrail.evaluators.monitoring.report_data import AgentReport, RunBucket, ScoreBucket

START = datetime(2025, 1, 1, tzinfo=UTC)
FIRST, SECOND, LAST = (START + timedelta(minutes=m) for m in (70, 75, 115))


def event(at: datetime, metric: str, recent: float | None = None) -> dict[str, Any]:
    return {"detected_at": at.isoformat(), "metric": metric, "recent_value": recent}


def agent_report() -> AgentReport:
    """Two hours in 5-minute buckets; one check found five metrics drifting at once, later ones fewer."""
    buckets = [START + timedelta(minutes=5 * i) for i in range(24)]
    recall = [ScoreBucket(at, 20, 0.9 if i < 13 else 0.5, 0.1) for i, at in enumerate(buckets)]
    return AgentReport(
        "bot",
        summary={"runs": 480},
        runs=[RunBucket(at, 20, 2 if i < 13 else 8, 1.0, 2.0, 3.0) for i, at in enumerate(buckets)],
        scores={"trajectory_recall": recall},
        drift=[
            event(FIRST, "failure_rate", 0.4),
            event(FIRST, "latency", 3.0),
            event(FIRST, "trajectory_length", 5.0),
            event(FIRST, "tool_distribution"),
            event(FIRST, "trajectory_recall", 0.5),
            event(SECOND, "trajectory_recall", 0.48),
            event(LAST, "failure_rate", 0.41),
            event(LAST, "trajectory_length", 5.2),
        ],
    )


def test_drift_is_grouped_by_panel_and_instant() -> None:
    """failure_rate goes to the runs panel, latency to latency, other run metrics and scores to scores;
    with a gap, checks that many seconds apart make one episode."""
    assert drift_instants(agent_report(), 300) == {
        "runs": {FIRST: ["failure_rate"], LAST: ["failure_rate"]},
        "latency": {FIRST: ["latency"]},
        "scores": {
            FIRST: ["trajectory_length", "tool_distribution", "trajectory_recall"],
            LAST: ["trajectory_length"],
        },
    }
    assert drift_instants(agent_report()) == {
        "runs": {FIRST: ["failure_rate"], LAST: ["failure_rate"]},
        "latency": {FIRST: ["latency"]},
        "scores": {
            FIRST: ["trajectory_length", "tool_distribution", "trajectory_recall"],
            SECOND: ["trajectory_recall"],
            LAST: ["trajectory_length"],
        },
    }


def test_each_panel_labels_its_own_drift_once_per_instant_without_overlap() -> None:
    """Every drift label sits on its metric's panel, names all metrics of its episode (checks a
    bucket apart are one), no two labels overlap, and the legend sits beside the panel, off its lines."""
    figure = draw_agent(agent_report(), 300, START + timedelta(hours=2))
    panels: dict[str, Axes] = {ax.get_title().split(" (")[0]: ax for ax in figure.axes if ax.get_title()}
    labels = {title: sorted(text.get_text() for text in ax.texts) for title, ax in panels.items()}
    assert labels == {
        "Runs and failure rate": ["drift: failure_rate", "drift: failure_rate"],
        "Latency percentiles": ["drift: latency"],
        "Evaluation scores": [
            "drift: trajectory_length",
            "drift: trajectory_length, tool_distribution, trajectory_recall",
        ],
    }
    figure.draw_without_rendering()
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    for ax in panels.values():
        boxes = [text.get_window_extent(renderer) for text in ax.texts]
        legend = ax.get_legend()
        assert legend is not None
        panel = ax.get_window_extent(renderer)
        assert legend.get_window_extent(renderer).x0 > panel.x1  # beside the panel, over no line
        for i, box in enumerate(boxes):
            assert panel.x0 <= box.x0  # inside the panel
            assert box.x1 <= panel.x1
            assert not any(box.overlaps(other) for other in boxes[i + 1 :])


def test_identical_series_show_as_one_named_line_and_ticks_say_date_and_time() -> None:
    """Two score series with the same points are one line labelled with both names (drawn apart,
    one would hide the other); every x tick label names the day and the time."""
    report = agent_report()
    report.scores["trajectory_precision"] = list(report.scores["trajectory_recall"])
    figure = draw_agent(report, 300, START + timedelta(hours=2))
    scores = next(ax for ax in figure.axes if ax.get_title().startswith("Evaluation scores"))
    labels = [line.get_label() for line in scores.get_lines() if not line.get_label().startswith("_")]
    assert labels == ["trajectory_precision = trajectory_recall", "drift detected"]
    assert merge_identical({"a": [1, 2], "b": [1, 3], "c": [1, 2]}) == [("a = c", [1, 2]), ("b", [1, 3])]
    figure.draw_without_rendering()
    ticks = [label.get_text() for label in scores.get_xticklabels() if label.get_text()]
    assert ticks
    assert all(tick.startswith("Jan 01\n") and tick.count(":") >= 1 for tick in ticks), ticks
