"""The root of agenttrail's exception tree, in the bottom package so that every package reaches it.

The collector's errors (collector/errors.py, which re-exports the root) and the evaluators'
derive from `AgentTrailError`; an error that was a `ValueError` stays one too, so callers that
catch `ValueError` are unchanged. Foreign errors are translated at the boundary
(`raise ... from exc`). Only the click exceptions of the CLI (click's own tree) and the demo
agent's simulated failures (errors of the agent being observed, not of agenttrail) stand outside.
"""

from __future__ import annotations


class AgentTrailError(Exception):
    """Base of every error agenttrail raises on purpose."""
