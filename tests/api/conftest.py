"""A real sidecar on loopback and a real gRPC channel with the generated client stub."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from agenttrail.api.v1.evaluation_pb2_grpc import EvaluationServiceStub


@dataclass
class Api:
    sidecar: Any
    channel: grpc.Channel
    stub: EvaluationServiceStub


@pytest.fixture
def connect() -> Iterator[Callable[[str], tuple[grpc.Channel, EvaluationServiceStub]]]:
    """Open generated-stub clients to a sidecar's gRPC address; closed after the test."""
    channels: list[grpc.Channel] = []

    def open_stub(address: str) -> tuple[grpc.Channel, EvaluationServiceStub]:
        channel = grpc.insecure_channel(address)
        channels.append(channel)
        return channel, EvaluationServiceStub(channel)

    yield open_stub
    for channel in channels:
        channel.close()


@pytest.fixture
def api(start_sidecar: Callable[..., Any], connect: Callable[[str], Any]) -> Api:
    """A sidecar with the evaluator installed, as `serve` builds it, and a client to its API."""
    sidecar = start_sidecar()
    channel, stub = connect(sidecar.grpc_address)
    return Api(sidecar, channel, stub)
