"""LangGraph's prebuilt ReAct agent on langchain-openai, with openinference-instrumentation-langchain."""

import os

from _common import AGENT_NAME, TOOLS, run_all, setup_tracing
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent
from openinference.instrumentation.langchain import LangChainInstrumentor

provider = setup_tracing()
LangChainInstrumentor().instrument(tracer_provider=provider)
model = ChatOpenAI(model="agent-model", base_url=os.environ["LLM_BASE_URL"], api_key="test", max_retries=0)
agent = create_react_agent(model, [tool(f) for f in TOOLS], name=AGENT_NAME)
run_all(lambda prompt: agent.invoke({"messages": [("user", prompt)]}), provider)
