"""What one span says about an agent run, whatever convention wrote it. Pure, no I/O.

`read_span` turns a stored span into `SpanFacts`: is it an agent run, a tool call or a model call,
and the facts the trajectory needs (names, arguments, result, tool call id, tokens, the tool calls a
model asked for, the tools it was offered). The assembler (trajectory.py) only joins facts; every
convention's attribute names live here:

==================  ===========================================================================
convention          read from
==================  ===========================================================================
OTel GenAI          ``gen_ai.operation.name`` (``invoke_agent``/``create_agent``, ``execute_tool``,
                    model operations ``chat``/``text_completion``/``generate_content``),
                    ``gen_ai.tool.call.arguments``/``result`` or, in earlier versions, the
                    ``gen_ai.tool.message`` (arguments) and ``gen_ai.choice`` (result) events;
                    ``gen_ai.input.messages``/``output.messages`` parts; tokens
                    ``gen_ai.usage.input_tokens`` (earlier ``prompt_tokens``)
OpenInference       ``openinference.span.kind`` AGENT/TOOL/LLM, ``agent.name``, ``tool.name``,
                    ``input.value``/``output.value``, ``llm.token_count.*``,
                    ``llm.output_messages.*.message.tool_calls.*``, ``llm.tools.*``
OpenLLMetry         ``traceloop.span.kind`` agent/workflow/tool, ``traceloop.entity.name``,
                    ``traceloop.entity.input``/``output``, ``llm.request.type`` model spans
agenttrail          its own spans are OTel GenAI + OpenInference (spec/telemetry.md)
==================  ===========================================================================

Arguments that the source did not record are ``NOT_CAPTURED`` (runs.py), which is not ``{}``. Framework
wrappers around arguments (``{"args": [], "kwargs": {...}}``, smolagents'
``sanitize_inputs_outputs``) are unwrapped; a copy that is not a JSON object after that (OpenInference
unwraps a one-argument input to its bare value) is marked lossy so the model's request for the
same call wins (spec/telemetry.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

from agenttrail.collector.runs import NOT_CAPTURED, ToolDefinition
from agenttrail.instrumentation import attributes as attr

Role: TypeAlias = Literal["agent", "tool", "model", "other"]

# Model operations of the GenAI conventions (current and earlier) whose spans carry tokens.
MODEL_OPERATIONS: Final = frozenset({"chat", "text_completion", "generate_content", "completion"})
AGENT_OPERATIONS: Final = frozenset({attr.OPERATION_INVOKE_AGENT, "create_agent"})

# Attributes beyond the agenttrail vocabulary that trajectory building reads.
AGENT_NAME_OI: Final = "agent.name"
LLM_MODEL_NAME: Final = "llm.model_name"
LLM_PROMPT_TOKENS: Final = "llm.token_count.prompt"
LLM_COMPLETION_TOKENS: Final = "llm.token_count.completion"
TOOL_CALL_ID_OI: Final = "tool_call.id"
TOOL_DESCRIPTION_OI: Final = "tool.description"
TOOL_PARAMETERS_OI: Final = "tool.parameters"
GEN_AI_TOOL_JSON_SCHEMA: Final = "gen_ai.tool.json_schema"  # Strands
GEN_AI_TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
GEN_AI_SYSTEM: Final = "gen_ai.system"
GEN_AI_PROMPT_TOKENS: Final = "gen_ai.usage.prompt_tokens"
GEN_AI_COMPLETION_TOKENS: Final = "gen_ai.usage.completion_tokens"
TRACELOOP_SPAN_KIND: Final = "traceloop.span.kind"
TRACELOOP_ENTITY_NAME: Final = "traceloop.entity.name"
TRACELOOP_ENTITY_INPUT: Final = "traceloop.entity.input"
TRACELOOP_ENTITY_OUTPUT: Final = "traceloop.entity.output"
LLM_REQUEST_TYPE: Final = "llm.request.type"

# Exact keys the assembler fetches from storage, and key prefixes (OpenInference flattens lists).
SPAN_ATTRIBUTES: Final = (
    attr.GEN_AI_OPERATION_NAME,
    attr.GEN_AI_AGENT_NAME,
    attr.GEN_AI_AGENT_ID,
    attr.GEN_AI_AGENT_VERSION,
    attr.GEN_AI_CONVERSATION_ID,
    attr.GEN_AI_TOOL_NAME,
    attr.GEN_AI_TOOL_CALL_ID,
    attr.GEN_AI_TOOL_CALL_ARGUMENTS,
    attr.GEN_AI_TOOL_CALL_RESULT,
    attr.GEN_AI_TOOL_DESCRIPTION,
    GEN_AI_TOOL_DEFINITIONS,
    attr.GEN_AI_USAGE_INPUT_TOKENS,
    attr.GEN_AI_USAGE_OUTPUT_TOKENS,
    GEN_AI_PROMPT_TOKENS,
    GEN_AI_COMPLETION_TOKENS,
    attr.GEN_AI_REQUEST_MODEL,
    attr.GEN_AI_RESPONSE_MODEL,
    attr.GEN_AI_INPUT_MESSAGES,
    attr.GEN_AI_OUTPUT_MESSAGES,
    attr.ERROR_TYPE,
    attr.OPENINFERENCE_SPAN_KIND,
    AGENT_NAME_OI,
    attr.TOOL_NAME,
    TOOL_CALL_ID_OI,
    TOOL_DESCRIPTION_OI,
    TOOL_PARAMETERS_OI,
    GEN_AI_TOOL_JSON_SCHEMA,
    attr.INPUT_VALUE,
    attr.OUTPUT_VALUE,
    attr.SESSION_ID,
    LLM_MODEL_NAME,
    LLM_PROMPT_TOKENS,
    LLM_COMPLETION_TOKENS,
    TRACELOOP_SPAN_KIND,
    TRACELOOP_ENTITY_NAME,
    TRACELOOP_ENTITY_INPUT,
    TRACELOOP_ENTITY_OUTPUT,
    LLM_REQUEST_TYPE,
    attr.AGENTTRAIL_TASK,
    attr.AGENTTRAIL_JUDGE,
)
SPAN_ATTRIBUTE_PREFIXES: Final = ("llm.output_messages.", "llm.input_messages.", "llm.tools.")
# Event attributes the assembler fetches: exceptions and the earlier GenAI message events.
EVENT_ATTRIBUTES: Final = ("exception.type", "content", "id", "message", "role")

TOOL_MESSAGE_EVENT: Final = "gen_ai.tool.message"
CHOICE_EVENT: Final = "gen_ai.choice"

_METHOD_SUFFIXES: Final = (".run", ".arun", ".invoke", ".ainvoke", ".__call__")
_WRAPPER_KEYS: Final = frozenset({"args", "kwargs", "sanitize_inputs_outputs"})
_PLACEHOLDER_ID = re.compile(r"^(<.*>|none|null|undefined|unknown|n/a|-)?$", re.IGNORECASE)
_OI_OUTPUT_CALL = re.compile(r"^llm\.output_messages\.(\d+)\.message\.tool_calls\.(\d+)\.tool_call\.(.+)$")
_OI_INPUT_MESSAGE = re.compile(r"^llm\.input_messages\.(\d+)\.message\.(role|tool_call_id|content)$")
_OI_TOOL_SCHEMA = re.compile(r"^llm\.tools\.(\d+)\.tool\.json_schema$")


@dataclass(frozen=True, slots=True)
class Requested:
    """A tool call a model span asked for (its output messages)."""

    call_id: str
    name: str
    arguments: Any  # a JSON value, or NOT_CAPTURED


@dataclass(slots=True)
class SpanFacts:
    """What one span contributes; fields not relevant to its role stay empty."""

    role: Role = "other"
    agent_name: str = ""
    named_by_attribute: bool = False  # the agent name came from an attribute, not the span name
    tool_name: str = ""
    call_id: str = ""  # placeholders (`<not specified>`) are read as no id
    arguments: Any = NOT_CAPTURED
    arguments_lossy: bool = False
    result: Any = NOT_CAPTURED
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = ""
    requested: list[Requested] = field(default_factory=list)
    results_by_id: dict[str, Any] = field(default_factory=dict)
    tools: list[ToolDefinition] = field(default_factory=list)
    conversation_id: str = ""
    input: Any = None
    output: Any = None


def parse_json_value(text: str | None) -> Any:
    """Attribute text -> JSON value when it is JSON, else the text itself (None when absent)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return text


