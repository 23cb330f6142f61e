"""Read trajectories back: the one query behind `agenttrail trajectories` and the HTTP API.

The JSON shape of a trajectory is a contract scripts rely on (see `trajectory_to_json`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from agenttrail.collector.errors import AgentTrailError

if TYPE_CHECKING:
    from agenttrail.collector.store import Store

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_HEX_ID = re.compile(r"^[0-9a-f]{8,32}$")  # a trace id or a prefix of one, as tables print


class QueryError(AgentTrailError, ValueError):
    """A filter value could not be understood; the message says which and how to write it."""


def parse_time(value: str, *, now: datetime | None = None) -> datetime:
    """`2026-11-21T10:00:00Z`, `2026-11-21`, or a duration back from now such as `15m`, `2h`, `7d`."""
    text = value.strip()
    match = _DURATION.match(text)
    if match:
        amount, unit = float(match.group(1)), match.group(2)
        return (now or datetime.now(UTC)) - timedelta(seconds=amount * _UNITS[unit])
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise QueryError(
            f"cannot read time {value!r}: use ISO 8601 (2026-11-21T10:00:00Z) or a duration like 15m, 2h, 7d"
        ) from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class TrajectoryFilter:
    since: datetime | None = None
    until: datetime | None = None
    agent: str | None = None
    task: str | None = None
    trace_id: str | None = None
    limit: int = 1000

    def __post_init__(self) -> None:
        if self.trace_id is not None and not _HEX_ID.match(self.trace_id):
            raise QueryError(
                f"trace id {self.trace_id!r} must be 32 lowercase hex characters, or a prefix of 8 or more"
            )
        if self.limit < 1:
            raise QueryError(f"limit must be at least 1, got {self.limit}")

    def to_params(self) -> dict[str, str]:
        """The HTTP query-string form (inverse of `from_params`)."""
        params: dict[str, str] = {"limit": str(self.limit)}
        if self.since:
            params["since"] = self.since.isoformat()
        if self.until:
            params["until"] = self.until.isoformat()
        for key in ("agent", "task", "trace_id"):
            value = getattr(self, key)
            if value:
                params[key] = value
        return params

    def where_clauses(self, start_column: str) -> tuple[list[str], dict[str, Any]]:
        """SQL conditions (bound parameters only) for a table whose run start is `start_column`."""
        clauses: list[str] = []
        params: dict[str, Any] = {"limit": self.limit}
        if self.since:
            clauses.append(f"{start_column} >= {{since:DateTime64(6)}}")
            params["since"] = f"{self.since.timestamp():.6f}"
        if self.until:
            clauses.append(f"{start_column} < {{until:DateTime64(6)}}")
            params["until"] = f"{self.until.timestamp():.6f}"
        for column, key in (("Agent", "agent"), ("Task", "task"), ("TraceId", "trace_id")):
            value = getattr(self, key)
            if value:
                prefix = key == "trace_id" and len(value) < 32
                clauses.append(
                    f"startsWith({column}, {{{key}:String}})" if prefix else f"{column} = {{{key}:String}}"
                )
                params[key] = value
        return clauses, params

    @classmethod
    def from_params(cls, params: dict[str, str]) -> TrajectoryFilter:
        unknown = set(params) - {"since", "until", "agent", "task", "trace_id", "limit"}
        if unknown:
            raise QueryError(
                f"unknown filter(s) {sorted(unknown)}; use since, until, agent, task, trace_id, limit"
            )
        try:
            limit = int(params.get("limit", "1000"))
        except ValueError as exc:
            raise QueryError(f"limit must be a whole number, got {params['limit']!r}") from exc
        return cls(
            since=parse_time(params["since"]) if params.get("since") else None,
            until=parse_time(params["until"]) if params.get("until") else None,
            agent=params.get("agent") or None,
            task=params.get("task") or None,
            trace_id=params.get("trace_id") or None,
            limit=limit,
        )


# What `trajectory_to_json` reads, in its order (shared with the judge worker's queue).
TRAJECTORY_JSON_COLUMNS = """TraceId, Agent, Task, ConversationId, toUnixTimestamp64Micro(Start), LatencyS,
Failure, ErrorType, Input, Output, ToolCalls, RootSpanId, InputTokens, OutputTokens, Revision,
AvailableTools, Incomplete, AgentVersion"""


def query_trajectories(store: Store, where: TrajectoryFilter) -> list[dict[str, Any]]:
    """Latest version of each run matching the filter, newest first."""
    clauses, params = where.where_clauses("Start")
    clauses.insert(0, "IsDeleted = 0")
    sql = (
        f"SELECT {TRAJECTORY_JSON_COLUMNS} FROM trajectories FINAL WHERE {' AND '.join(clauses)} "
        "ORDER BY Start DESC, TraceId LIMIT {limit:UInt32}"
    )
    return [trajectory_to_json(row) for row in store.query(sql, params)]


def _json_or_none(text: str) -> Any:
    return json.loads(text) if text else None


def iso_utc(micros: int) -> str:
    """Epoch microseconds as ISO 8601 UTC with a `Z`, the form every JSON contract uses."""
    return datetime.fromtimestamp(micros / 1e6, tz=UTC).isoformat().replace("+00:00", "Z")


def trajectory_to_json(row: tuple[Any, ...]) -> dict[str, Any]:
    """The `--format json` contract: one object per run."""
    return {
        "trace_id": row[0],
        "agent": row[1],
        "task": row[2],
        "conversation_id": row[3],
        "start": iso_utc(row[4]),
        "latency_s": row[5],
        "failure": int(row[6]),
        "error_type": row[7],
        "input": _json_or_none(row[8]),
        "output": _json_or_none(row[9]),
        "tool_calls": json.loads(row[10]) if row[10] else [],
        "root_span_id": row[11],
        "input_tokens": int(row[12]),
        "output_tokens": int(row[13]),
        "revision": int(row[14]),
        # [{"name", "description", "parameters" (JSON schema or null)}], from the trace's spans
        "available_tools": json.loads(row[15]) if row[15] else [],
        # the run's root span never arrived: an agent span that never ended, closed by the quiet period
        "incomplete": bool(row[16]),
        "agent_version": row[17],  # the agent span's gen_ai.agent.version; "" without one
    }
