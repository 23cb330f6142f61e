"""The MCP server's part of `agenttrail serve`: the tools over streamable HTTP at /mcp/."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from agenttrail.collector.sidecar import Sidecar
from agenttrail.evaluators.mcp_server.http import PREFIX, McpHttpApp

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mcp.server.mcpserver import MCPServer


def install_mcp(sidecar: Sidecar, metrics: Sequence[str]) -> None:
    """Mount the MCP app (its tools score with `metrics`, the online evaluator's); the server
    (and the SDK) load on its first request."""

    def build() -> MCPServer:
        from agenttrail.evaluators.mcp_server.server import build_server

        logging.getLogger("mcp").setLevel(logging.WARNING)  # it logs each tool error at INFO
        return build_server(sidecar.new_store, metrics)  # its tools open store clients on use

    host = sidecar.config.http.rpartition(":")[0].strip("[]") or "0.0.0.0"
    app = McpHttpApp(build, bearer_token=sidecar.config.bearer_token, listen_host=host)
    sidecar.mount_app(PREFIX, app, announce="MCP (streamable HTTP)")