def real_call_id(value: object) -> str:
    """The id as given, or "" for a missing id or a placeholder such as ``<not specified>``."""
    text = str(value or "").strip()
    return "" if _PLACEHOLDER_ID.match(text) else text


def role_of(attrs: Mapping[str, str], span_name: str = "") -> Role:
    """The span's part in an agent run, by the first convention that claims it."""
    operation = attrs.get(attr.GEN_AI_OPERATION_NAME, "")
    if operation in AGENT_OPERATIONS:
        return "agent"
    if operation == attr.OPERATION_EXECUTE_TOOL:
        return "tool"
    if operation in MODEL_OPERATIONS:
        return "model"
    kind = attrs.get(attr.OPENINFERENCE_SPAN_KIND, "").upper()
    if kind in ("AGENT", "TOOL", "LLM"):
        return {"AGENT": "agent", "TOOL": "tool", "LLM": "model"}[kind]  # type: ignore[return-value]
    traceloop = attrs.get(TRACELOOP_SPAN_KIND, "")
    if traceloop in ("agent", "workflow"):
        return "agent"
    if traceloop == "tool":
        return "tool"
    if attrs.get(LLM_REQUEST_TYPE) in ("chat", "completion"):
        return "model"
    return "other"


def _int(attrs: Mapping[str, str], *keys: str) -> int:
    for key in keys:
        text = attrs.get(key)
        if text:
            try:
                return int(float(text))
            except ValueError:
                continue
    return 0


