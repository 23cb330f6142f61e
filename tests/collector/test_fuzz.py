"""End-to-end fuzzing of the OTLP receivers (issue 19): a short seeded run per seed against a real
sidecar on loopback (uvicorn HTTP, grpcio, chDB). The long run is benchmarks/bench_fuzz.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from otlp_fuzz import GRPC, HTTP_JSON, HTTP_PROTOBUF, FuzzCases, check_sidecar, run_fuzz

from agenttrail.collector.config import SidecarConfig
from agenttrail.collector.ingest import IngestPipeline
from agenttrail.collector.sidecar import Sidecar

CASES = 150


@pytest.fixture
def collector(
    chdb_dir: Path, database: str, tmp_path: Path, request: Any, monkeypatch: Any
) -> Iterator[Sidecar]:
    """The collector alone (receivers, spool, writer, assembler): the evaluators' extensions are
    not what is fuzzed, and their migrations would triple the start-up time."""
    if request.node.callspec.params["store_path"] == "python":
        # A store without ClickHouse's Protobuf input: every row is rendered by otlp_decode.
        monkeypatch.setattr(IngestPipeline, "_store_can_decode", lambda self: False)
    sidecar = Sidecar(
        SidecarConfig(
            store=str(chdb_dir),
            database=database,
            grpc="127.0.0.1:0",
            http="127.0.0.1:0",
            spool_dir=str(tmp_path / "spool"),
            quiet_period_s=0.3,
            idle_timeout_s=1.0,
            flush_interval_s=0.05,
        )
    )
    sidecar.start()
    yield sidecar
    sidecar.stop()


@pytest.mark.parametrize(("seed", "store_path"), [(1, "clickhouse"), (2, "clickhouse"), (3, "python")])
def test_fuzzed_requests_get_clear_answers_and_every_acknowledged_canary_is_stored(
    collector: Any, seed: int, store_path: str
) -> None:
    """Mutated OTLP over HTTP protobuf, HTTP JSON and gRPC, four at a time, with a canary run every
    tenth request: every answer is a 200 / partial_success with reasons, a 4xx or INVALID_ARGUMENT
    with a message, or a refusal with a retry hint (no other 5xx, no INTERNAL/UNKNOWN, no dropped
    connection); every acknowledged canary is stored and assembled into its run; everything
    accepted is stored, nothing quarantined, and the sidecar stays ready."""
    sidecar = collector
    report = run_fuzz(sidecar.http.address, sidecar.grpc.address, FuzzCases(seed).cases(CASES))
    assert not report.violations, report.describe_violations()
    kinds = report.by_kind()
    # The run exercised every kind of answer on every transport, so the checks above had material.
    assert min(kinds["accepted"], kinds["partial"], kinds["rejected"]) > 0, kinds
    transports = {transport for transport, _ in report.by_transport()}
    assert transports == {HTTP_PROTOBUF, HTTP_JSON, GRPC}
    assert len(report.acked_canaries) == CASES // 10
    assert check_sidecar(sidecar, report) == []


def sidecar_path(sidecar: Any) -> str:
    return "clickhouse" if sidecar.pipeline.clickhouse_decoding else "python"
