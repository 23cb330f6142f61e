"""uvicorn serving one ASGI app on an already-bound socket, in a thread with its own event loop.

uvicorn (with httptools, its C parser) gives chunked bodies, keep-alive, pipelining, TLS
handshakes per connection on the event loop (an idle client cannot block the port), and a
graceful shutdown that lets in-flight requests finish. This module adds what uvicorn lacks:
a deadline for the request head (a slow or silent client is disconnected) and a cap on open
connections (a connection past it gets a 503 with Retry-After and is closed).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from dataclasses import dataclass
from typing import Any

import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger(__name__)

_TOO_MANY_BODY = b"too many connections; retry in 1 second\n"
_TOO_MANY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\nretry-after: 1\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(_TOO_MANY_BODY), _TOO_MANY_BODY)
)


@dataclass(frozen=True, slots=True)
class ServerLimits:
    header_timeout_s: float = 10.0  # from connection (or first byte of a request) to its full head
    keepalive_timeout_s: float = 30.0  # idle keep-alive connections are closed after this
    max_connections: int = 1024
    shutdown_grace_s: float = 10.0  # in-flight requests get this long to finish on stop()


class _LimitedProtocol(HttpToolsProtocol):
    """httptools protocol with a request-head deadline and a connection cap."""

    header_timeout_s = 10.0
    max_connections = 1024

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            log.warning(
                "refusing a connection: %d open, the limit is %d",
                len(self.connections) - 1,
                self.max_connections,
            )
            transport.write(_TOO_MANY)
            transport.close()
            return
        self._arm_head_timer()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._head_timer is None:
            self._arm_head_timer()

    def on_headers_complete(self) -> None:
        self._cancel_head_timer()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport is not None and not self.transport.is_closing():
            log.info("closing a connection that sent no full request head within %gs", self.header_timeout_s)
            self.transport.close()


class HttpServer:
    """`app` served by uvicorn on `sock` (bound and listening); start() returns once it serves."""

    def __init__(
        self,
        app: ASGIApp,
        sock: socket.socket,
        limits: ServerLimits,
        *,
        tls_cert_file: str | None = None,
        tls_key_file: str | None = None,
    ) -> None:
        protocol = type(
            "AgentTrailHttpProtocol",
            (_LimitedProtocol,),
            {"header_timeout_s": limits.header_timeout_s, "max_connections": limits.max_connections},
        )
        self._config = uvicorn.Config(
            app,
            http=protocol,
            lifespan="off",
            access_log=False,
            log_config=None,
            server_header=False,
            ssl_certfile=tls_cert_file,
            ssl_keyfile=tls_key_file,
            timeout_keep_alive=int(max(1, limits.keepalive_timeout_s)),
            timeout_graceful_shutdown=int(max(1, limits.shutdown_grace_s)),
        )
        self._config.load()  # a bad certificate or key fails here, in the caller's thread
        self._server = uvicorn.Server(self._config)
        self._sock = sock
        self._limits = limits
        self._thread: threading.Thread | None = None
        self._failed: BaseException | None = None
        uvicorn_log = logging.getLogger("uvicorn.error")
        if uvicorn_log.level == logging.NOTSET:
            uvicorn_log.setLevel(logging.WARNING)  # its start-up chatter; warnings still show

    def start(self, timeout_s: float = 10.0) -> None:
        self._thread = threading.Thread(target=self._run, name="agenttrail-http", daemon=True)
        self._thread.start()
        done = threading.Event()
        while not self._server.started and self._thread.is_alive() and not done.wait(0.01):
            timeout_s -= 0.01
            if timeout_s <= 0:
                raise RuntimeError("the HTTP server did not start within its timeout")
        if not self._server.started:
            raise RuntimeError(f"the HTTP server stopped during start-up: {self._failed}")

    def _run(self) -> None:
        try:
            asyncio.run(self._server.serve(sockets=[self._sock]))
        except BaseException as exc:
            self._failed = exc
            log.exception("the HTTP server failed")

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        """Stop accepting, let in-flight requests finish (up to the grace period), close."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(self._limits.shutdown_grace_s + 5)
            if self._thread.is_alive():
                log.warning("the HTTP server did not stop within %.0fs", self._limits.shutdown_grace_s + 5)
        self._sock.close()
