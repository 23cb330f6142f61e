"""smolagents' ToolCallingAgent with openinference-instrumentation-smolagents."""

import os

from _common import AGENT_NAME, TOOLS, run_all, setup_tracing
from openinference.instrumentation.smolagents import SmolagentsInstrumentor
from smolagents import OpenAIServerModel, ToolCallingAgent, tool

provider = setup_tracing()
SmolagentsInstrumentor().instrument(tracer_provider=provider)
model = OpenAIServerModel(
    model_id="agent-model",
    api_base=os.environ["LLM_BASE_URL"],
    api_key="test",
    client_kwargs={"max_retries": 0},
)
agent = ToolCallingAgent(tools=[tool(f) for f in TOOLS], model=model, name=AGENT_NAME, max_steps=4)
run_all(agent.run, provider)