def unwrap_arguments(value: Any) -> tuple[Any, bool]:
    """(arguments, lossy): framework wrappers removed; lossy when what is left is not an object.

    ``{"args": [], "kwargs": {...}}`` (OpenLLMetry, smolagents) becomes the kwargs; positional
    arguments cannot be named without the tool's signature, so such a copy is lossy.
    """
    if isinstance(value, dict) and "kwargs" in value and set(value) <= _WRAPPER_KEYS:
        args, kwargs = value.get("args") or [], value.get("kwargs")
        if isinstance(kwargs, dict) and not args:
            return kwargs, False
        return value, True
    if value is NOT_CAPTURED:
        return value, True
    return value, not isinstance(value, dict)


def _agent_name(attrs: Mapping[str, str], span_name: str) -> tuple[str, bool]:
    for key in (attr.GEN_AI_AGENT_NAME, AGENT_NAME_OI):
        if attrs.get(key):
            return attrs[key], True
    if attrs.get(TRACELOOP_SPAN_KIND) == "agent" and attrs.get(TRACELOOP_ENTITY_NAME):
        return attrs[TRACELOOP_ENTITY_NAME], True
    prefix = "invoke_agent "
    if span_name.startswith(prefix):
        return span_name[len(prefix) :], False
    # OpenInference instrumentors name an AGENT span after the method they wrap (`refund_agent.run`).
    if attrs.get(attr.OPENINFERENCE_SPAN_KIND) == "AGENT":
        for suffix in _METHOD_SUFFIXES:
            if span_name.endswith(suffix) and len(span_name) > len(suffix):
                return span_name[: -len(suffix)], False
    return span_name, False


def _tool_name(attrs: Mapping[str, str], span_name: str) -> str:
    for key in (attr.GEN_AI_TOOL_NAME, attr.TOOL_NAME, TRACELOOP_ENTITY_NAME):
        if attrs.get(key):
            return attrs[key]
    prefix = "execute_tool "
    return span_name[len(prefix) :] if span_name.startswith(prefix) else span_name


