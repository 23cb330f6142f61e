"""`agenttrail demo`: the sidecar on a temporary embedded store, the example agent against it,
scored online against reference trajectories for its tasks. Halfway through, version 1.1 of
the agent ships with a broken refund provider: the sidecar finds the drift, fires the
failure-rate alert to a local webhook, and the report shows both."""

from __future__ import annotations

import contextlib
import logging
import random
import shlex
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agenttrail.collector.config import SidecarConfig
from agenttrail.collector.durations import format_duration
from agenttrail.collector.queries import TrajectoryFilter, query_trajectories
from agenttrail.collector.sidecar import Sidecar
from agenttrail.evaluators.demo import agent as demo_agent
from agenttrail.evaluators.demo.monitoring import (
    WebhookInbox,
    demo_config,
    demo_min_samples,
    drift_command,
    summarise_monitoring,
    write_config,
    write_demo_report,
)
from agenttrail.evaluators.metrics import aggregate
from agenttrail.evaluators.scoring.reference_store import store_reference_set
from agenttrail.evaluators.scoring.references import parse_reference_set
from agenttrail.evaluators.scoring.scores import ScoreFilter, query_scores

Out = Callable[[str], None]


PHASE_S = 6.0  # each version serves traffic this long, so the alert windows can tell them apart


