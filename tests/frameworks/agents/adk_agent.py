"""Google ADK with its built-in OpenTelemetry spans, on an OpenAI-compatible model through LiteLLM."""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download at import

from _common import AGENT_NAME, TOOLS, run_all, setup_tracing
from google.adk.agents import LlmAgent
from google.adk.models.lite_llm import LiteLlm
from google.adk.runners import InMemoryRunner
from google.genai import types

provider = setup_tracing()
model = LiteLlm(model="openai/agent-model", api_base=os.environ["LLM_BASE_URL"], api_key="test")
agent = LlmAgent(name=AGENT_NAME, model=model, instruction="Help with orders.", tools=TOOLS)
runner = InMemoryRunner(agent=agent, app_name="shop")


def run_one(prompt: str) -> None:
    session = runner.session_service.create_session_sync(app_name="shop", user_id="user")
    message = types.Content(role="user", parts=[types.Part(text=prompt)])
    for _ in runner.run(user_id="user", session_id=session.id, new_message=message):
        pass


run_all(run_one, provider)
