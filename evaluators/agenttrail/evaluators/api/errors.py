"""What the evaluation API refuses, one class per gRPC status; the service maps them at the boundary.

ApiError
├── InvalidArgument   a field of the request is missing or malformed (INVALID_ARGUMENT)
├── NotFound          what the request names is not stored (NOT_FOUND)
└── Busy              too much work in flight; retry shortly (RESOURCE_EXHAUSTED)
"""

from __future__ import annotations

from agenttrail.collector.errors import AgentTrailError


class ApiError(AgentTrailError):
    """A request the API refuses; the message names the field and says what to send instead."""


class InvalidArgument(ApiError):
    """A field of the request is missing or malformed."""


class NotFound(ApiError):
    """What the request names is not stored."""


class Busy(ApiError):
    """Too much work in flight (judge calls, a spent judge budget); the client should retry later."""
