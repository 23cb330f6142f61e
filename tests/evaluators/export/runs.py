"""Runs sent over OTLP into a real sidecar, and its /metrics page read back over HTTP."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from otlp_builders import agent_span, new_span_id, new_trace_id, request, tool_span
from prometheus_client.parser import text_string_to_metric_families

from agenttrail.evaluators.scoring.reference_store import store_reference_set
from agenttrail.evaluators.scoring.references import parse_reference_set

REFERENCES = {"refund": {"reference_trajectory": [{"tool_name": "lookup"}, {"tool_name": "refund"}]}}


def config_file(tmp_path: Path, **metrics_export: Any) -> str:
    """A config file with a fast `metrics_export:` section (plus the given overrides)."""
    section = {"interval_s": 0.2, "settle_s": 0.2, **metrics_export}
    path = tmp_path / "agenttrail.yaml"
    path.write_text(yaml.safe_dump({"metrics_export": section}))
    return str(path)


def load_references(sidecar: Any) -> None:
    store_reference_set(sidecar.store, parse_reference_set(REFERENCES), source="test")


def send_run(
    sidecar: Any,
    *,
    agent: str = "bot",
    task: str = "refund",
    tools: tuple[str, ...] = ("lookup", "refund"),
    failing_tools: tuple[str, ...] = (),
    failed: bool = False,
    latency_ms: float = 100,
    version: str = "",
) -> tuple[str, str]:
    """One agent run (trace id, root span id) with its tool calls, through the OTLP pipeline."""
    trace, root = new_trace_id(), new_span_id()
    attributes = {"agenttrail.task": task} if task else {}
    if version:
        attributes["gen_ai.agent.version"] = version
    spans = [
        agent_span(
            trace,
            root,
            0,
            latency_ms,
            agent=agent,
            attributes=attributes,
            error="RuntimeError" if failed else None,
        )
    ]
    spans += [
        tool_span(
            trace,
            new_span_id(),
            root,
            name,
            2 * i + 1,
            2 * i + 2,
            error="ToolError" if name in failing_tools else None,
        )
        for i, name in enumerate(tools)
    ]
    sidecar.pipeline.accept(request(*spans).SerializeToString())
    return trace, root


def scrape(sidecar: Any) -> dict[str, Any]:
    """GET /metrics over HTTP, parsed by prometheus_client: {sample name: [(labels, value)]}."""
    with urllib.request.urlopen(f"http://{sidecar.http.address}/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


def value(samples: dict[str, Any], name: str, **labels: str) -> float:
    """Sum of a sample's values over the series whose labels include `labels`."""
    return sum(v for got, v in samples.get(name, []) if all(got.get(k) == w for k, w in labels.items()))


def wait_for(check: Callable[[], Any], timeout: float = 30, what: str = "condition") -> Any:
    """Poll `check` until it returns something truthy; its last value otherwise fails the test."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def feed_of(sidecar: Any) -> Any:
    [feed] = [worker for worker in sidecar.workers if worker.name == "metrics-export"]
    return feed