def _progress(done: int, total: int, started: float) -> None:
    tty = sys.stderr.isatty()
    if tty or done == total or done % max(1, total // 10) == 0:
        rate = done / max(time.monotonic() - started, 1e-9)
        end = "\n" if done == total or not tty else ""
        print(f"\r  agent runs: {done}/{total} ({rate:.0f}/s)", end=end, file=sys.stderr, flush=True)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def describe_run(run: dict[str, Any]) -> str:
    steps = []
    for call in run["tool_calls"]:
        mark = f" ✗ {call['error_type']}" if call["status"] == "error" else ""
        steps.append(f"{call['name']}({format_duration(call['latency_ms'] / 1000)}{mark})")
    status = f"FAILED {run['error_type']}" if run["failure"] else "ok"
    return (
        f"{run['trace_id'][:12]}  {run['task']:<12} {format_duration(run['latency_s']):>8}  {status:<28} "
        + (" > ".join(steps) or "-")
    )


def summarise(runs: list[dict[str, Any]], out: Out = print) -> None:
    """What a user wants to see first: volume, failures, latency, the worst runs."""
    if not runs:
        out("no runs were assembled")
        return
    failures = [run for run in runs if run["failure"]]
    latencies = [run["latency_s"] for run in runs]
    tool_calls = [call for run in runs for call in run["tool_calls"]]
    tool_errors = Counter(call["name"] for call in tool_calls if call["status"] == "error")
    tool_counts = Counter(call["name"] for call in tool_calls)
    out(
        f"\nruns: {len(runs)}   failure rate: {len(failures) / len(runs):.1%}   tool calls: {len(tool_calls)}"
    )
    shown = [f"p{q} {format_duration(percentile(latencies, q))}" for q in (50, 95, 99)]
    out(f"latency: {'  '.join(shown)}  mean {format_duration(statistics.fmean(latencies))}")
    tokens = sum(run["input_tokens"] + run["output_tokens"] for run in runs)
    out(f"tokens: {tokens}")
    out("\nper task:")
    for task, count in sorted(Counter(run["task"] for run in runs).items()):
        failed = sum(1 for run in failures if run["task"] == task)
        out(f"  {task:<14} runs {count:>5}   failed {failed:>4} ({failed / count:.1%})")
    out("\ntool errors:")
    for name, count in sorted(tool_counts.items()):
        out(
            f"  {name:<14} calls {count:>5}   errors {tool_errors[name]:>4} ({tool_errors[name] / count:.1%})"
        )
    out("\nslowest runs:")
    for run in sorted(runs, key=lambda r: -r["latency_s"])[:5]:
        out("  " + describe_run(run))
    out("\nfailed runs:")
    for run in failures[:5]:
        out("  " + describe_run(run))
    if len(failures) > 5:
        out(f"  … and {len(failures) - 5} more (agenttrail trajectories --format json)")


def wait_scored(sidecar: Sidecar, runs: int, timeout_s: float = 60) -> None:
    assert sidecar.store is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        decided = sidecar.store.query("SELECT uniqExact(TraceId, RootSpanId) FROM evaluation_decisions")[0][0]
        if decided >= runs:
            return
        time.sleep(0.1)


def summarise_scores(runs: list[dict[str, Any]], scores: list[dict[str, Any]], out: Out = print) -> None:
    """Per-metric means, and the runs furthest from their reference."""
    by_metric: dict[str, list[float]] = {}
    by_run: dict[str, dict[str, float]] = {}
    for row in scores:
        by_metric.setdefault(row["metric"], []).append(row["score"])
        by_run.setdefault(row["trace_id"], {})[row["metric"]] = row["score"]
    out("\nonline evaluation against the reference trajectories:")
    for metric in sorted(by_metric):
        summary = aggregate(by_metric[metric])
        mean, std = summary.mean or 0, summary.std or 0
        shown = (
            (format_duration(mean), format_duration(std))
            if metric == "latency"
            else (f"{mean:.3f}", f"{std:.3f}")
        )
        out(f"  {metric:<28} n {summary.count:>5}   mean {shown[0]}   std {shown[1]}")

    def distance(run: dict[str, Any]) -> float:
        metrics = by_run.get(run["trace_id"], {})
        return 2 - metrics.get("trajectory_precision", 1) - metrics.get("trajectory_recall", 1)

    furthest = sorted((run for run in runs if distance(run) > 0), key=lambda r: (-distance(r), r["trace_id"]))
    out(f"\nruns furthest from their reference ({len(furthest)} differ from it):")
    for run in furthest[:5]:
        metrics = by_run[run["trace_id"]]
        expected = " > ".join(demo_agent.USUAL_PATHS[run["task"]])
        out(f"  {describe_run(run)}")
        out(
            f"      expected {expected}   precision {metrics.get('trajectory_precision', 0):.2f}"
            f"  recall {metrics.get('trajectory_recall', 0):.2f}"
        )


def run_phase(first: int, count: int, rng: random.Random, total: int, started: float) -> None:
    """`count` agent runs spread over PHASE_S seconds (faster if the runs themselves are slow)."""
    phase_start = time.monotonic()
    for offset in range(count):
        delay = phase_start + offset * PHASE_S / count - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        demo_agent.run_once(first + offset, rng)
        _progress(first + offset + 1, total, started)


def run_demo(
    *,
    runs: int,
    seed: int,
    keep: str | None,
    serve: bool = False,
    build: Callable[[SidecarConfig, str | None], Sidecar],
    report: str | None = "agenttrail-demo-report.html",
    out: Out = print,
) -> list[dict[str, Any]]:
    from agenttrail.instrumentation import configure, force_flush

    logging.getLogger("agenttrail").setLevel(logging.ERROR)  # the demo prints what the sidecar finds
    store_dir = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="agenttrail-demo-"))
    config = SidecarConfig(
        store=str(store_dir), grpc="127.0.0.1:0", http="127.0.0.1:0", quiet_period_s=0.5, idle_timeout_s=2.0
    )
    store_dir.mkdir(parents=True, exist_ok=True)
    inbox = WebhookInbox().start()
    config_file = store_dir / "agenttrail-demo.yaml"
    first_half = runs // 2
    write_config(config_file, demo_config(inbox.url, max(1, first_half), PHASE_S))
    sidecar = build(config, str(config_file))
    out(f"starting the agenttrail sidecar on {store_dir} (config {config_file}) ...")
    sidecar.start()
    demo_start = datetime.now(UTC) - timedelta(seconds=1)
    try:
        grpc_address = sidecar.grpc_address
        assert grpc_address is not None
        out(f"  OTLP/gRPC {grpc_address}; running the example support agent {runs} times")
        assert sidecar.store is not None
        store_reference_set(sidecar.store, parse_reference_set(demo_agent.REFERENCES), source="demo")
        out(f"  loaded reference trajectories for tasks: {', '.join(sorted(demo_agent.REFERENCES))}")
        configure(service_name="demo-support-agent", endpoint=f"http://{grpc_address}", protocol="grpc")
        demo_agent.seed(seed)
        rng = random.Random(seed)
        started = time.monotonic()
        run_phase(0, first_half, rng, runs, started)
        demo_agent.degrade()
        if sys.stderr.isatty():
            print(file=sys.stderr)
        out("  version 1.1 ships: its refund provider declines most refunds")
        run_phase(first_half, runs - first_half, rng, runs, started)
        force_flush()
        out("  waiting for the collector to store and assemble every run ...")
        if not sidecar.wait_until_assembled(timeout_s=120):
            out("  (assembly is still running; the summary may be partial)")
        stored_at = time.time()
        result = query_trajectories(sidecar.store, TrajectoryFilter(limit=runs * 2))
        summarise(result, out)
        out("\n  waiting for the evaluator to score every run ...")
        wait_scored(sidecar, len(result))
        scores = query_scores(sidecar.store, ScoreFilter.from_params({"limit": str(runs * 20)}))
        # Only the runs as they stand: the scores of a run re-assembled under another root stay
        # until the evaluator's next sweep (deleted_runs.py), a few seconds.
        current = {(run["trace_id"], run["root_span_id"]) for run in result}
        scores = [score for score in scores if (score["trace_id"], score["root_span_id"]) in current]
        summarise_scores(result, scores, out)
        min_samples = demo_min_samples(max(1, first_half))
        summarise_monitoring(sidecar.store, inbox, out, stored_at=stored_at, min_samples=min_samples)
        if report:
            path = write_demo_report(sidecar.store, demo_start, Path(report))
            out(f"\nreport: {path.resolve()}")
            out("  failure rate, latency and scores over time, with the drift and the alert marked")
        if serve:
            keep_serving(sidecar, store_dir, out, drift_command(min_samples))
        elif not keep:
            out("\nthe demo's store is deleted now; `agenttrail demo --keep` keeps it and keeps the sidecar")
            out("serving (the console, the CLI's read commands) until Ctrl-C")
        return result
    finally:
        sidecar.stop()
        inbox.stop()
        if not keep:
            shutil.rmtree(store_dir, ignore_errors=True)
        else:
            out(f"\nstopped. The store is kept in {store_dir}; to serve it again:")
            out(f"  agenttrail serve --store {shlex.quote(str(store_dir))}")


