"""One insert reads about `batch_max_rows` spans, however far the writer falls behind, and
writes them a part of `insert_block_rows` spans at a time: an insert of the whole queue (200k
spans) in one part once took 650 MiB, and a segment's memory is bounded by its blocks, not its
size (so the default segment can be large enough to spread each insert's fixed cost)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from otlp_builders import SpanSpec, new_span_id, new_trace_id, request

from agenttrail.collector import assembler, ingest
from agenttrail.collector.config import COLLECTOR, SidecarConfig
from agenttrail.collector.ingest import IngestPipeline
from agenttrail.collector.sidecar import Sidecar
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


def test_the_sidecar_cuts_segments_at_the_pipelines_default_batch() -> None:
    """The config's default (and so `serve`'s) is the pipeline's own, not a second number."""
    [setting] = [setting for setting in COLLECTOR.settings if setting.name == "batch_max_spans"]
    assert SidecarConfig().batch_max_spans == setting.default == ingest.BATCH_MAX_SPANS


@pytest.mark.timeout(300)
def test_stop_far_behind_ends_within_its_timeout_and_the_rest_is_replayed(store: Any, tmp_path: Path) -> None:
    """A writer 80 segments behind stops within stop()'s timeout (it takes no new batch after
    half of it) instead of being abandoned mid-insert; the segments it did not reach stay
    spooled, and the next start's replay stores every span exactly once."""
    spool_dir = tmp_path / "spool"
    pipeline = IngestPipeline(store, spool_dir, batch_max_rows=30, flush_interval_s=30)
    trace = new_trace_id()
    for _ in range(80):
        pipeline.accept(thirty_spans(trace))
    pipeline.start()
    pipeline.stop(timeout_s=6)
    assert not pipeline.alive()
    left = len(pipeline._spool.segments())
    assert left > 0  # 80 inserts (~0.1 s each at best) do not fit in 3 s: some are left for replay
    stored = store.query("SELECT count() FROM otel_traces WHERE TraceId = {t:String}", {"t": trace})[0][0]
    assert stored == pipeline.counters.stored_spans < 2400

    restarted = IngestPipeline(store, spool_dir, batch_max_rows=30, flush_interval_s=30)
    assert restarted.replay() == left
    assert store.query("SELECT count() FROM otel_traces WHERE TraceId = {t:String}", {"t": trace}) == [
        (2400,)
    ]
    assert restarted._spool.segments() == []


def test_one_insert_writes_parts_of_about_insert_block_rows(
    store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ClickHouse reads a segment a few requests at a time and writes a part each time
    insert_block_rows spans have gathered, instead of squashing the whole segment into one part
    (an insert's memory grows with its part: 262 MiB for 20,000 spans in one). Merges are held
    off so the parts can be counted; every span is stored once."""
    monkeypatch.setattr(ingest, "READ_BLOCK_BYTES", 4096)  # about one 30-span request a block
    pipeline = IngestPipeline(
        store, tmp_path / "spool", batch_max_rows=300, insert_block_rows=64, flush_interval_s=30
    )
    trace = new_trace_id()
    for _ in range(10):
        pipeline.accept(thirty_spans(trace))
    assert len(pipeline._spool.segments()) == 1
    store.command("SYSTEM STOP MERGES otel_traces")
    try:
        pipeline.start()
        assert pipeline.flush(60)
        [(spans, parts)] = store.query(
            "SELECT count(), uniqExact(_part) FROM otel_traces WHERE TraceId = {t:String}", {"t": trace}
        )
    finally:
        store.command("SYSTEM START MERGES otel_traces")
        pipeline.stop()
    assert spans == 300
    assert 3 <= parts <= 5  # parts of 64 to ~94 spans


def test_assembly_chunks_follow_the_config(collector_with: Callable[..., Sidecar]) -> None:
    """`assembly_max_traces` reaches the assembler (its default is the assembler's own), so an
    operator can trade memory under overload for CPU a run."""
    [setting] = [setting for setting in COLLECTOR.settings if setting.name == "assembly_max_traces"]
    assert SidecarConfig().assembly_max_traces == setting.default == assembler.MAX_TRACES_PER_QUERY
    assert collector_with(assembly_max_traces=3500).assembler.chunk_size == 3500
