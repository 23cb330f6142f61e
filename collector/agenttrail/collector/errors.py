"""The collector's exception tree. Foreign errors are translated into these at the boundary.

AgentTrailError            the root, from agenttrail.instrumentation.errors (every package reaches it)
├── ConfigError            a setting is missing or has a bad value
├── StoreError             ClickHouse refused or failed a statement
│   ├── StoreRefused       ClickHouse refused the data itself (unparsable, constraint, ...)
│   ├── StoreUnavailable   ClickHouse cannot be reached (down, wrong URL, network)
│   └── StoreLocked        the embedded store's directory is held by another process
├── OverloadedError        the collector's ingest queue is full; the client should retry
└── SpoolError             the spool cannot be written (disk full, read-only, I/O error)
"""

from __future__ import annotations

from agenttrail.instrumentation.errors import AgentTrailError

__all__ = [
    "AgentTrailError",
    "ConfigError",
    "OverloadedError",
    "SpoolError",
    "StoreError",
    "StoreLocked",
    "StoreOutOfMemory",
    "StoreRefused",
    "StoreUnavailable",
]


class ConfigError(AgentTrailError):
    """A setting is missing or has a bad value; the message names the setting and its source."""


class StoreError(AgentTrailError):
    """ClickHouse refused or failed a statement."""


class StoreRefused(StoreError):
    """ClickHouse refused the data of an insert; retrying the same data cannot succeed."""


class StoreOutOfMemory(StoreError):
    """ClickHouse refused a statement that would pass a memory limit (MEMORY_LIMIT_EXCEEDED):
    the same work in smaller pieces, or later, can succeed."""


class StoreUnavailable(StoreError):
    """ClickHouse cannot be reached; retrying later may succeed."""


class StoreLocked(StoreError):
    """The embedded store's directory is in use by another process."""


class OverloadedError(AgentTrailError):
    """The ingest queue is full (or the store is down); the client should retry after a delay."""

    def __init__(self, message: str, *, retry_after_s: int, store_down: bool) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.store_down = store_down


class SpoolError(AgentTrailError):
    """A spool write failed (disk full, read-only, I/O error); nothing of that record was kept."""