def path_hint() -> str | None:
    """What to run first in another shell when `agenttrail` is not on its PATH (`make demo`
    installs into .venv without activating it): `. <venv>/bin/activate`, else None."""
    if shutil.which("agenttrail") is not None:
        return None
    activate = Path(sys.executable).parent / "activate"
    if not activate.exists():
        return None
    with contextlib.suppress(ValueError):  # shorter from the current directory, as make runs it
        activate = activate.relative_to(Path.cwd())
    return f". {shlex.quote(str(activate))}"


def keep_serving(sidecar: Sidecar, store_dir: Path, out: Out, drift: str) -> None:
    """Serve the demo's store until Ctrl-C (or SIGTERM), saying where to look meanwhile."""
    assert sidecar.http is not None
    stop = threading.Event()
    # Handlers first: a Ctrl-C right after the hint must stop the demo cleanly, not abort it.
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        store = shlex.quote(str(store_dir))
        out(f"\nthe sidecar keeps serving the demo's store {store_dir} (Ctrl-C to stop):")
        out(f"  console   http://{sidecar.http.address}/console/")
        activate = path_hint()
        if activate:
            out(f"  in another terminal:  {activate}")
            out(f"    export AGENTTRAIL_STORE={store}")
        else:
            out(f"  in another terminal:  export AGENTTRAIL_STORE={store}")
        out("    agenttrail trajectories --limit 5")
        out(f"    {drift}")
        sys.stdout.flush()  # a pipe is block-buffered: the hint must show while we wait
        stop.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
