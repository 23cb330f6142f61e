"""Plain traces assembled inside ClickHouse: one `INSERT ... SELECT` per batch of traces.

Most traces are one agent span with its tool and model spans right under it (agenttrail's own
decorators, the benchmark's generator). For those, `trajectory.build_runs` reduces to a few
per-span reads and one ordering, which ClickHouse does in C++ threads without the spans ever
becoming Python objects (assembly in Python reached about 1,000 runs per CPU-second).

`build_runs` stays the one definition of a trajectory: this query only takes a trace when it
can prove the result is the same, and every other trace is left to `build_runs`
(tests/collector/test_assembly_sql.py compares both on random traces). A trace is plain when:

- it has exactly one agent span (`conventions.role_of`), with no parent, named by attribute;
- every other span is a direct child of it, and no span id repeats (a replay's copies);
- no span is a judge's, no model span carries messages (the model's requests and results
  could change a call), no agent or model span offers tool definitions, no tool span has the
  earlier GenAI message events, no tool arguments are a framework wrapper (`kwargs`);
- token counts are plain digits, call ids printable ASCII, and every JSON-ish value is either
  JSON that ClickHouse validates or text Python would not read as JSON either (`1E400`, `NaN`,
  lone surrogates and deep nesting go to Python).

JSON values are stored as their attribute text when it is JSON (Python re-encodes it; both
read back to the same value) and as a JSON string otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable

from agenttrail.collector.conventions import (
    AGENT_NAME_OI,
    AGENT_OPERATIONS,
    CHOICE_EVENT,
    GEN_AI_COMPLETION_TOKENS,
    GEN_AI_PROMPT_TOKENS,
    GEN_AI_TOOL_DEFINITIONS,
    GEN_AI_TOOL_JSON_SCHEMA,
    LLM_COMPLETION_TOKENS,
    LLM_MODEL_NAME,
    LLM_PROMPT_TOKENS,
    LLM_REQUEST_TYPE,
    MODEL_OPERATIONS,
    TOOL_CALL_ID_OI,
    TOOL_DESCRIPTION_OI,
    TOOL_MESSAGE_EVENT,
    TOOL_PARAMETERS_OI,
    TRACELOOP_ENTITY_INPUT,
    TRACELOOP_ENTITY_NAME,
    TRACELOOP_ENTITY_OUTPUT,
    TRACELOOP_SPAN_KIND,
)
from agenttrail.instrumentation import attributes as attr

# The chunk's trace ids, loaded once per chunk into a temporary table of the assembler's own
# client (session): a 3,200-id list costs ClickHouse 11-19 ms of CPU in each statement that
# carries it, the table 6-8 ms once, and `IN (SELECT ...)` still looks the ids up by key.
# GLOBAL: on a sharded cluster the tables read are Distributed, and a plain IN would send the
# subquery to shards that have no such table; GLOBAL ships the ids (a no-op on local tables).
CHUNK_TABLE = "assembly_chunk"
CREATE_CHUNK_TABLE = f"CREATE TEMPORARY TABLE IF NOT EXISTS {CHUNK_TABLE} (TraceId String) ENGINE = Memory"


def _lit(text: str) -> str:
    """A constant of our own code as a SQL string literal (never a user value)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _set(values: Iterable[str]) -> str:
    return "(" + ", ".join(_lit(v) for v in sorted(values)) + ")"


def _a(key: str) -> str:
    return f"a[{_lit(key)}]"


def _has(key: str) -> str:
    return f"mapContains(a, {_lit(key)})"


def _first_truthy(*keys: str) -> str:
    """`attrs.get(k1) or attrs.get(k2) or ... or ''`."""
    branches = ", ".join(f"{_a(k)} != '', {_a(k)}" for k in keys)
    return f"multiIf({branches}, '')"


def _first_present(*keys: str) -> str:
    """The first key present (even empty), else NULL: `for key in keys: if key in attrs`."""
    branches = ", ".join(f"{_has(k)}, {_a(k)}" for k in keys)
    return f"multiIf({branches}, NULL)"


def _unsafe_json(text: str) -> str:
    """Text whose reading could differ between Python's json and ClickHouse's validator: not
    valid for ClickHouse but starting like JSON or not UTF-8 (ClickHouse's validator checks
    UTF-8 in what it accepts), or so deeply nested that Python's parser may give up."""
    return (
        f"(NOT isValidJSON({text}) AND (NOT isValidUTF8({text})"
        f" OR match({text}, '^[ \\\\t\\\\n\\\\r]*[-\\\\[{{\"0-9tfnNI]')))"
        f" OR (length({text}) > 500 AND countSubstrings({text}, '[') + countSubstrings({text}, '{{') > 500)"
    )


