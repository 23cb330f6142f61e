"""Criteria test fixtures: a local OpenAI-compatible server answering by request content."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from llm_server import LlmServer, Reply

Responder = Callable[[dict[str, Any]], Reply]


@pytest.fixture
def serve() -> Iterator[Callable[[Responder], LlmServer]]:
    """Start an LlmServer with a responder; stopped after the test."""
    started: list[LlmServer] = []

    def start(responder: Responder) -> LlmServer:
        server = LlmServer(responder).__enter__()
        started.append(server)
        return server

    yield start
    for server in started:
        server.__exit__(None, None, None)
