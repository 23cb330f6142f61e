"""OpenLLMetry (traceloop-sdk): a hand-written tool loop on the openai client, marked with its
`@agent` and `@tool` decorators; the openai instrumentation traces the model calls."""

import json
import os

from _common import AGENT_NAME, TOOLS, run_all
from openai import OpenAI
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from traceloop.sdk import Traceloop
from traceloop.sdk.decorators import agent, tool

Traceloop.init(
    app_name=os.environ["SERVICE_NAME"],
    exporter=OTLPSpanExporter(),
    disable_batch=True,
    telemetry_enabled=False,
)
client = OpenAI(base_url=os.environ["LLM_BASE_URL"], api_key="test", max_retries=0)
traced = {f.__name__: tool(name=f.__name__)(f) for f in TOOLS}
schemas = [
    {
        "type": "function",
        "function": {"name": f.__name__, "description": f.__doc__, "parameters": {"type": "object"}},
    }
    for f in TOOLS
]


@agent(name=AGENT_NAME)
def refund_agent(prompt: str) -> str:
    messages: list[dict[str, object]] = [{"role": "user", "content": prompt}]
    for _ in range(5):
        reply = client.chat.completions.create(model="agent-model", messages=messages, tools=schemas)  # type: ignore[arg-type]
        message = reply.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            try:
                result = traced[call.function.name](**json.loads(call.function.arguments))
            except ValueError as exc:
                result = f"error: {exc}"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return ""


run_all(refund_agent, trace.get_tracer_provider())