def _json(text: str) -> str:
    """The JSON of `parse_json_value(text)`: the text when it is JSON, else a JSON string."""
    return f"if(isValidJSON({text}), {text}, toJSONString({text}))"


_ROLE = f"""multiIf(
    {_a(attr.GEN_AI_OPERATION_NAME)} IN {_set(AGENT_OPERATIONS)}, 'agent',
    {_a(attr.GEN_AI_OPERATION_NAME)} = {_lit(attr.OPERATION_EXECUTE_TOOL)}, 'tool',
    {_a(attr.GEN_AI_OPERATION_NAME)} IN {_set(MODEL_OPERATIONS)}, 'model',
    upper({_a(attr.OPENINFERENCE_SPAN_KIND)}) = 'AGENT', 'agent',
    upper({_a(attr.OPENINFERENCE_SPAN_KIND)}) = 'TOOL', 'tool',
    upper({_a(attr.OPENINFERENCE_SPAN_KIND)}) = 'LLM', 'model',
    {_a(TRACELOOP_SPAN_KIND)} IN ('agent', 'workflow'), 'agent',
    {_a(TRACELOOP_SPAN_KIND)} = 'tool', 'tool',
    {_a(LLM_REQUEST_TYPE)} IN ('chat', 'completion'), 'model',
    'other')"""

_AGENT_NAME = f"""multiIf(
    {_a(attr.GEN_AI_AGENT_NAME)} != '', {_a(attr.GEN_AI_AGENT_NAME)},
    {_a(AGENT_NAME_OI)} != '', {_a(AGENT_NAME_OI)},
    {_a(TRACELOOP_SPAN_KIND)} = 'agent' AND {_a(TRACELOOP_ENTITY_NAME)} != '', {_a(TRACELOOP_ENTITY_NAME)},
    '')"""

_TOOL_NAME = f"""multiIf(
    {_a(attr.GEN_AI_TOOL_NAME)} != '', {_a(attr.GEN_AI_TOOL_NAME)},
    {_a(attr.TOOL_NAME)} != '', {_a(attr.TOOL_NAME)},
    {_a(TRACELOOP_ENTITY_NAME)} != '', {_a(TRACELOOP_ENTITY_NAME)},
    startsWith(SpanName, 'execute_tool '), substring(SpanName, 14),
    SpanName)"""

_MESSAGE_KEYS = f"""({_has(attr.GEN_AI_OUTPUT_MESSAGES)} OR {_has(attr.GEN_AI_INPUT_MESSAGES)}
    OR arrayExists(k -> startsWith(k, 'llm.output_messages.') OR startsWith(k, 'llm.input_messages.'),
                   mapKeys(a)))"""
_DEFINITION_KEYS = f"""({_has(GEN_AI_TOOL_DEFINITIONS)}
    OR arrayExists(k -> startsWith(k, 'llm.tools.'), mapKeys(a)))"""
_PLACEHOLDER_ID = "'(?i)^(<.*>|none|null|undefined|unknown|n/a|-)?$'"
_DIGITS = "'^[0-9]{1,15}$'"

