"""pydantic-ai with its built-in instrumentation (`Agent.instrument_all()`)."""

import os

from _common import AGENT_NAME, TOOLS, run_all, setup_tracing
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

provider = setup_tracing()
Agent.instrument_all()
model = OpenAIChatModel(
    "agent-model", provider=OpenAIProvider(base_url=os.environ["LLM_BASE_URL"], api_key="test")
)
agent = Agent(model, name=AGENT_NAME, tools=TOOLS)
run_all(lambda prompt: agent.run_sync(prompt), provider)
