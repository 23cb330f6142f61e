"""Agent-side instrumentation: decorators that emit OpenTelemetry spans for agent runs and tool calls."""