def _event(events: Sequence[Any], name: str) -> Mapping[str, str] | None:
    for event in events:
        if event.name == name:
            return event.attributes  # type: ignore[no-any-return]
    return None


def _tool_facts(facts: SpanFacts, attrs: Mapping[str, str], name: str, events: Sequence[Any]) -> None:
    facts.tool_name = _tool_name(attrs, name)
    message = _event(events, TOOL_MESSAGE_EVENT)
    facts.call_id = real_call_id(
        attrs.get(attr.GEN_AI_TOOL_CALL_ID) or attrs.get(TOOL_CALL_ID_OI) or (message or {}).get("id")
    )
    for key in (attr.GEN_AI_TOOL_CALL_ARGUMENTS, attr.INPUT_VALUE, TRACELOOP_ENTITY_INPUT):
        if key in attrs:
            facts.arguments = parse_json_value(attrs[key])
            break
    else:
        if message is not None and "content" in message:
            facts.arguments = parse_json_value(message["content"])
    facts.arguments, facts.arguments_lossy = unwrap_arguments(facts.arguments)
    for key in (attr.GEN_AI_TOOL_CALL_RESULT, attr.OUTPUT_VALUE, TRACELOOP_ENTITY_OUTPUT):
        if key in attrs:
            facts.result = parse_json_value(attrs[key])
            break
    else:
        choice = _event(events, CHOICE_EVENT)
        if choice is not None and "message" in choice:
            facts.result = parse_json_value(choice["message"])
    description = attrs.get(attr.GEN_AI_TOOL_DESCRIPTION) or attrs.get(TOOL_DESCRIPTION_OI)
    if description:
        parameters = parse_json_value(attrs.get(GEN_AI_TOOL_JSON_SCHEMA) or attrs.get(TOOL_PARAMETERS_OI))
        facts.tools.append(
            ToolDefinition(facts.tool_name, description, parameters if isinstance(parameters, dict) else None)
        )


def _parts(messages: Any) -> Iterator[dict[str, Any]]:
    """The parts of GenAI-convention messages (a JSON list of {role, parts})."""
    for message in messages if isinstance(messages, list) else []:
        parts = message.get("parts") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict):
                yield part


def _arguments_value(value: Any) -> Any:
    return parse_json_value(value) if isinstance(value, str) else value


def _model_facts(facts: SpanFacts, attrs: Mapping[str, str]) -> None:
    facts.input_tokens = _int(attrs, attr.GEN_AI_USAGE_INPUT_TOKENS, GEN_AI_PROMPT_TOKENS, LLM_PROMPT_TOKENS)
    facts.output_tokens = _int(
        attrs, attr.GEN_AI_USAGE_OUTPUT_TOKENS, GEN_AI_COMPLETION_TOKENS, LLM_COMPLETION_TOKENS
    )
    facts.model = (
        attrs.get(attr.GEN_AI_REQUEST_MODEL)
        or attrs.get(attr.GEN_AI_RESPONSE_MODEL)
        or attrs.get(LLM_MODEL_NAME)
        or ""
    )
    for part in _parts(parse_json_value(attrs.get(attr.GEN_AI_OUTPUT_MESSAGES))):
        if part.get("type") == "tool_call":
            arguments = _arguments_value(part["arguments"]) if "arguments" in part else NOT_CAPTURED
            facts.requested.append(
                Requested(real_call_id(part.get("id")), str(part.get("name") or ""), arguments)
            )
    for part in _parts(parse_json_value(attrs.get(attr.GEN_AI_INPUT_MESSAGES))):
        if part.get("type") == "tool_call_response" and real_call_id(part.get("id")):
            facts.results_by_id[real_call_id(part.get("id"))] = part.get("response")
    _openinference_messages(facts, attrs)


