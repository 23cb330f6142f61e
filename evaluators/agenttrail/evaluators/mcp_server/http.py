"""The MCP server over streamable HTTP, mounted by `serve` at /mcp/ behind the sidecar's token.

The server is built on the first request (importing the SDK takes seconds: serve's start and
the sidecars that never see an MCP client do not pay it), in a thread, so the loop keeps
serving OTLP meanwhile. The SDK's session manager needs a running task group, which it
normally gets from the ASGI lifespan; the sidecar's uvicorn runs without lifespan events, so
the manager is started then too, on the server's own loop, and lives as long as that loop.
Stateless JSON mode: every request stands alone, nothing to expire.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.types import Receive, Scope, Send

from agenttrail.collector.auth import bearer_ok

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

log = logging.getLogger(__name__)

PREFIX = "/mcp"
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


class McpHttpApp:
    """ASGI app: the bearer check, then the SDK's streamable-HTTP handler."""

    def __init__(self, build: Callable[[], MCPServer], *, bearer_token: str | None, listen_host: str) -> None:
        self._build = build
        self._listen_host = listen_host
        self._token = bearer_token
        self._manager: StreamableHTTPSessionManager | None = None
        self._ready: asyncio.Event | None = None
        self._runner: asyncio.Task[None] | None = None
        self._failed: BaseException | None = None

    def _session_manager(self) -> StreamableHTTPSessionManager:
        from mcp.server.transport_security import TransportSecuritySettings

        server = self._build()
        # On loopback the SDK checks Host and Origin (DNS rebinding); a sidecar listening on other
        # interfaces is reached under names it cannot know, and its token guards it instead.
        loopback = self._listen_host in LOOPBACK
        security = None if loopback else TransportSecuritySettings(enable_dns_rebinding_protection=False)
        server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            transport_security=security,
            host=self._listen_host if loopback else "0.0.0.0",
        )
        return server.session_manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in scope["headers"]}
        if not bearer_ok(headers.get("authorization"), self._token):
            await _json(
                send, 401, {"message": "missing or wrong bearer token"}, {"www-authenticate": "Bearer"}
            )
            return
        await self._started()
        if self._failed is not None:
            await _json(send, 503, {"message": f"the MCP server is not available: {self._failed}"})
            return
        assert self._manager is not None
        await self._manager.handle_request(scope, receive, send)

    async def _started(self) -> None:
        if self._ready is None:
            self._ready = asyncio.Event()
            self._runner = asyncio.get_running_loop().create_task(self._run(self._ready))
            self._runner.add_done_callback(self._stopped)
        await self._ready.wait()

    async def _run(self, ready: asyncio.Event) -> None:
        self._manager = await asyncio.to_thread(self._session_manager)
        async with self._manager.run():
            ready.set()
            await asyncio.Event().wait()  # until the sidecar's loop ends

    def _stopped(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self._failed = task.exception()
            log.error("the MCP server failed: %s", self._failed, exc_info=self._failed)
        elif self._failed is None:
            self._failed = RuntimeError("the sidecar is stopping")
        if self._ready is not None:
            self._ready.set()


async def _json(send: Send, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    payload = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    raw += [(key.encode(), value.encode()) for key, value in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})
