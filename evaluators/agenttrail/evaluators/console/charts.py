"""Time-series charts drawn as inline SVG on the server: no chart library, nothing to load.

Colours are the Okabe-Ito palette (safe for the common colour-vision deficiencies); markers
carry text labels, and alert intervals are hatched as well as tinted, so nothing depends on
telling two hues apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape

from markupsafe import Markup

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00")


@dataclass(frozen=True, slots=True)
class Series:
    label: str
    points: Sequence[tuple[float, float | None]]  # (epoch seconds, value); None leaves a gap
    dashed: bool = False


@dataclass(frozen=True, slots=True)
class Marker:
    at: float
    label: str
    kind: str = "release"  # release | drift


@dataclass(frozen=True, slots=True)
class Band:
    start: float
    end: float
    label: str


@dataclass
class Chart:
    title: str
    series: list[Series]
    markers: list[Marker] = field(default_factory=list)
    bands: list[Band] = field(default_factory=list)
    y_format: Callable[[float], str] = lambda v: f"{v:.3g}"
    y_min: float | None = 0.0
    y_max: float | None = None


def _ticks(low: float, high: float, count: int = 4) -> list[float]:
    if high <= low:
        return [low]
    step = 10 ** math.floor(math.log10((high - low) / count))
    for factor in (1, 2, 5, 10):
        if (high - low) / (step * factor) <= count:
            step *= factor
            break
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step) + 1)]


def _time_label(seconds: float, span_s: float) -> str:
    moment = datetime.fromtimestamp(seconds, tz=UTC)
    if span_s < 120:
        return moment.strftime("%H:%M:%S")
    if span_s < 2 * 86400:
        return moment.strftime("%H:%M")
    return moment.strftime("%m-%d %H:%M")


def render(chart: Chart, start: float, end: float, width: int = 560, height: int = 200) -> Markup:
    """The chart as an accessible <svg> (title, labelled axes, a legend in text)."""
    left, right, top, bottom = 52, 12, 24, 28
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [v for s in chart.series for _, v in s.points if v is not None]
    low = chart.y_min if chart.y_min is not None else min(values, default=0.0)
    high = chart.y_max if chart.y_max is not None else max(values, default=1.0)
    if high <= low:
        high = low + 1.0
    span = max(end - start, 1e-6)

    def x(t: float) -> float:
        return left + plot_w * (t - start) / span

    def y(v: float) -> float:
        return top + plot_h * (1 - (v - low) / (high - low))

    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(chart.title)}">',
        f"<title>{escape(chart.title)}</title>",
        '<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" class="hatch"/></pattern></defs>',
    ]
    for band in chart.bands:
        x0, x1 = max(x(band.start), left), min(x(band.end), left + plot_w)
        if x1 > x0:
            parts.append(
                f'<rect class="band" x="{x0:.1f}" y="{top}" width="{x1 - x0:.1f}" height="{plot_h}">'
                f"<title>{escape(band.label)}</title></rect>"
                f'<rect x="{x0:.1f}" y="{top}" width="{x1 - x0:.1f}" height="{plot_h}" fill="url(#hatch)"/>'
            )
    parts.extend(
        f'<line class="grid" x1="{left}" x2="{left + plot_w}" y1="{y(tick):.1f}" y2="{y(tick):.1f}"/>'
        f'<text class="axis" x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">'
        f"{escape(chart.y_format(tick))}</text>"
        for tick in _ticks(low, high)
    )
    for i in range(5):
        t = start + span * i / 4
        anchor = "start" if i == 0 else "end" if i == 4 else "middle"
        parts.append(
            f'<text class="axis" x="{x(t):.1f}" y="{height - 8}" text-anchor="{anchor}">'
            f"{_time_label(t, span)}</text>"
        )
    for marker in chart.markers:
        mx = x(marker.at)
        if left <= mx <= left + plot_w:
            parts.append(
                f'<line class="marker {marker.kind}" x1="{mx:.1f}" x2="{mx:.1f}" y1="{top}" '
                f'y2="{top + plot_h}"/><text class="marker-label" x="{mx + 3:.1f}" y="{top - 6}">'
                f"{escape(marker.label)}</text>"
            )
    for index, series in enumerate(chart.series):
        colour = PALETTE[index % len(PALETTE)]
        segments: list[list[str]] = [[]]
        for t, v in series.points:
            if v is None:
                segments.append([])
            else:
                segments[-1].append(f"{x(t):.1f},{y(v):.1f}")
        dash = ' stroke-dasharray="5 3"' if series.dashed else ""
        for segment in segments:
            if len(segment) > 1:
                points = " ".join(segment)
                parts.append(
                    f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="{points}"/>'
                )
            for point in segment:
                px, py = point.split(",")
                parts.append(f'<circle cx="{px}" cy="{py}" r="2.2" fill="{colour}"/>')
    parts.append(
        f'<rect class="frame" x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none"/></svg>'
    )
    legend = "".join(
        f'<span class="key"><span class="swatch{" dashed" if s.dashed else ""}" '
        f'style="border-color:{PALETTE[i % len(PALETTE)]}"></span>{escape(s.label)}</span>'
        for i, s in enumerate(chart.series)
    )
    if chart.bands:
        legend += '<span class="key"><span class="swatch band-key"></span>alert firing</span>'
    return Markup(
        f'<figure class="chart-box"><figcaption>{escape(chart.title)}</figcaption>{"".join(parts)}'
        f'<div class="legend">{legend}</div></figure>'
    )