def _openinference_messages(facts: SpanFacts, attrs: Mapping[str, str]) -> None:
    """OpenInference's flattened `llm.output_messages.I.message.tool_calls.J.tool_call.*` and the
    tool results in `llm.input_messages.I.message.*` (role `tool`)."""
    calls: dict[tuple[int, int], dict[str, str]] = {}
    inputs: dict[int, dict[str, str]] = {}
    for key, value in attrs.items():
        if not key.startswith("llm."):
            continue
        found = _OI_OUTPUT_CALL.match(key)
        if found:
            calls.setdefault((int(found.group(1)), int(found.group(2))), {})[found.group(3)] = value
            continue
        found = _OI_INPUT_MESSAGE.match(key)
        if found:
            inputs.setdefault(int(found.group(1)), {})[found.group(2)] = value
    for _, call in sorted(calls.items()):
        arguments = call.get("function.arguments")
        facts.requested.append(
            Requested(
                real_call_id(call.get("id")),
                call.get("function.name", ""),
                NOT_CAPTURED if arguments is None else (parse_json_value(arguments) if arguments else {}),
            )
        )
    for _, message in sorted(inputs.items()):
        call_id = real_call_id(message.get("tool_call_id"))
        if message.get("role") == "tool" and call_id:
            facts.results_by_id[call_id] = parse_json_value(message.get("content"))


def tool_definitions(attrs: Mapping[str, str]) -> list[ToolDefinition]:
    """Tools offered on an agent or model span: `gen_ai.tool.definitions` or `llm.tools.*`."""
    entries: list[Any] = []
    found = parse_json_value(attrs.get(GEN_AI_TOOL_DEFINITIONS))
    if isinstance(found, list):
        entries.extend(found)
    schemas = sorted((k for k in attrs if _OI_TOOL_SCHEMA.match(k)), key=_index_key)
    entries.extend(parse_json_value(attrs[key]) for key in schemas)
    definitions = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        inner = entry.get("function")
        function: dict[str, Any] = inner if isinstance(inner, dict) else entry
        name = function.get("name")
        if not isinstance(name, str) or not name:
            continue
        parameters = function.get("parameters", function.get("input_schema"))
        definitions.append(
            ToolDefinition(
                name,
                str(function.get("description") or ""),
                parameters if isinstance(parameters, dict) else None,
            )
        )
    return definitions


def _index_key(key: str) -> tuple[int, str]:
    parts = key.split(".")
    return (int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else 0, key)


def read_span(name: str, attrs: Mapping[str, str], events: Sequence[Any] = ()) -> SpanFacts:
    """Everything the trajectory needs from one span (name, attributes, events)."""
    facts = SpanFacts(role=role_of(attrs, name))
    if facts.role == "agent":
        facts.agent_name, facts.named_by_attribute = _agent_name(attrs, name)
        facts.conversation_id = attrs.get(attr.GEN_AI_CONVERSATION_ID) or attrs.get(attr.SESSION_ID, "")
        facts.input = parse_json_value(attrs.get(attr.INPUT_VALUE, attrs.get(TRACELOOP_ENTITY_INPUT)))
        facts.output = parse_json_value(attrs.get(attr.OUTPUT_VALUE, attrs.get(TRACELOOP_ENTITY_OUTPUT)))
    elif facts.role == "tool":
        _tool_facts(facts, attrs, name, events)
    elif facts.role == "model":
        _model_facts(facts, attrs)
    if facts.role in ("agent", "model"):
        facts.tools.extend(tool_definitions(attrs))
    return facts


def merge_tools(definitions: Sequence[ToolDefinition]) -> list[ToolDefinition]:
    """One definition per tool name, in first-seen order, each field from whichever source has it."""
    merged: dict[str, ToolDefinition] = {}
    for definition in definitions:
        known = merged.get(definition.name)
        if known is None:
            merged[definition.name] = definition
        else:
            merged[definition.name] = ToolDefinition(
                definition.name,
                known.description or definition.description,
                known.parameters if known.parameters is not None else definition.parameters,
            )
    return list(merged.values())
