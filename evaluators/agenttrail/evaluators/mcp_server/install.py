"""The MCP server's part of `agenttrail serve`: the tools over streamable HTTP at /mcp/."""

from __future__ import annotations

import logging

from agenttrail.collector.sidecar import Sidecar
from agenttrail.evaluators.mcp_server.http import PREFIX, McpHttpApp
from agenttrail.evaluators.mcp_server.server import build_server
from agenttrail.evaluators.worker import EvaluatorConfig


def install_mcp(sidecar: Sidecar, config_file: str | None) -> None:
    """Mount the MCP app; its tools read through clients of the sidecar's store (opened on use)."""
    logging.getLogger("mcp").setLevel(logging.WARNING)  # it logs each tool error at INFO
    server = build_server(sidecar.new_store, EvaluatorConfig.from_file(config_file).metrics)
    host = sidecar.config.http.rpartition(":")[0].strip("[]") or "0.0.0.0"
    sidecar.mount_app(PREFIX, McpHttpApp(server, bearer_token=sidecar.config.bearer_token, listen_host=host))
