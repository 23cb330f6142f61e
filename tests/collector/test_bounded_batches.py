"""One insert holds about `batch_max_rows` spans, however far the writer falls behind: ClickHouse
needs ~3 KiB a span to insert them, so an insert of the whole queue (200k spans) took 650 MiB."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from otlp_builders import SpanSpec, new_span_id, new_trace_id, request

from agenttrail.collector.ingest import IngestPipeline
from agenttrail.collector.spool import Spool


def thirty_spans(trace: str) -> bytes:
    return request(*[SpanSpec(trace, new_span_id(), f"s{i}", 0, 1) for i in range(30)]).SerializeToString()


def test_the_spool_is_cut_into_segments_of_batch_max_rows_while_the_writer_is_behind(
    store: Any, tmp_path: Path
) -> None:
    """With the writer not running, ten 30-span requests and batch_max_rows=100 make segments of
    four requests (120 spans) each, not one segment of 300; the writer then stores them all."""
    pipeline = IngestPipeline(store, tmp_path / "spool", batch_max_rows=100, flush_interval_s=30)
    trace = new_trace_id()
    for _ in range(10):
        pipeline.accept(thirty_spans(trace))
    segments = pipeline._spool.segments()
    assert [len(Spool.read(segment)) for segment in segments] == [4, 4, 2]
    assert pipeline.queued_rows == 300
    pipeline.start()
    assert pipeline.flush(60)
    assert store.query("SELECT count() FROM otel_traces WHERE TraceId = {t:String}", {"t": trace}) == [(300,)]
    assert pipeline._spool.segments() == []
    assert pipeline.counters.stored_spans == 300
    pipeline.stop()
