"""A small agent for runnable-mode tests, traced with agenttrail's decorators."""

from __future__ import annotations

import asyncio
import contextlib

from agenttrail.instrumentation import agent, tool

NOT_CALLABLE = 42


@tool
def search(q: str) -> list[str]:
    """Look the query up."""
    return [q.upper()]


@tool
async def fetch(url: str) -> str:
    """Fetch a page."""
    await asyncio.sleep(0)
    return f"page {url}"


@tool
def explode(reason: str) -> None:
    """A tool that always fails."""
    raise RuntimeError(reason)


@agent
def run(query: str) -> str:
    """Search once; raise for the query 'boom'."""
    if query == "boom":
        raise ValueError("boom")
    return search(q=query)[0]


@agent
async def arun(query: str) -> str:
    """Fetch, then search."""
    page = await fetch(url=query)
    return f"{search(q=query)[0]} / {page}"


@agent(name="helper")
def helper(query: str) -> str:
    """A sub-agent."""
    return search(q=f"{query}!")[0]


@agent
def planner(query: str) -> str:
    """Searches, then delegates to a sub-agent whose calls belong to this run."""
    search(q=query)
    return helper(query)


def plain(query: str) -> str:
    """Not decorated as an agent: its tool calls still make the run."""
    with contextlib.suppress(RuntimeError):
        explode(reason=query)
    return search(q=query)[0]
