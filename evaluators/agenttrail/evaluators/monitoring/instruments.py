"""Run and score metrics as OpenTelemetry instruments, read by Prometheus and pushed over OTLP.

One `MeterProvider` of our own (never the global one, which belongs to whoever embeds us) holds
the instruments; a `PrometheusMetricReader` on a private registry renders `/metrics` when scraped,
and a periodic OTLP reader pushes the same data points. OTel names carry their unit and the
Prometheus translation adds the suffixes:

| OTel instrument (`agenttrail.` + name) | Prometheus | labels |
|---|---|---|
| `runs` counter | `agenttrail_runs_total` | agent, agent_version, task, status |
| `run.duration` histogram | `agenttrail_run_duration_seconds` | agent, agent_version, task |
| `tool.calls` counter | `agenttrail_tool_calls_total` | agent, tool, status |
| `tokens` counter | `agenttrail_tokens_total` | agent, type (input/output) |
| `evaluation.score` histogram | `agenttrail_evaluation_score` | agent, agent_version, metric, evaluator |
| `evaluation.results` counter | `agenttrail_evaluation_results_total` | + label (pass/fail/..) |
| `metrics.label_values.dropped` | `agenttrail_metrics_label_values_dropped_total` | label |
| `ingest.<counter>` (observed) | `agenttrail_ingest_<counter>_total` | process |
| `store.up` (observed) | `agenttrail_store_up` | |

The ingest counters are the receivers' (what `/healthz` shows), read at each collection, with
`process` serve or grpc_receiver: `accepted_spans`, `rejected_spans`,
`refused_requests`, `refused_waits`, `spool_write_errors` for both processes, the writer's
(`stored_spans`, `quarantined_spans`...) for serve, `receiver_restarts` for the gRPC receiver
process (`grpc_process: true`; serve's `accepted_spans` then include what that process handed in).
`store_up` is 1 while serve's store is open and answered the writer's last statement, 0 while
serve waits for a server it could not reach at start or the writer cannot reach it.

A run's `status` is ok or error. `agent_version` is the run's (its agent span's
`gen_ai.agent.version`; empty without one), so a release compares with the one before in PromQL
(`sum by (agent_version) (...)`) as `agenttrail compare` does over the store.

Label cardinality is bounded: each label keeps its first `max_label_values` distinct values and
maps later ones to `_other`, counting each replaced value (no trace ids are ever labels).
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import CallbackOptions, Histogram, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from agenttrail.evaluators.monitoring.export_config import MetricsExportConfig
from agenttrail.evaluators.monitoring.sources import RUN_METRICS

OTHER = "_other"
# Run latency buckets: LLM agents take from a fraction of a second to minutes.
DURATION_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
# Scores are mostly in [0, 1]; a mean is sum/count whatever the scale.
SCORE_BUCKETS = tuple(i / 10 for i in range(11))
# The receivers' monotonic counters by process ("serve", "grpc_receiver"): `Sidecar.ingest_counters`.
IngestCounters = Callable[[], Mapping[str, Mapping[str, int]]]
# Every counter either process reports (IngestCounters' fields, the receiver process's restarts).
INGEST_COUNTERS = (
    "accepted_spans",
    "rejected_spans",
    "normalized_spans",
    "refused_requests",
    "refused_waits",
    "spool_write_errors",
    "stored_spans",
    "store_failures",
    "replayed_segments",
    "quarantined_records",
    "quarantined_spans",
    "receiver_restarts",
)
# Scores the evaluator writes for every run, already exported as runs_total{status} and
# run_duration_seconds.
RUN_LEVEL_SCORES = frozenset(RUN_METRICS)


class RunRecord(NamedTuple):
    """One assembled agent run, as the metrics need it (a NamedTuple, not a frozen dataclass:
    the feed builds thousands a cycle, and a frozen dataclass's `__init__` costs ~5x more)."""

    agent: str
    task: str
    failed: bool
    latency_s: float
    tool_names: Sequence[str]
    tool_statuses: Sequence[str]
    input_tokens: int
    output_tokens: int
    agent_version: str = ""


class ScoreRecord(NamedTuple):
    """One stored evaluation result (a NamedTuple, as RunRecord)."""

    trace_id: str
    root_span_id: str
    agent: str
    task: str
    metric: str
    evaluator: str
    score: float | None
    label: str
    explanation: str
    error: str
    created_at_ns: int
    agent_version: str = ""


class LabelLimiter:
    """Keeps the first `max_values` distinct values of each label; later ones become `_other`."""

    def __init__(self, max_values: int) -> None:
        self.max_values = max_values
        self._seen: dict[str, set[str]] = {}
        self.dropped: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, label: str, value: str) -> str:
        with self._lock:
            seen = self._seen.setdefault(label, set())
            if value in seen:
                return value
            if len(seen) < self.max_values:
                seen.add(value)
                return value
            self.dropped[label] = self.dropped.get(label, 0) + 1
            return OTHER


