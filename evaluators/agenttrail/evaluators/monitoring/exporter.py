"""Feed stored runs and scores into the metrics and events exports, inside the sidecar.

`MetricsFeed` tails the `trajectories` and `scores` tables in (AssembledAt | CreatedAt, key)
order from a cursor that starts when the feed starts: counters count what happened since this
process started, and Prometheus' `rate()` handles the reset at a restart. Rows younger than
`settle_s` wait for the next cycle, so a row whose insert became visible a little after a
later-stamped one (another writer, another thread) is not skipped.

Re-assembly: late spans make the assembler write a new revision of a trace's runs, and re-scoring
writes new score rows. Counters are monotonic, so a run is counted once: from the first revision
of its trace the feed sees (normally revision 1; a later one if revision 1 was merged away before
the feed read it). Later revisions of a remembered trace are skipped; a revision > 1 of a run that
started before the feed did is skipped too (it was counted before a restart). The same holds for
one score per (run, metric). Stored data, `agenttrail stats` and `agenttrail report` always
use the latest revision; the exports are a live stream, not the record.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, TypedDict

from opentelemetry.sdk._logs.export import LogRecordExporter
from opentelemetry.sdk.metrics.export import MetricExporter

from agenttrail.collector.background import BackgroundLoop
from agenttrail.collector.store import Store
from agenttrail.evaluators.monitoring.evaluation_events import EvaluationEvents
from agenttrail.evaluators.monitoring.export_config import MetricsExportConfig
from agenttrail.evaluators.monitoring.instruments import (
    RUN_LEVEL_SCORES,
    AgentMetrics,
    IngestCounters,
    RunRecord,
    ScoreRecord,
)
from agenttrail.evaluators.monitoring.sources import us6

if TYPE_CHECKING:
    from agenttrail.collector.sidecar import Sidecar

log = logging.getLogger(__name__)

# One OTLP export (retries included) gives up after this: a dead endpoint must not hold up stop().
EXPORT_TIMEOUT_S = 5

_RUNS = """
SELECT toUnixTimestamp64Micro(AssembledAt), TraceId, RootSpanId, Revision, toUnixTimestamp64Micro(Start),
       Agent, Task, Failure, LatencyS, ToolNames, ToolStatuses, InputTokens, OutputTokens, AgentVersion
FROM trajectories
WHERE AssembledAt >= {at:DateTime64(6)}
  AND (AssembledAt, TraceId, RootSpanId) > ({at:DateTime64(6)}, {k1:String}, {k2:String})
  AND AssembledAt <= now64(6) - toIntervalMillisecond({settle_ms:UInt32})
  AND IsDeleted = 0
ORDER BY AssembledAt, TraceId, RootSpanId
LIMIT {limit:UInt32}
"""
_SCORES = """
SELECT toUnixTimestamp64Micro(CreatedAt), TraceId, RootSpanId, Metric, EvaluatorVersion, Revision,
       toUnixTimestamp64Micro(RunStart), Agent, Task, Evaluator, Score, Label, Explanation, Error,
       ifNull(AgentVersion, '')
FROM scores
WHERE CreatedAt >= {at:DateTime64(6)}
  AND (CreatedAt, TraceId, RootSpanId, Metric, EvaluatorVersion)
      > ({at:DateTime64(6)}, {k1:String}, {k2:String}, {k3:String}, {k4:String})
  AND CreatedAt <= now64(6) - toIntervalMillisecond({settle_ms:UInt32})
ORDER BY CreatedAt, TraceId, RootSpanId, Metric, EvaluatorVersion
LIMIT {limit:UInt32}
"""


class Cursor:
    """Where a tail stands: the last row's (timestamp, key columns...)."""

    def __init__(self, micros: int, keys: int) -> None:
        self.micros = micros
        self.keys: tuple[str, ...] = ("",) * keys

    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"at": us6(self.micros)}
        params.update({f"k{i + 1}": key for i, key in enumerate(self.keys)})
        return params

    def advance(self, micros: int, *keys: str) -> None:
        self.micros, self.keys = micros, keys


class FirstSighting:
    """Remembers (for the last `capacity` keys) which revision of a run was counted.

    `count(key, token, revision, start_us)` is true for the first revision seen of a key (and for
    more rows with that same token, e.g. the other runs of the same trace revision), false after.
    """

    def __init__(self, started_us: int, capacity: int = 200_000) -> None:
        self._started_us = started_us
        self._capacity = capacity
        self._tokens: OrderedDict[Hashable, Hashable] = OrderedDict()

    def count(self, key: Hashable, token: Hashable, revision: int, start_us: int) -> bool:
        counted = self._tokens.get(key)
        if counted is not None:
            self._tokens.move_to_end(key)
            return counted == token
        if revision > 1 and start_us < self._started_us:
            return False
        self._tokens[key] = token
        if len(self._tokens) > self._capacity:
            self._tokens.popitem(last=False)
        return True


