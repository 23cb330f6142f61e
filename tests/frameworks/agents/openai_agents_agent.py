"""OpenAI Agents SDK with openinference-instrumentation-openai-agents."""

import os

from _common import AGENT_NAME, TOOLS, run_all, setup_tracing
from agents import Agent, Runner, function_tool, set_default_openai_api, set_default_openai_client
from openai import AsyncOpenAI
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

provider = setup_tracing()
OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
set_default_openai_client(AsyncOpenAI(base_url=os.environ["LLM_BASE_URL"], api_key="test", max_retries=0))
set_default_openai_api("chat_completions")
agent = Agent(
    name=AGENT_NAME,
    instructions="Help with orders.",
    model="agent-model",
    tools=[function_tool(f) for f in TOOLS],
)
run_all(lambda prompt: Runner.run_sync(agent, prompt), provider)
