"""One PNG per agent: runs and failure rate, latency percentiles, evaluation scores, over UTC time.

Drawn on matplotlib `Figure` objects with the Agg canvas (no pyplot, no global state, no display),
so the sidecar's threads can render too. Alert periods are shaded on every panel; drift points are
marked on the panel of their metric (failure_rate -> runs, latency -> latency, the other run
metrics and the evaluation scores -> scores), one label per detection time.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import matplotlib.dates as mdates
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from agenttrail.evaluators.monitoring.drift import FAILURE_RATE, LATENCY
from agenttrail.evaluators.monitoring.report_data import AgentReport

ALERT_COLOUR = "#d62728"
DRIFT_COLOUR = "#9467bd"
DPI = 100
DRIFT_PANELS = {FAILURE_RATE: "runs", LATENCY: "latency"}  # every other metric: "scores"
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
MAX_LABEL_LEVELS = 8  # how far down a drift label may step to clear the others


def bucket_words(seconds: int) -> str:
    """300 -> "5 min", 3600 -> "1 h": the unit axis labels say "per"."""
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def _parse(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def _x(times: Sequence[datetime]) -> list[float]:
    """Datetimes as matplotlib date numbers (days), which is what the typed Axes API takes."""
    return [float(x) for x in mdates.date2num(list(times))]  # type: ignore[no-untyped-call]


def agent_figure(report: AgentReport, bucket_s: int, until: datetime) -> bytes:
    """The agent's three panels as PNG bytes."""
    buffer = io.BytesIO()
    draw_agent(report, bucket_s, until).savefig(buffer, format="png")
    return buffer.getvalue()


