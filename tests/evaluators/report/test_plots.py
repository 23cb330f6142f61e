"""The report's plots: drift marked on the panel of its metric, one readable label per instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from matplotlib.axes import Axes

from agenttrail.evaluators.monitoring.plots import draw_agent, drift_instants
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
    """failure_rate goes to the runs panel, latency to latency, other run metrics and scores to scores."""
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
    """Every drift label sits on its metric's panel, names all metrics of its instant, and no two
    labels (nor a label and the legend) overlap."""
    figure = draw_agent(agent_report(), 300, START + timedelta(hours=2))
    panels: dict[str, Axes] = {ax.get_title().split(" (")[0]: ax for ax in figure.axes if ax.get_title()}
    labels = {title: sorted(text.get_text() for text in ax.texts) for title, ax in panels.items()}
    assert labels == {
        "Runs and failure rate": ["drift: failure_rate", "drift: failure_rate"],
        "Latency percentiles": ["drift: latency"],
        "Evaluation scores": [
            "drift: trajectory_length",
            "drift: trajectory_length, tool_distribution, trajectory_recall",
            "drift: trajectory_recall",
        ],
    }
    figure.draw_without_rendering()
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    for ax in panels.values():
        boxes = [text.get_window_extent(renderer) for text in ax.texts]
        legend = ax.get_legend()
        assert legend is not None
        boxes.append(legend.get_window_extent(renderer))
        panel = ax.get_window_extent(renderer)
        for i, box in enumerate(boxes):
            assert panel.x0 <= box.x0  # inside the panel
            assert box.x1 <= panel.x1
            assert not any(box.overlaps(other) for other in boxes[i + 1 :])
