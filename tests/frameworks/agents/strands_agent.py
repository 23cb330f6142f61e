"""Strands Agents with its built-in OpenTelemetry spans (the global tracer provider)."""

import os

from _common import AGENT_NAME, TOOLS, run_all, setup_tracing
from strands import Agent, tool
from strands.models.openai import OpenAIModel

provider = setup_tracing()
tools = [tool(f) for f in TOOLS]


def run_one(prompt: str) -> object:
    model = OpenAIModel(
        client_args={"base_url": os.environ["LLM_BASE_URL"], "api_key": "test", "max_retries": 0},
        model_id="agent-model",
    )
    return Agent(model=model, tools=tools, name=AGENT_NAME, callback_handler=None)(prompt)


run_all(run_one, provider)