def draw_agent(report: AgentReport, bucket_s: int, until: datetime) -> Figure:
    """The agent's three panels: runs and failure rate, latency percentiles, evaluation scores."""
    figure = Figure(figsize=(11, 10.5), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    runs_ax, latency_ax, scores_ax = figure.subplots(3, 1, sharex=True)
    figure.suptitle(f"Agent {report.agent!r}: reliability and quality over time", fontsize=14, weight="bold")
    half = timedelta(seconds=bucket_s) / 2
    centres = _x([bucket.start + half for bucket in report.runs])
    width = 0.9 * bucket_s / 86400  # in days, matplotlib's date unit

    runs_ax.bar(centres, [b.runs for b in report.runs], width=width, color="#9ecae1", label="runs")
    runs_ax.bar(centres, [b.failures for b in report.runs], width=width, color="#ef8a62", label="failed")
    runs_ax.set_ylabel(f"runs per {bucket_words(bucket_s)}")
    runs_ax.set_ylim(0, 1.1 * max((b.runs for b in report.runs), default=1))
    runs_ax.set_title("Runs and failure rate")
    rate_ax = runs_ax.twinx()
    rate_ax.plot(
        centres,
        [100 * b.failure_rate for b in report.runs],
        color="#b2182b",
        marker=".",
        label="failure rate",
    )
    rate_ax.set_ylabel("failure rate (%)")
    rate_ax.set_ylim(0, 105)

    latency = {name: [getattr(b, name) for b in report.runs] for name in ("p50", "p95", "p99")}
    for (label, values), style, marker in zip(
        merge_identical(latency), ("-", "--", ":"), MARKERS, strict=False
    ):
        latency_ax.plot(centres, values, style, marker=marker, markersize=5, label=label)
    latency_ax.set_ylabel("run latency (s)")
    latency_ax.set_title("Latency percentiles")
    latency_ax.set_ylim(bottom=0)

    series = {
        metric: [(x, b.mean) for x, b in zip(_x([b.start + half for b in buckets]), buckets, strict=True)]
        for metric, buckets in sorted(report.scores.items())
    }
    for index, (label, points) in enumerate(merge_identical(series)):
        scores_ax.plot(
            [x for x, _ in points],
            [y for _, y in points],
            marker=MARKERS[index % len(MARKERS)],
            markersize=8 - (index % 4),  # a point hidden under another still shows its outline
            markerfacecolor="none" if index % 2 else None,
            label=label,
        )
    means = [b.mean for buckets in report.scores.values() for b in buckets]
    if means and min(means) >= 0.0 and max(means) <= 1.0:
        scores_ax.set_ylim(-0.03, 1.03)  # the whole 0-1 scale
    scores_ax.set_ylabel("mean score")
    scores_ax.set_title(f"Evaluation scores (mean per {bucket_words(bucket_s)})")
    if not report.scores:
        scores_ax.text(
            0.5, 0.5, "no evaluation scores in this range", ha="center", transform=scores_ax.transAxes
        )

    _shade_alerts((runs_ax, latency_ax, scores_ax), report, until)
    panels = {"runs": runs_ax, "latency": latency_ax, "scores": scores_ax}
    _mark_drift(panels, rate_ax, report, bucket_s)

    # Legends beside the panels, never over the lines (the runs panel's right axis is in between).
    handles, labels = runs_ax.get_legend_handles_labels()
    rate_handles, rate_labels = rate_ax.get_legend_handles_labels()
    runs_ax.legend(
        handles + rate_handles, labels + rate_labels, loc="upper left", bbox_to_anchor=(1.12, 1.0), fontsize=9
    )
    for ax in (latency_ax, scores_ax):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", bbox_to_anchor=(1.12, 1.0), fontsize=9)
    for ax in (runs_ax, latency_ax, scores_ax):
        ax.grid(True, alpha=0.3)
    span_s = (until - min((b.start for b in report.runs), default=until)).total_seconds()
    locator = mdates.AutoDateLocator(tz=UTC, maxticks=8)  # type: ignore[no-untyped-call]
    scores_ax.xaxis.set_major_locator(locator)
    # Every tick says its date and time (UTC); seconds where the range is short.
    ticks = "%b %d\n%H:%M:%S" if span_s < 3 * 3600 else "%b %d\n%H:%M"
    scores_ax.xaxis.set_major_formatter(mdates.DateFormatter(ticks, tz=UTC))  # type: ignore[no-untyped-call]
    scores_ax.set_xlabel("time (UTC)")
    _label_drift(figure, panels, report, bucket_s)
    return figure


def _shade_alerts(axes: tuple[Axes, ...], report: AgentReport, until: datetime) -> None:
    labelled: set[tuple[int, str]] = set()
    for period in report.alerts:
        for ax in axes:
            key = (id(ax), period.rule)
            label = None if key in labelled else f"alert firing: {period.rule}"
            labelled.add(key)
            start, end = _x([period.start, period.end or until])
            ax.axvspan(start, end, color=ALERT_COLOUR, alpha=0.12, label=label)


def merge_identical(series: dict[str, list[Any]]) -> list[tuple[str, list[Any]]]:
    """Series with the very same points drawn once, labelled with every name ("a = b"): drawn
    apart, the later line would hide the earlier one completely."""
    merged: list[tuple[list[str], list[Any]]] = []
    for name, points in series.items():
        same = next((names for names, other in merged if other == points), None)
        if same is None:
            merged.append(([name], points))
        else:
            same.append(name)
    return [(" = ".join(names), points) for names, points in merged]


def drift_instants(report: AgentReport, gap_s: float = 0.0) -> dict[str, dict[datetime, list[str]]]:
    """Panel ("runs", "latency", "scores") -> start of a drift episode -> the metrics in it.

    The monitor records drift at every check while it lasts; checks no more than `gap_s` apart
    make one episode (one line, one label), named after its first detection."""
    panels: dict[str, dict[datetime, list[str]]] = {}
    last: dict[str, tuple[datetime, datetime]] = {}  # panel -> (episode start, latest detection)
    for event in sorted(report.drift, key=lambda e: str(e["detected_at"])):
        metric, when = event["metric"], _parse(event["detected_at"])
        panel = DRIFT_PANELS.get(metric, "scores")
        instants = panels.setdefault(panel, {})
        start, latest = last.get(panel, (when, when))
        if panel not in last or (when - latest).total_seconds() > gap_s:
            start = when
        last[panel] = (start, when)
        names = instants.setdefault(start, [])
        if metric not in names:
            names.append(metric)
    return panels


def _mark_drift(axes: dict[str, Axes], rate_ax: Axes, report: AgentReport, bucket_s: int) -> None:
    """A dashed line per drift episode on its metric's panel; a marker at the recent value of its
    latest detection where the panel plots that value (the failure rate, an evaluation score)."""
    for panel, instants in drift_instants(report, bucket_s).items():
        for i, when in enumerate(sorted(instants)):
            label = None if i else "drift detected"
            axes[panel].axvline(*_x([when]), color=DRIFT_COLOUR, linestyle="--", linewidth=1.2, label=label)
    latest = {
        (e["metric"], e.get("task")): e for e in sorted(report.drift, key=lambda e: str(e["detected_at"]))
    }
    for event in latest.values():
        recent, metric = event["recent_value"], event["metric"]
        if recent is None:
            continue
        [x] = _x([_parse(event["detected_at"])])
        if metric == FAILURE_RATE:
            rate_ax.plot([x], [100 * recent], "v", color=DRIFT_COLOUR, markersize=10)
        elif metric in report.scores:
            axes["scores"].plot([x], [recent], "v", color=DRIFT_COLOUR, markersize=10)


def _label_drift(figure: Figure, axes: dict[str, Axes], report: AgentReport, bucket_s: int) -> None:
    """One label per drift line naming every metric that drifted then, placed once the layout is
    final: beside the line (left of it near the right edge), a line lower where it would overlap
    another label or the legend."""
    figure.draw_without_rendering()  # constrained layout: the final place of each panel
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    for panel, instants in drift_instants(report, bucket_s).items():
        ax = axes[panel]
        legend = ax.get_legend()
        taken = [legend.get_window_extent(renderer)] if legend is not None else []
        for when, metrics in sorted(instants.items()):
            text = ax.annotate(
                f"drift: {', '.join(metrics)}",
                (_x([when])[0], 1.0),
                xycoords=("data", "axes fraction"),
                xytext=(3, -12),
                textcoords="offset points",
                color=DRIFT_COLOUR,
                fontsize=8,
                bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "alpha": 0.7, "edgecolor": "none"},
            )
            for level in range(MAX_LABEL_LEVELS):
                text.set_position((3, -12 - 11 * level))
                text.set_horizontalalignment("left")
                box = text.get_window_extent(renderer)
                if box.x1 > ax.get_window_extent(renderer).x1:
                    text.set_position((-3, -12 - 11 * level))
                    text.set_horizontalalignment("right")
                    box = text.get_window_extent(renderer)
                if not any(box.overlaps(other) for other in taken):
                    break
            taken.append(box)