# One row per stored span of the batch, with what build_runs would read from it.
_SPANS = f"""
SELECT TraceId, SpanId, ParentSpanId, ServiceName, StatusCode, Duration,
       toUnixTimestamp64Nano(Timestamp) AS start_ns, start_ns + Duration AS end_ns,
       toDateTime64(Timestamp, 6) AS start_us,
       role, a, agent_name, tool_name, call_id_raw, args, result, input_text, output_text,
       in_tokens, out_tokens, model, description, parameters,
       StatusCode = 'Error' OR has(Events.Name, 'exception') AS failed,
       if(failed, multiIf(
              {_a(attr.ERROR_TYPE)} != '', {_a(attr.ERROR_TYPE)},
              mapContains(Events.Attributes[indexOf(Events.Name, 'exception')], 'exception.type'),
              Events.Attributes[indexOf(Events.Name, 'exception')]['exception.type'],
              '_OTHER'), '') AS error_type,
       (NOT isValidUTF8(concat(SpanName, ServiceName, agent_name, tool_name, model, description,
                               {_a(attr.ERROR_TYPE)}, {_a(attr.GEN_AI_AGENT_ID)},
                               {_a(attr.GEN_AI_AGENT_VERSION)}, {_a(attr.AGENTTRAIL_TASK)},
                               {_a(attr.GEN_AI_CONVERSATION_ID)}, {_a(attr.SESSION_ID)}))
        OR {_a(attr.AGENTTRAIL_JUDGE)} = 'true'
        OR (role = 'model' AND {_MESSAGE_KEYS})
        OR (role IN ('agent', 'model') AND {_DEFINITION_KEYS})
        OR (role = 'tool' AND (has(Events.Name, {_lit(TOOL_MESSAGE_EVENT)})
                               OR has(Events.Name, {_lit(CHOICE_EVENT)})))
        OR (role = 'tool' AND NOT match(call_id_raw, '^[\\\\x21-\\\\x7e]*$'))
        OR (role = 'tool' AND args IS NOT NULL AND isValidJSON(assumeNotNull(args))
            AND JSONType(assumeNotNull(args)) = 'Object' AND JSONHas(assumeNotNull(args), 'kwargs'))
        OR arrayExists(t -> {_unsafe_json("t")}, multiIf(
            role = 'tool', arrayConcat([parameters], if(args IS NULL, [], [assumeNotNull(args)]),
                                       if(result IS NULL, [], [assumeNotNull(result)])),
            role = 'agent', arrayConcat(if(input_text IS NULL, [], [assumeNotNull(input_text)]),
                                        if(output_text IS NULL, [], [assumeNotNull(output_text)])),
            []))
        OR (role = 'model' AND NOT (match(in_tokens, {_DIGITS}) OR in_tokens = '')
                           OR NOT (match(out_tokens, {_DIGITS}) OR out_tokens = ''))
       ) AS unsafe
FROM (
    SELECT TraceId, SpanId, ParentSpanId, SpanName, ServiceName, StatusCode, Duration, Timestamp, Events.Name,
           Events.Attributes, SpanAttributes AS a, {_ROLE} AS role, {_AGENT_NAME} AS agent_name,
           {_TOOL_NAME} AS tool_name,
           {_first_truthy(attr.GEN_AI_TOOL_CALL_ID, TOOL_CALL_ID_OI)} AS call_id_raw,
           {_first_present(attr.GEN_AI_TOOL_CALL_ARGUMENTS, attr.INPUT_VALUE, TRACELOOP_ENTITY_INPUT)}
               AS args,
           {_first_present(attr.GEN_AI_TOOL_CALL_RESULT, attr.OUTPUT_VALUE, TRACELOOP_ENTITY_OUTPUT)}
               AS result,
           {_first_present(attr.INPUT_VALUE, TRACELOOP_ENTITY_INPUT)} AS input_text,
           {_first_present(attr.OUTPUT_VALUE, TRACELOOP_ENTITY_OUTPUT)} AS output_text,
           {_first_truthy(attr.GEN_AI_USAGE_INPUT_TOKENS, GEN_AI_PROMPT_TOKENS, LLM_PROMPT_TOKENS)}
               AS in_tokens,
           {_first_truthy(attr.GEN_AI_USAGE_OUTPUT_TOKENS, GEN_AI_COMPLETION_TOKENS, LLM_COMPLETION_TOKENS)}
               AS out_tokens,
           {_first_truthy(attr.GEN_AI_REQUEST_MODEL, attr.GEN_AI_RESPONSE_MODEL, LLM_MODEL_NAME)} AS model,
           {_first_truthy(attr.GEN_AI_TOOL_DESCRIPTION, TOOL_DESCRIPTION_OI)} AS description,
           {_first_truthy(GEN_AI_TOOL_JSON_SCHEMA, TOOL_PARAMETERS_OI)} AS parameters
    FROM otel_traces
    WHERE TraceId GLOBAL IN (SELECT TraceId FROM {CHUNK_TABLE})
      AND Timestamp >= {{since:DateTime64(9)}} AND Timestamp < {{until:DateTime64(9)}}
)
"""

# One tool call as build_runs stores it (ToolCall.to_json), the agent added per trace.
_CALL = """(start_ns, end_ns, SpanId, tool_name, if(failed, 'error', 'ok'),
    concat('{"name":', toJSONString(tool_name),
           ',"input":', if(args IS NULL, 'null', {args_json}),
           ',"output":', if(failed OR result IS NULL, 'null', {result_json}),
           ',"input_captured":', if(args IS NULL, 'false', 'true'),
           ',"output_captured":', if(NOT failed AND result IS NULL, 'false', 'true'),
           ',"status":', if(failed, '"error"', '"ok"'),
           ',"error_type":', toJSONString(error_type),
           ',"latency_ms":', toJSONString(Duration / 1e6),
           ',"span_id":', toJSONString(SpanId),
           ',"agent":'),
    concat(',"call_id":', toJSONString(if(match(call_id_raw, {placeholder}), '', call_id_raw)), '}'))"""
_CALL = (
    _CALL.replace("{args_json}", _json("assumeNotNull(args)"))
    .replace("{result_json}", _json("assumeNotNull(result)"))
    .replace("{placeholder}", _PLACEHOLDER_ID)
)

