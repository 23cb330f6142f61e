"""`agenttrail mcp`: the MCP server over stdio, for a coding assistant that starts it.

With nothing holding the store, the tools read it directly. While `serve` holds the embedded
store (only one process may open it), this process relays every request to serve's /mcp/
endpoint with the bearer token, so the answers are the same either way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from agenttrail.collector.store import Store


def _quiet_sdk() -> None:
    """The SDK logs every tool error at INFO; the client sees those already (stderr stays for ours)."""
    for name in ("mcp", "httpx2"):
        logging.getLogger(name).setLevel(logging.WARNING)


def serve_store(open_store: Callable[[], Store], default_metrics: Sequence[str]) -> None:
    """Serve the tools over stdin/stdout on a store this process opens."""
    from agenttrail.evaluators.mcp_server.server import build_server

    _quiet_sdk()
    server = build_server(open_store, default_metrics)
    try:
        server.run("stdio")
    finally:
        server.agenttrail_reader.close()  # type: ignore[attr-defined]


def serve_relay(url: str, token: str | None) -> None:
    """Serve over stdin/stdout, relaying tools and prompts to a sidecar's MCP endpoint."""
    _quiet_sdk()
    anyio.run(_relay, url, token)


async def _relay(url: str, token: str | None) -> None:
    import httpx2
    import mcp.types as types
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    from agenttrail.evaluators.mcp_server.server import INSTRUCTIONS

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        Client(streamable_http_client(url, http_client=http)) as remote,
    ):

        async def list_tools(_: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
            return await remote.list_tools(cursor=params.cursor if params else None)

        async def call_tool(_: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            return await remote.call_tool(params.name, params.arguments)

        async def list_prompts(
            _: Any, params: types.PaginatedRequestParams | None
        ) -> types.ListPromptsResult:
            return await remote.list_prompts(cursor=params.cursor if params else None)

        async def get_prompt(_: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
            return await remote.get_prompt(params.name, params.arguments)

        relay: Server[Any] = Server(
            "agenttrail",
            instructions=INSTRUCTIONS,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_prompts=list_prompts,
            on_get_prompt=get_prompt,
        )
        async with stdio_server() as (read_stream, write_stream):
            await relay.run(read_stream, write_stream, relay.create_initialization_options())
