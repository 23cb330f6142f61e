"""Agent-side instrumentation: OpenTelemetry spans for agent runs, tool calls and model calls.

    from agenttrail.instrumentation import agent, tool, configure

    @tool
    def search(query: str) -> list[str]: ...

    @agent(task="refund")
    def support_agent(question: str) -> str: ...

    configure(service_name="support-bot")  # OTLP to localhost:4317 unless OTEL_* say otherwise

Decorated code works before configure() too: spans then go to the global tracer provider.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agenttrail.instrumentation._lazy import lazy_attributes

if TYPE_CHECKING:
    from agenttrail.instrumentation import attributes
    from agenttrail.instrumentation._decorators import (
        AgentRun,
        ChatCall,
        ToolCall,
        agent,
        agent_run,
        chat,
        end_conversation,
        set_conversation_id,
        set_output,
        set_task,
        tool,
        tool_call,
    )
    from agenttrail.instrumentation._setup import configure, force_flush, shutdown

# Loaded on first use: the sidecar imports `agenttrail.instrumentation.errors` (the root of every
# error), which runs this file; the OpenTelemetry SDK should load only where spans are made.
_LAZY = {
    "attributes": "agenttrail.instrumentation.attributes",  # a submodule
    "AgentRun": "agenttrail.instrumentation._decorators",
    "ChatCall": "agenttrail.instrumentation._decorators",
    "ToolCall": "agenttrail.instrumentation._decorators",
    "agent": "agenttrail.instrumentation._decorators",
    "agent_run": "agenttrail.instrumentation._decorators",
    "chat": "agenttrail.instrumentation._decorators",
    "end_conversation": "agenttrail.instrumentation._decorators",
    "set_conversation_id": "agenttrail.instrumentation._decorators",
    "set_output": "agenttrail.instrumentation._decorators",
    "set_task": "agenttrail.instrumentation._decorators",
    "tool": "agenttrail.instrumentation._decorators",
    "tool_call": "agenttrail.instrumentation._decorators",
    "configure": "agenttrail.instrumentation._setup",
    "force_flush": "agenttrail.instrumentation._setup",
    "shutdown": "agenttrail.instrumentation._setup",
}


__getattr__ = lazy_attributes(__name__, _LAZY)

__all__ = [
    "AgentRun",
    "ChatCall",
    "ToolCall",
    "agent",
    "agent_run",
    "attributes",
    "chat",
    "configure",
    "end_conversation",
    "force_flush",
    "set_conversation_id",
    "set_output",
    "set_task",
    "shutdown",
    "tool",
    "tool_call",
]