class AgentMetrics:
    """The instruments, their readers, and `prometheus_page` for the sidecar's `/metrics`."""

    def __init__(
        self,
        config: MetricsExportConfig,
        *,
        otlp_exporter: MetricExporter | None = None,
        ingest: IngestCounters | None = None,
        store_up: Callable[[], bool] | None = None,
    ) -> None:
        readers: list[MetricReader] = []
        self._registry = CollectorRegistry()
        if config.prometheus:
            readers.append(PrometheusMetricReader(registry=self._registry, scope_info_enabled=False))
        if otlp_exporter is not None:
            readers.append(
                PeriodicExportingMetricReader(otlp_exporter, export_interval_millis=config.interval_s * 1000)
            )
        self.provider = MeterProvider(
            metric_readers=readers,
            resource=Resource.create({"service.name": "agenttrail"}),
        )
        self.labels = LabelLimiter(config.max_label_values)
        meter = self.provider.get_meter("agenttrail.evaluators.monitoring")
        self._runs = meter.create_counter("agenttrail.runs", "{run}", "Agent runs, by final status")
        self._duration = meter.create_histogram(
            "agenttrail.run.duration",
            "s",
            "Agent run latency (root span duration)",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS_S,
        )
        self._tool_calls = meter.create_counter("agenttrail.tool.calls", "{call}", "Tool calls, by status")
        self._tokens = meter.create_counter("agenttrail.tokens", "{token}", "LLM tokens used by agent runs")
        self._scores = meter.create_histogram(
            "agenttrail.evaluation.score",
            "1",
            "Evaluation scores, one per run and metric",
            explicit_bucket_boundaries_advisory=SCORE_BUCKETS,
        )
        self._results = meter.create_counter(
            "agenttrail.evaluation.results", "{result}", "Evaluation results, by label (pass/fail/...)"
        )
        self._dropped = meter.create_counter(
            "agenttrail.metrics.label_values.dropped",
            "{value}",
            "Label values replaced by _other because the label reached max_label_values",
        )
        self._dropped_reported: dict[str, int] = {}
        if ingest is not None:
            for name in INGEST_COUNTERS:
                meter.create_observable_counter(
                    f"agenttrail.ingest.{name}",
                    [_observe(ingest, name)],
                    "1",
                    f"The receivers' {name.replace('_', ' ')} since serve started, by process",
                )
        if store_up is not None:
            meter.create_observable_gauge(
                "agenttrail.store.up",
                [lambda options: [Observation(int(store_up()))]],
                "",
                "1 while serve's store is open and answering, 0 while serve waits for it or it is down",
            )

    def record_run(self, run: RunRecord) -> None:
        self.record_runs((run,))

    def record_runs(self, runs: Iterable[RunRecord]) -> None:
        """Observe runs. Counter increments are summed per label set first and added once, and
        latencies grouped by label set (`record_values`): each SDK call costs tens of microseconds
        of Python, under the GIL the OTLP receivers share."""
        statuses: Counter[tuple[str, str, str, str]] = Counter()
        calls: Counter[tuple[str, str, str]] = Counter()
        tokens: Counter[tuple[str, str]] = Counter()
        durations: dict[tuple[str, str, str], list[float]] = {}
        for run in runs:
            agent, task = self.labels("agent", run.agent), self.labels("task", run.task)
            version = self.labels("agent_version", run.agent_version)
            statuses[agent, version, task, "error" if run.failed else "ok"] += 1
            durations.setdefault((agent, version, task), []).append(run.latency_s)
            for name, tool_status in zip(run.tool_names, run.tool_statuses, strict=False):
                calls[agent, self.labels("tool", name), "error" if tool_status == "error" else "ok"] += 1
            for kind, count in (("input", run.input_tokens), ("output", run.output_tokens)):
                if count:
                    tokens[agent, kind] += count
        for (agent, version, task), latencies in durations.items():
            record_values(self._duration, latencies, {"agent": agent, **_version(version), "task": task})
        for (agent, version, task, status), count in statuses.items():
            self._runs.add(count, {"agent": agent, **_version(version), "task": task, "status": status})
        for (agent, tool, status), count in calls.items():
            self._tool_calls.add(count, {"agent": agent, "tool": tool, "status": status})
        for (agent, kind), count in tokens.items():
            self._tokens.add(count, {"agent": agent, "type": kind})
        self._report_dropped()

    def record_score(self, score: ScoreRecord) -> None:
        self.record_scores((score,))

    def record_scores(self, scores: Iterable[ScoreRecord]) -> None:
        """Observe scores; run-level metrics (latency, failure) and scoreless errors are skipped.
        Result counts are summed per label set first, and histogram values grouped by label set
        (`record_values`), as in `record_runs`."""
        results: Counter[tuple[str, str, str, str, str]] = Counter()
        values: dict[tuple[str, str, str, str], list[float]] = {}
        for score in scores:
            if score.metric in RUN_LEVEL_SCORES:
                continue
            agent = self.labels("agent", score.agent)
            metric = self.labels("metric", score.metric)
            evaluator = self.labels("evaluator", score.evaluator)
            version = self.labels("agent_version", score.agent_version)
            if score.score is not None:
                values.setdefault((agent, version, metric, evaluator), []).append(score.score)
            outcome = "error" if score.error else self.labels("result_label", score.label or "none")
            results[agent, version, metric, evaluator, outcome] += 1
        for (agent, version, metric, evaluator), batch in values.items():
            labels = {"agent": agent, **_version(version), "metric": metric, "evaluator": evaluator}
            record_values(self._scores, batch, labels)
        for (agent, version, metric, evaluator, outcome), count in results.items():
            labels = {"agent": agent, **_version(version), "metric": metric, "evaluator": evaluator}
            self._results.add(count, {**labels, "label": outcome})
        self._report_dropped()

    def _report_dropped(self) -> None:
        for label, count in self.labels.dropped.items():
            new = count - self._dropped_reported.get(label, 0)
            if new:
                self._dropped.add(new, {"label": label})
                self._dropped_reported[label] = count

    def prometheus_page(self, params: dict[str, str]) -> tuple[str, bytes]:
        """The `/metrics` page: Prometheus text exposition of the current values."""
        return CONTENT_TYPE_LATEST, generate_latest(self._registry)

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Push to OTLP now (tests, shutdown)."""
        return self.provider.force_flush(int(timeout_s * 1000))

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Push the last OTLP export (bounded: a dead endpoint must not hold up the sidecar's stop)."""
        self.provider.shutdown(timeout_millis=timeout_s * 1000)


