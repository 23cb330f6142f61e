"""`agenttrail report`: one self-contained HTML page (PNG plots embedded as base64) or PNGs alone.

Per agent: a summary, the plots of `plots.agent_figure`, the drift points and alert periods in
the range, and the worst runs (latest failures, slowest, lowest mean score) with their tool calls.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agenttrail.collector.durations import format_duration
from agenttrail.evaluators.monitoring.display import (
    TEST_EFFECTS,
    format_effect,
    format_evidence,
    format_value,
)
from agenttrail.evaluators.monitoring.report_data import AgentReport, Report, ReportQuery, report_rows

if TYPE_CHECKING:
    from agenttrail.collector.sidecar import Sidecar

REPORT_ROUTE = "/api/v1/report"
WORST_SECTIONS = (
    ("failed", "Latest failed runs"),
    ("slowest", "Slowest runs"),
    ("lowest_scored", "Lowest-scored runs (mean of their evaluation scores)"),
)
_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; border: 1px solid #ddd; }
ol.calls { margin: 0; padding-left: 1.4em; }
li.error { color: #b2182b; }
code { font-size: 0.85em; }
.note { color: #666; }
"""


def install_report_route(sidecar: Sidecar) -> None:
    """`GET /api/v1/report`: the report's rows, for `agenttrail report` while serve holds the store."""
    store = sidecar.lazy_store()

    def route(params: dict[str, str]) -> list[dict[str, Any]]:
        return report_rows(store(), ReportQuery.from_params(params))

    sidecar.add_read_route(REPORT_ROUTE, route)


def write_report(report: Report, output_format: str, out: Path) -> list[Path]:
    """Write the HTML page (`out` is a file) or one PNG per agent (`out` is a directory)."""
    from agenttrail.evaluators.monitoring.plots import agent_figure  # matplotlib: only when drawing

    images = {
        name: agent_figure(agent, report.bucket_s, report.until) for name, agent in report.agents.items()
    }
    if output_format == "png":
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name, png in images.items():
            path = out / f"agenttrail-{_slug(name)}.png"
            path.write_bytes(png)
            written.append(path)
        return written
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(report, images), encoding="utf-8")
    return [out]


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "agent"


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _utc(value: datetime | str | None) -> str:
    if value is None:
        return "still firing"
    when = datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) else value
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[int] = ()) -> str:
    """Cells are HTML already (escaped by the caller)."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(report: Report, images: dict[str, bytes]) -> str:
    from agenttrail.evaluators.monitoring.plots import bucket_words

    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>agenttrail report {_utc(report.since)} to {_utc(report.until)} UTC</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>agenttrail report</h1>",
        f"<p>Runs started from <b>{_utc(report.since)}</b> to <b>{_utc(report.until)}</b> UTC, "
        f"in buckets of {bucket_words(report.bucket_s)}. Generated {_utc(datetime.now(UTC))} UTC.</p>",
    ]
    if not report.agents:
        parts.append("<p><b>No agent runs in this range.</b></p>")
    else:
        parts.append("<h2 id='overview'>Overview</h2>")
        parts.append(_overview(report))
    for name, agent in report.agents.items():
        parts.append(_agent_section(agent, images[name]))
    parts.append("</body></html>")
    return "\n".join(parts)


def _overview(report: Report) -> str:
    rows = []
    for name, agent in report.agents.items():
        s = agent.summary
        failure_rate = s["failures"] / s["runs"] if s["runs"] else 0.0
        tool_error_rate = s["tool_errors"] / s["tool_calls"] if s["tool_calls"] else 0.0
        rows.append(
            [
                f"<a href='#agent-{_slug(name)}'>{_e(name)}</a>",
                _e(s["runs"]),
                f"{100 * failure_rate:.1f}%",
                _e(format_duration(s["p50"])),
                _e(format_duration(s["p95"])),
                _e(format_duration(s["p99"])),
                f"{100 * tool_error_rate:.1f}%",
                _e(s["input_tokens"] + s["output_tokens"]),
                _e(len(agent.drift)),
                _e(len(agent.alerts)),
            ]
        )
    return _table(
        [
            "agent",
            "runs",
            "failure rate",
            "p50 latency",
            "p95 latency",
            "p99 latency",
            "tool error rate",
            "tokens",
            "drift points",
            "alert periods",
        ],
        rows,
        numeric=range(1, 10),
    )


def _agent_section(agent: AgentReport, png: bytes) -> str:
    encoded = base64.b64encode(png).decode("ascii")
    parts = [
        f"<section id='agent-{_slug(agent.agent)}'><h2>Agent {_e(agent.agent)}</h2>",
        f"<img alt='runs, failure rate, latency and scores of {_e(agent.agent)} over time' "
        f"src='data:image/png;base64,{encoded}'>",
        "<h3>Drift detected</h3>",
    ]
    if agent.drift:
        parts.append(_drift_table(agent.drift))
    else:
        parts.append("<p class='note'>No drift detected in this range.</p>")
    parts.append("<h3>Alert periods</h3>")
    if agent.alerts:
        parts.append(
            _table(
                ["rule", "firing from (UTC)", "until (UTC)"],
                [[_e(a.rule), _utc(a.start), _utc(a.end)] for a in agent.alerts],
            )
        )
    else:
        parts.append("<p class='note'>No alert fired in this range.</p>")
    parts.append("<h3>Worst runs</h3>")
    for why, title in WORST_SECTIONS:
        runs = agent.worst.get(why, [])
        parts.append(f"<h4>{_e(title)}</h4>")
        parts.append(_runs_table(runs) if runs else "<p class='note'>None in this range.</p>")
    parts.append("</section>")
    return "\n".join(parts)


def drift_episodes(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per metric, task and test: the monitor records a drift at every check while it
    lasts, and the same row repeated says nothing. First and last detection, how many checks
    found it, and the latest check's figures."""
    grouped: dict[tuple[str, str, str], dict[str, Any]] = {}
    for event in sorted(events, key=lambda e: str(e["detected_at"])):
        key = (event["metric"], event["task"], event["test"])
        row = grouped.setdefault(key, {"first": event["detected_at"], "checks": 0})
        row.update(event, checks=row["checks"] + 1, last=event["detected_at"])
    return list(grouped.values())


