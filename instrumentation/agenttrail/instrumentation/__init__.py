"""Agent-side instrumentation: OpenTelemetry spans for agent runs, tool calls and model calls.

    from agenttrail.instrumentation import agent, tool, configure

    @tool
    def search(query: str) -> list[str]: ...

    @agent(task="refund")
    def support_agent(question: str) -> str: ...

    configure(service_name="support-bot")  # OTLP to localhost:4317 unless OTEL_* say otherwise

Decorated code works before configure() too: spans then go to the global tracer provider.
"""

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
