"""The demo's monitoring half: a local webhook that receives the alerts, the sidecar config that
points the alert rules and the drift check at it, and what the demo prints about them.

The demo's traffic lasts seconds, not hours, so its windows are seconds long; the rules are the
same kinds a production config uses (deploy/agenttrail.yaml).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from agenttrail.collector.store import Store
from agenttrail.evaluators.monitoring.display import (
    drift_summary,
    format_effect,
    format_evidence,
    format_value,
)
from agenttrail.evaluators.monitoring.report import build_report, write_report
from agenttrail.evaluators.monitoring.report_data import ReportQuery, report_rows

AGENT = "support-agent"
BASELINE_VERSION = "1.0"
# The drift lines' recent window: a day, so the command the demo prints gives the same lines
# later on the kept store (the sidecar's own check uses one-minute windows, gone a minute later).
DRIFT_RECENT = "1d"
FAILURE_RULE = "support-failure-spike"


class WebhookInbox:
    """A JSON webhook receiver on loopback: the stand-in for the team's incident channel."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        inbox = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(204)
                self.end_headers()
                try:
                    payload = json.loads(body)
                except ValueError:
                    return
                with inbox._changed:
                    inbox.received.append(payload)
                    inbox._changed.notify_all()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/alerts"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="demo-webhook")

    def start(self) -> WebhookInbox:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def wait_for(self, accept: Callable[[dict[str, Any]], bool], timeout_s: float) -> dict[str, Any] | None:
        """The first notification `accept` takes, waiting up to `timeout_s` for it."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                found = next((payload for payload in self.received if accept(payload)), None)
                remaining = deadline - time.monotonic()
                if found is not None or remaining <= 0:
                    return found
                self._changed.wait(remaining)


def demo_min_samples(runs_per_phase: int) -> int:
    """Fewest values per window the demo's drift check (and the command it prints) asks for."""
    return min(30, max(10, runs_per_phase // 2))


def drift_command(min_samples: int) -> str:
    """The `agenttrail drift` command that prints, on the demo's store, the drift lines the demo
    prints (it lists every test): the demo computes them with the same call and arguments."""
    from agenttrail.evaluators.monitoring.drift import DriftSettings

    command = f"agenttrail drift --recent {DRIFT_RECENT} --baseline-version {BASELINE_VERSION}"
    return command if min_samples == DriftSettings().min_samples else f"{command} --min-samples {min_samples}"


def demo_config(webhook_url: str, runs_per_phase: int, phase_s: float) -> dict[str, Any]:
    """Alert rules and the drift check, sized for a demo whose release lands after `phase_s`."""
    window_s = max(2, round(phase_s))
    return {
        "drift": {
            "interval_s": 2,
            "recent": "1m",
            "baseline_version": BASELINE_VERSION,  # the release before: compare 1.1 with 1.0
            "min_samples": demo_min_samples(runs_per_phase),
            "metrics": ["failure_rate", "latency", "trajectory_length", "tool_distribution"],
        },
        "alerts": {
            "evaluation_interval": "1s",
            "channels": {"incidents": {"type": "webhook", "url": webhook_url, "timeout": "2s"}},
            "rules": [
                {
                    "name": FAILURE_RULE,
                    "kind": "failure_rate_spike",
                    "params": {
                        "window": f"{window_s}s",
                        "baseline": "2m",
                        "factor": 2,
                        "floor": 0.1,
                        "min_runs": max(5, runs_per_phase // 3),
                        "min_baseline_runs": max(5, runs_per_phase // 3),
                    },
                    "for": "1s",
                    "severity": "critical",
                    "filter": {"agent": AGENT},
                    "summary": "{agent} failure rate {value:.0%} over {window} (threshold {threshold:.0%})",
                    "channels": ["incidents"],
                },
                {
                    "name": "support-failure-drift",
                    "kind": "drift",
                    "params": {"metric": "failure_rate", "window": "1m"},
                    "severity": "warning",
                    "filter": {"agent": AGENT},
                    "channels": ["incidents"],
                },
            ],
        },
    }


def write_config(path: Path, config: dict[str, Any]) -> None:
    path.write_text(
        "# Written by `agenttrail demo`: second-long windows for a traffic burst of seconds.\n"
        + yaml.safe_dump(config, sort_keys=False)
    )


def wait_drift(store: Store, after: float, timeout_s: float) -> list[tuple[Any, ...]]:
    """Drift the sidecar's monitor recorded for the demo agent in a check made after `after`
    (unix seconds: once every run was stored), waiting for that check."""
    deadline = time.monotonic() + timeout_s
    while True:
        rows = store.query(
            "SELECT Metric, Test, PValue, EffectSize, BaselineValue, RecentValue, BaselineN, RecentN "
            "FROM drift_events WHERE Agent = {agent:String} AND Drifted = 1 "
            "AND toUnixTimestamp64Milli(DetectedAt) >= {after_ms:Int64} "
            "ORDER BY DetectedAt DESC LIMIT 1 BY Metric",
            {"agent": AGENT, "after_ms": int(after * 1000)},
        )
        if rows or time.monotonic() > deadline:
            return [tuple(row) for row in rows]
        time.sleep(0.5)


def summarise_monitoring(
    store: Store,
    inbox: WebhookInbox,
    out: Callable[[str], None],
    *,
    stored_at: float,
    min_samples: int,
    timeout_s: float = 30.0,
) -> None:
    """What the sidecar noticed about the release: drift against 1.0 and the failure alert. The
    drift lines are `drift_command`'s answer (same windows, adjusted p), not the sidecar's
    one-minute checks, so the command gives the same numbers afterwards."""
    out(f"\nmonitoring (version 1.1 shipped halfway; baseline: version {BASELINE_VERSION}):")
    firing = inbox.wait_for(
        lambda payload: payload.get("rule") == FAILURE_RULE and payload.get("status") == "firing", timeout_s
    )
    if firing is None:
        out(f"  the {FAILURE_RULE} alert did not fire within {timeout_s:.0f}s")
    else:
        headline = f"[{firing['status'].upper()}] {firing['rule']} ({firing['severity']})"
        out(f"  webhook {inbox.url} received: {headline}")
        out(f"      {firing['annotations'].get('summary', '')}")
    if not wait_drift(store, stored_at, timeout_s):  # the sidecar's check, which notifies
        out(f"  the sidecar's drift check found none within {timeout_s:.0f}s")
    from agenttrail.evaluators.monitoring.drift_monitor import DriftConfig
    from agenttrail.evaluators.monitoring.service import drift_read

    read = drift_read(
        DriftConfig.from_mapping({}),
        recent=DRIFT_RECENT,
        baseline_version=BASELINE_VERSION,
        min_samples=min_samples,
    )
    rows = read.local(store)
    out(f"  {drift_summary(rows)}")
    for row in first_drift_per_metric(rows):
        out(
            f"  drift in {row['metric']:<26} {row['test']:<18} {format_evidence(row)}  "
            f"{format_effect(row['effect'], row['effect_size'])}  "
            f"{format_value(row['metric'], row['baseline_value'])} (n {row['baseline_n']}) -> "
            f"{format_value(row['metric'], row['recent_value'])} (n {row['recent_n']})"
        )
    out(f"  (`{drift_command(min_samples)}` prints these and every other test)")
    others = sorted({payload["rule"] for payload in inbox.received} - {FAILURE_RULE})
    if others:
        out(f"  also notified: {', '.join(others)}")


def first_drift_per_metric(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per metric that drifted, its test with the smallest adjusted p (a test without one last)."""
    drifted = sorted(
        (row for row in rows if row["status"] == "drift"),
        key=lambda row: (row["p_adjusted"] is None, row["p_adjusted"] or 0.0),
    )
    best: dict[str, dict[str, Any]] = {}
    for row in drifted:  # sorted is stable: of equal p, the first listed
        best.setdefault(row["metric"], row)
    return [best[metric] for metric in sorted(best)]


def write_demo_report(store: Store, since: datetime, path: Path) -> Path:
    """The HTML report over the demo's runs (second-long buckets: the run lasted seconds)."""
    until = datetime.now(UTC) + timedelta(seconds=1)
    report = build_report(report_rows(store, ReportQuery(since=since, until=until)))
    write_report(report, "html", path)
    return path
