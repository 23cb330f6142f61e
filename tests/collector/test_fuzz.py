"""End-to-end fuzzing of the OTLP receivers (issue 19): a short seeded run per seed against a real
sidecar on loopback (uvicorn HTTP, grpcio, chDB). The long run is benchmarks/bench_fuzz.py."""

from __future__ import annotations

from typing import Any

import pytest
from otlp_fuzz import GRPC, HTTP_JSON, HTTP_PROTOBUF, FuzzCases, check_sidecar, run_fuzz

CASES = 150


@pytest.mark.parametrize(
    ("seed", "collector"), [(1, "clickhouse"), (2, "clickhouse"), (3, "python")], indirect=["collector"]
)
def test_fuzzed_requests_get_clear_answers_and_every_acknowledged_canary_is_stored(
    collector: Any, seed: int
) -> None:
    """Mutated OTLP over HTTP protobuf, HTTP JSON and gRPC, four at a time, with a canary run every
    tenth request: every answer is a 200 / partial_success with reasons, a 4xx or INVALID_ARGUMENT
    with a message, or a refusal with a retry hint (no other 5xx, no INTERNAL/UNKNOWN, no dropped
    connection); every acknowledged canary is stored and assembled into its run; everything
    accepted is stored, nothing quarantined, and the sidecar stays ready. On both store paths:
    ClickHouse decoding the spooled protobuf (seeds 1, 2), and rows rendered in Python (seed 3)."""
    sidecar = collector
    report = run_fuzz(sidecar.http.address, sidecar.grpc_address, FuzzCases(seed).cases(CASES))
    assert not report.violations, report.describe_violations()
    kinds = report.by_kind()
    # The run exercised every kind of answer on every transport, so the checks above had material.
    assert min(kinds["accepted"], kinds["partial"], kinds["rejected"]) > 0, kinds
    transports = {transport for transport, _ in report.by_transport()}
    assert transports == {HTTP_PROTOBUF, HTTP_JSON, GRPC}
    assert len(report.acked_canaries) == CASES // 10
    assert check_sidecar(sidecar, report) == []
    assert sidecar.pipeline.clickhouse_decoding == (seed != 3)