_TOOL_DEFINITION = """(start_ns, end_ns, SpanId, tool_name, description,
    if(isValidJSON(parameters) AND JSONType(parameters) = 'Object', parameters, 'null'))"""


def _run_json(text: str) -> str:
    """A run's Input/Output column: "" when absent or JSON null, else the value's JSON."""
    return (
        f"if({text} IS NULL OR (isValidJSON(assumeNotNull({text}))"
        f" AND JSONType(assumeNotNull({text})) = 'Null'), '', {_json(f'assumeNotNull({text})')})"
    )


# The plain traces of the batch as `trajectories` rows (ASSEMBLED_COLUMNS order). ClickHouse's
# analyzer resolves an alias again at every use, so the plain-trace filter reads the aggregates
# as columns of the subquery (in a HAVING each `root.N` was the whole `anyIf` again), and the
# JSON checks of `unsafe` are one lambda over the span's texts: ~30-40 ms less analysis a chunk.
INSERT_PLAIN = f"""
INSERT INTO trajectories (TraceId, RootSpanId, Agent, AgentId, AgentVersion, Task, ConversationId,
    ServiceName, Model, Start, LatencyS, Failure, ErrorType, Input, Output, InputTokens, OutputTokens,
    ToolCount, ToolNames, ToolStatuses, ToolCalls, SpanCount, Revision, AssembledAt, Version, IsDeleted,
    AvailableTools, Incomplete)
SELECT TraceId, root.1, root.2, root.3, root.4, root.5, root.6, root.7,
       if(empty(models), '', models[1].4), root.8, root.9, root.10, root.11, root.12, root.13,
       in_sum, out_sum,
       length(calls), arrayMap(c -> c.4, calls), arrayMap(c -> c.5, calls),
       concat('[', arrayStringConcat(arrayMap(c -> concat(c.6, toJSONString(root.2), c.7), calls), ','), ']'),
       span_count,
       transform(TraceId, {{revision_ids:Array(String)}}, {{revisions:Array(UInt32)}}, toUInt32(1)),
       {{assembled_at:DateTime64(6)}}, {{version:UInt64}}, 0,
       concat('[', arrayStringConcat(arrayMap(name -> concat(
           '{{"name":', toJSONString(name),
           ',"description":', toJSONString(arrayFirst(d -> d.4 = name, definitions).5),
           ',"parameters":', if(arrayExists(d -> d.4 = name AND d.6 != 'null', definitions),
                                arrayFirst(d -> d.4 = name AND d.6 != 'null', definitions).6, 'null'),
           '}}'), arrayDistinct(arrayMap(d -> d.4, definitions))), ','), ']'),
       0
FROM (
    SELECT TraceId,
           count() AS span_count,
           uniqExact(SpanId) AS distinct_spans,
           countIf(role = 'agent') AS agents,
           anyIf((SpanId, agent_name, a[{_lit(attr.GEN_AI_AGENT_ID)}], a[{_lit(attr.GEN_AI_AGENT_VERSION)}],
                  a[{_lit(attr.AGENTTRAIL_TASK)}],
                  {_first_truthy(attr.GEN_AI_CONVERSATION_ID, attr.SESSION_ID)}, ServiceName, start_us,
                  Duration / 1e9, toUInt8(failed), error_type, {_run_json("input_text")},
                  {_run_json("output_text")}, ParentSpanId), role = 'agent') AS root,
           groupArrayIf(ParentSpanId, role != 'agent') AS parents,
           max(unsafe) AS any_unsafe,
           sumIf(toUInt64OrZero(in_tokens), role = 'model') AS in_sum,
           sumIf(toUInt64OrZero(out_tokens), role = 'model') AS out_sum,
           arraySort(m -> (m.1, m.2, m.3), groupArrayIf((start_ns, end_ns, SpanId, model),
                                                         role = 'model' AND model != '')) AS models,
           arraySort(c -> (c.1, c.2, c.3), groupArrayIf({_CALL}, role = 'tool')) AS calls,
           arraySort(d -> (d.1, d.2, d.3), groupArrayIf({_TOOL_DEFINITION},
                                                         role = 'tool' AND description != '')) AS definitions
    FROM ({_SPANS})
    GROUP BY TraceId
)
WHERE agents = 1 AND distinct_spans = span_count AND NOT any_unsafe
  AND root.14 = '' AND root.2 != '' AND arrayAll(p -> p = root.1, parents)
"""

# Which traces of the batch the INSERT above wrote, and their run key.
WRITTEN = f"""
SELECT TraceId, RootSpanId FROM trajectories
WHERE TraceId GLOBAL IN (SELECT TraceId FROM {CHUNK_TABLE}) AND Version = {{version:UInt64}}
"""
