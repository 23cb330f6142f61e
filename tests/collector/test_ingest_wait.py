"""A received request waits at most `ingest_max_wait_s` to be checked and spooled: past it, the
client is told to retry (HTTP 429 + Retry-After, gRPC UNAVAILABLE + retry-after) instead of
getting a late acknowledgement. Requests already in progress are still acknowledged and stored."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest
from otlp_builders import SpanSpec, new_span_id, new_trace_id, request
from receiver_clients import grpc_export, post, stored_span_names

from agenttrail.collector.ingest import INGEST_SLOTS


@pytest.mark.grpc_in_serve  # both receivers share serve's slots here (the process has its own)
def test_a_request_that_would_wait_too_long_is_refused_with_a_retry_hint(
    start_sidecar: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sidecar = start_sidecar(ingest_max_wait_s=0.3)
    pipeline = sidecar.pipeline
    # The spool's disk hangs: every request that got an ingest slot stays in it.
    writable = threading.Event()
    append = pipeline._spool.append

    def hung_append(record: bytes) -> None:
        assert writable.wait(60)
        append(record)

    monkeypatch.setattr(pipeline._spool, "append", hung_append)
    trace = new_trace_id()
    held = [f"held-{index}" for index in range(INGEST_SLOTS)]
    with ThreadPoolExecutor(INGEST_SLOTS) as clients:
        bodies = [request(SpanSpec(trace, new_span_id(), name, 0, 1)).SerializeToString() for name in held]
        answers = [clients.submit(post, sidecar.http.address, body) for body in bodies]
        deadline = time.monotonic() + 30
        while pipeline.requests_in_progress < INGEST_SLOTS and time.monotonic() < deadline:
            time.sleep(0.01)
        assert pipeline.requests_in_progress == INGEST_SLOTS

        late = request(SpanSpec(trace, new_span_id(), "refused-http", 0, 1)).SerializeToString()
        status, headers, body = post(sidecar.http.address, late)
        assert status == 429
        assert headers["Retry-After"] == "1"
        assert b"ingest_max_wait_s" in body
        late = request(SpanSpec(trace, new_span_id(), "refused-grpc", 0, 1)).SerializeToString()
        with pytest.raises(grpc.RpcError) as caught:
            grpc_export(sidecar.grpc_address, late)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        assert dict(caught.value.trailing_metadata() or ())["retry-after"] == "1"
        assert "ingest_max_wait_s" in (caught.value.details() or "")
        assert pipeline.counters.refused_waits == 2

        writable.set()
        assert [answer.result()[0] for answer in answers] == [200] * INGEST_SLOTS
    assert stored_span_names(sidecar, trace) == held  # acknowledged = stored; refused = not