def _version(agent_version: str) -> dict[str, str]:
    """The agent_version label, left out for a run without a version (an empty OTLP attribute
    would only be noise; Prometheus reads an empty label as absent anyway)."""
    return {"agent_version": agent_version} if agent_version else {}


def _observe(ingest: IngestCounters, name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
    def observe(options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(counters[name], {"process": process})
            for process, counters in ingest().items()
            if name in counters
        ]

    return observe


def record_values(histogram: Histogram, values: Sequence[float], attributes: dict[str, str]) -> None:
    """Record values of one label set: the SDK's `record` for the first (its checks, the label
    set's aggregation created or the cardinality limit applied), then that aggregation directly
    for the rest, which skips the SDK's per-call attribute cleaning and hashing (about 20 µs of
    Python a value, 4/5 of a `record`). Where the SDK is not laid out as this expects (another
    version, views, delta temporality, an instrument turned off), every value goes through
    `record`; `tests/evaluators/export/test_instruments.py` holds both ways equal."""
    if not values:
        return
    histogram.record(values[0], attributes)
    aggregations = _aggregations(histogram, attributes) if len(values) > 1 else None
    if aggregations is None:
        for value in values[1:]:
            histogram.record(value, attributes)
        return
    from opentelemetry.context import Context
    from opentelemetry.sdk.metrics._internal.measurement import Measurement

    now, context = time.time_ns(), Context()
    for value in values[1:]:
        if not (math.isfinite(value) and value >= 0):
            histogram.record(value, attributes)  # the SDK logs and drops it
            continue
        measurement = Measurement(value, now, histogram, context)  # type: ignore[arg-type]
        for aggregation in aggregations:
            aggregation.aggregate(measurement, False)


def _aggregations(histogram: Any, attributes: dict[str, str]) -> list[Any] | None:
    """The aggregation of `attributes` in each reader's storage (made by a `record`), or None."""
    try:
        from opentelemetry.sdk.metrics._internal._view_instrument_match import _hash_attributes

        enabled = getattr(histogram, "_is_enabled", None)
        if enabled is not None and not enabled():
            return None
        found = []
        for storage in histogram._measurement_consumer._reader_storages.values():
            for match in storage._get_or_init_view_instrument_match(histogram):
                if match._reset_on_collect or match._view._attribute_keys is not None:
                    return None
                aggregation = match._attributes_aggregation.get(_hash_attributes(dict(attributes)))
                if aggregation is None:  # over the cardinality limit: `record` knows where it goes
                    return None
                found.append(aggregation)
        return found
    except (AttributeError, ImportError, TypeError):
        return None
