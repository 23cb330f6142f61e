"""Names of every span attribute agenttrail emits or reads, in one place.

The collector imports this module to rebuild trajectories, so a name changes here or nowhere.
GenAI names follow the OpenTelemetry GenAI semantic conventions; the OpenInference names are set
alongside them so Phoenix-style tools read the same spans; ``agenttrail.*`` names are our own.
"""

from typing import Final

# OpenTelemetry GenAI semantic conventions.
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_AGENT_ID: Final = "gen_ai.agent.id"
GEN_AI_AGENT_VERSION: Final = "gen_ai.agent.version"
GEN_AI_AGENT_DESCRIPTION: Final = "gen_ai.agent.description"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
ERROR_TYPE: Final = "error.type"

# Values of gen_ai.operation.name and gen_ai.tool.type.
OPERATION_INVOKE_AGENT: Final = "invoke_agent"
OPERATION_EXECUTE_TOOL: Final = "execute_tool"
OPERATION_CHAT: Final = "chat"
TOOL_TYPE_FUNCTION: Final = "function"
# error.type when the exception class has no usable name.
ERROR_TYPE_OTHER: Final = "_OTHER"

# OpenInference equivalents.
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
TOOL_NAME: Final = "tool.name"
INPUT_VALUE: Final = "input.value"
INPUT_MIME_TYPE: Final = "input.mime_type"
OUTPUT_VALUE: Final = "output.value"
OUTPUT_MIME_TYPE: Final = "output.mime_type"
SESSION_ID: Final = "session.id"

# Values of openinference.span.kind and the mime type of captured values.
SPAN_KIND_AGENT: Final = "AGENT"
SPAN_KIND_TOOL: Final = "TOOL"
SPAN_KIND_LLM: Final = "LLM"
MIME_TYPE_JSON: Final = "application/json"

# agenttrail's own.
AGENTTRAIL_TASK: Final = "agenttrail.task"
# true on the agent span of a conversation's last run: session judges judge it without waiting
AGENTTRAIL_CONVERSATION_ENDED: Final = "agenttrail.conversation.ended"
"""Which reference trajectory the evaluators compare this agent run with."""
AGENTTRAIL_TRUNCATED: Final = "agenttrail.truncated"
"""Names of the attributes on this span whose value was cut to the size cap."""
AGENTTRAIL_SCRUBBED: Final = "agenttrail.scrubbed"
"""What was scrubbed on this span, one ``"<attribute>: <what>"`` per finding: a JSON path of a
secret key (``$.creds.password``), ``key "token" in text``, or a kind (``url password``, ``bearer
token``); attributes include ``exception.message`` and ``exception.stacktrace`` of the event."""
AGENTTRAIL_JUDGE: Final = "agenttrail.judge"
"""True on agenttrail's own judge traffic, which the collector must not evaluate."""
AGENTTRAIL_JUDGE_NAME: Final = "agenttrail.judge.name"
"""Which judge made this judge call (on spans that carry ``agenttrail.judge``)."""