class MetricsFeed(BackgroundLoop):
    """Reads new runs and scores each `poll_interval_s` and records them; a sidecar worker."""

    name = "metrics-export"

    def __init__(
        self,
        store_factory: Callable[[], Store],
        make_metrics: Callable[[], AgentMetrics],
        make_events: Callable[[], EvaluationEvents] | None = None,
        *,
        poll_interval_s: float = 10.0,
        settle_s: float = 5.0,
        batch_size: int = 5000,
        started_us: int | None = None,
        make_waiting_metrics: Callable[[], AgentMetrics] | None = None,
    ) -> None:
        super().__init__(
            what="metrics export", thread_name="agenttrail-metrics", poll_interval_s=poll_interval_s
        )
        self._store_factory = store_factory
        self._make_metrics = make_metrics
        self._make_events = make_events
        self._settle_ms = int(settle_s * 1000)
        self._batch_size = batch_size
        started = started_us if started_us is not None else time.time_ns() // 1000
        self._runs = Cursor(started, 2)
        self._scores = Cursor(started, 4)
        self._run_counts = FirstSighting(started)
        self._score_counts = FirstSighting(started)
        self._store: Store | None = None
        self.metrics: AgentMetrics | None = None
        self.events: EvaluationEvents | None = None
        self.runs_seen = 0
        self.scores_seen = 0
        self.failures = 0
        self.last_error = ""
        self._make_waiting_metrics = make_waiting_metrics
        self._waiting_metrics: AgentMetrics | None = None
        self._waiting_lock = threading.Lock()

    def start(self) -> None:
        """Build the providers now (not at install: a sidecar that fails to start leaves no threads)."""
        with self._waiting_lock:
            if self._waiting_metrics is not None:
                self._waiting_metrics.shutdown()
        self.metrics = self._make_metrics()
        self.events = self._make_events() if self._make_events else None
        super().start()

    def stop(self, timeout_s: float = 10.0) -> None:
        super().stop(timeout_s)
        if self.metrics is not None:
            self.metrics.shutdown()  # pushes the last OTLP export
        if self.events is not None:
            self.events.shutdown()

    def count_failure(self, message: str) -> None:
        self.failures += 1
        self.last_error = message

    def prometheus_page(self, params: dict[str, str]) -> tuple[str, bytes]:
        """`/metrics`; before the feed starts (serve waits for its store) the receivers' counters
        and `agenttrail_store_up` only, from instruments of their own with no OTLP push."""
        metrics = self.metrics
        if metrics is None:
            if self._make_waiting_metrics is None:
                raise ValueError("metrics export is not running yet")
            with self._waiting_lock:
                if self._waiting_metrics is None:
                    self._waiting_metrics = self._make_waiting_metrics()
                metrics = self._waiting_metrics
        return metrics.prometheus_page(params)

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = self._store_factory()
        return self._store

    def cycle(self) -> None:
        while self.run_once() and not self._stop.is_set():
            pass

    def run_once(self) -> int:
        """Record one batch of new runs and one of new scores; returns how many rows were read
        if a batch was full (more may be waiting), else 0."""
        runs = self._read(_RUNS, self._runs)
        scores = self._read(_SCORES, self._scores)
        self._record_runs(runs)
        self._record_scores(scores)
        full = len(runs) == self._batch_size or len(scores) == self._batch_size
        return len(runs) + len(scores) if full else 0

    def _read(self, sql: str, cursor: Cursor) -> list[tuple[Any, ...]]:
        params = {**cursor.params(), "settle_ms": self._settle_ms, "limit": self._batch_size}
        return self.store.query(sql, params)

    def _record_runs(self, rows: list[tuple[Any, ...]]) -> None:
        assert self.metrics is not None
        records: list[RunRecord] = []
        for row in rows:
            at_us, trace_id, root, revision, start_us = row[:5]
            self._runs.advance(int(at_us), trace_id, root)
            self.runs_seen += 1
            if not self._run_counts.count(trace_id, int(revision), int(revision), int(start_us)):
                continue
            agent, task, failure, latency_s, names, statuses, input_tokens, output_tokens, version = row[5:]
            records.append(
                RunRecord(
                    agent,
                    task,
                    bool(failure),
                    float(latency_s),
                    names,
                    statuses,
                    input_tokens,
                    output_tokens,
                    version,
                )
            )
        self.metrics.record_runs(records)  # one batch: counters are summed before the SDK sees them

    def _record_scores(self, rows: list[tuple[Any, ...]]) -> None:
        assert self.metrics is not None
        counted: list[ScoreRecord] = []
        for row in rows:
            at_us, trace_id, root, metric, version, revision, run_start_us = row[:7]
            agent, task, evaluator, value, label, explanation, error, agent_version = row[7:]
            self._scores.advance(int(at_us), trace_id, root, metric, version)
            self.scores_seen += 1
            if metric in RUN_LEVEL_SCORES:
                continue
            score = ScoreRecord(
                trace_id,
                root,
                agent,
                task,
                metric,
                evaluator,
                None if value is None else float(value),
                label,
                explanation,
                error,
                int(at_us) * 1000,
                agent_version,
            )
            if self.events is not None:
                self.events.emit(score)  # every result is an event, re-scores included
            token = (int(revision), version)
            if self._score_counts.count((trace_id, root, metric), token, int(revision), int(run_start_us)):
                counted.append(score)
        self.metrics.record_scores(counted)