def _drift_table(events: Sequence[dict[str, Any]]) -> str:
    return _table(
        [
            "metric",
            "task",
            "test",
            "first detected (UTC)",
            "last detected (UTC)",
            "checks",
            "p (adjusted) / alarm",
            "effect size",
            "baseline",
            "recent",
            "n baseline / recent",
        ],
        [
            [
                _e(d["metric"]),
                _e(d["task"] or "all"),
                _e(d["test"]),
                _utc(d["first"]),
                _utc(d["last"]),
                _e(d["checks"]),
                _e(format_evidence(d)),
                _e(format_effect(d.get("effect") or TEST_EFFECTS.get(d["test"], "effect"), d["effect_size"])),
                _e(format_value(d["metric"], d["baseline_value"])),
                _e(format_value(d["metric"], d["recent_value"])),
                f"{d['baseline_n']} / {d['recent_n']}",
            ]
            for d in drift_episodes(events)
        ],
        numeric=(5, 6, 8, 9),
    )


def _runs_table(runs: Sequence[dict[str, Any]]) -> str:
    return _table(
        [
            "start (UTC)",
            "trace",
            "task",
            "latency",
            "status",
            "mean score",
            "trajectory (tool calls in order)",
        ],
        [
            [
                _utc(run["start"]),
                f"<code>{_e(run['trace_id'])}</code>",
                _e(run["task"]),
                _e(format_duration(run["latency_s"])),
                _e(run["error_type"] or "error") if run["failure"] else "ok",
                _num(run["mean_score"]),
                _trajectory(run["tool_calls"]),
            ]
            for run in runs
        ],
        numeric=(3, 5),
    )


def _trajectory(calls: Sequence[dict[str, Any]], width: int = 120) -> str:
    if not calls:
        return "<span class='note'>no tool calls</span>"
    items = []
    for call in calls:
        arguments = json.dumps(call.get("input"), ensure_ascii=False) if call.get("input") is not None else ""
        if len(arguments) > width:
            arguments = arguments[: width - 1] + "…"
        failed = call.get("status") == "error"
        outcome = f" ✗ {_e(call.get('error_type') or 'error')}" if failed else ""
        css = " class='error'" if failed else ""
        items.append(f"<li{css}>{_e(call.get('name'))} <code>{_e(arguments)}</code>{outcome}</li>")
    return "<ol class='calls'>" + "".join(items) + "</ol>"


def build_report(rows: Sequence[dict[str, Any]]) -> Report:
    return Report.from_rows(rows)


__all__ = ["REPORT_ROUTE", "Report", "ReportQuery", "build_report", "install_report_route", "write_report"]