class _OtlpArguments(TypedDict):
    endpoint: str
    headers: dict[str, str] | None
    timeout: int


def _otlp_arguments(config: MetricsExportConfig, signal: str) -> _OtlpArguments:
    """Endpoint, headers and timeout of one signal's OTLP exporter: gRPC takes the endpoint as
    given, OTLP/HTTP the signal's URL under it."""
    assert config.otlp_endpoint is not None
    grpc = config.otlp_protocol == "grpc"
    return {
        "endpoint": config.otlp_endpoint if grpc else signal_url(config.otlp_endpoint, signal),
        "headers": dict(config.otlp_headers) or None,
        "timeout": EXPORT_TIMEOUT_S,
    }


def otlp_metric_exporter(config: MetricsExportConfig) -> MetricExporter:
    """The OTLP metric exporter for the configured endpoint and protocol."""
    arguments = _otlp_arguments(config, "metrics")
    if config.otlp_protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        return OTLPMetricExporter(**arguments)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetrics

    return HttpMetrics(**arguments)


def otlp_log_exporter(config: MetricsExportConfig) -> LogRecordExporter:
    """The OTLP log exporter (for evaluation events) for the configured endpoint and protocol."""
    arguments = _otlp_arguments(config, "logs")
    if config.otlp_protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter

        return OTLPLogExporter(**arguments)
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogs

    return HttpLogs(**arguments)


def signal_url(endpoint: str, signal: str) -> str:
    """OTLP/HTTP: a base URL gets the signal's path (`/v1/metrics`); a full signal URL is kept."""
    base = endpoint.rstrip("/")
    return base if base.endswith(f"/v1/{signal}") else f"{base}/v1/{signal}"


def build_feed(
    store_factory: Callable[[], Store],
    config: MetricsExportConfig,
    ingest: IngestCounters | None = None,
    store_up: Callable[[], bool] | None = None,
) -> MetricsFeed:
    """The feed with the readers and exporters the config asks for; `ingest` (the sidecar's
    receiver counters) and `store_up` observed with the instruments."""
    otlp = config.otlp_endpoint is not None

    def make_metrics() -> AgentMetrics:
        return AgentMetrics(
            config,
            otlp_exporter=otlp_metric_exporter(config) if otlp else None,
            ingest=ingest,
            store_up=store_up,
        )

    def make_waiting_metrics() -> AgentMetrics:
        return AgentMetrics(config, ingest=ingest, store_up=store_up)

    def make_events() -> EvaluationEvents:
        return EvaluationEvents(otlp_log_exporter(config))

    return MetricsFeed(
        store_factory,
        make_metrics,
        make_events if otlp and config.evaluation_events else None,
        poll_interval_s=config.interval_s,
        settle_s=config.settle_s,
        make_waiting_metrics=make_waiting_metrics if config.prometheus else None,
    )


def install_metrics_export(sidecar: Sidecar, config: MetricsExportConfig) -> MetricsFeed | None:
    """Add the metrics feed and, if `config` enables it, `GET /metrics` to a sidecar before it starts."""
    if not config.enabled:
        return None
    feed = build_feed(sidecar.new_store, config, sidecar.ingest_counters, sidecar.store_up)
    sidecar.add_worker(feed)
    if config.prometheus:
        sidecar.add_page_route("/metrics", feed.prometheus_page, announce="Prometheus metrics")
    return feed
