"""The MCP server: agenttrail's read tools and the triage prompt, on the `mcp` SDK's MCPServer.

Each tool is a typed function (the SDK builds its input schema from the annotations) that runs
one function of `queries` on the store; the SDK runs sync tools on worker threads, so a slow
query never blocks the sidecar's HTTP loop. Our errors become the tool's error text here, once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from agenttrail.collector.errors import StoreError
from agenttrail.collector.store import Store
from agenttrail.evaluators.mcp_server import queries
from agenttrail.evaluators.mcp_server.queries import SQL_MAX_ROWS, StoreReader, ToolInputError

_T = TypeVar("_T")
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)

INSTRUCTIONS = """agenttrail stores traced runs of LLM agents: each run's tool calls (its trajectory),
how it aligns with the task's reference trajectory, evaluation scores, LLM-judge verdicts with
reasons, drift findings and alerts. Start with list_agents, then search_runs / get_run for
single runs, compare_versions to find what a release changed, drift_findings and alerts for
what the monitors saw, metrics_over_time for trends, and sql (read-only SELECT) for the rest."""

TRIAGE = """Triage a spike of failures{agent_part}{since_part} using the agenttrail tools, in this order:

1. alerts (include_resolved=true): which alert fired, when, and for which agent or task.
2. metrics_over_time (by=version, bucket=1h or smaller): when the failure rate rose, and whether
   it rose with a new agent version.
3. drift_findings: which metrics the drift monitor flagged (failure_rate, latency,
   tool_distribution, scores) and their baseline against recent values.
4. compare_versions for the version before and after the rise: tools_by_error_rate_change names
   the tool whose error rate jumped; metrics shows which scores fell significantly.
5. search_runs (status=failed, the new version, the task that fails most) and get_run on two or
   three of them: the first tool call with status "error" is where the run broke; the alignment
   with the reference shows missing or extra steps; judge_verdicts give reasons.
6. If a question remains, sql on the tables trajectories, scores, drift_events, alert_history
   (SELECT only, at most 1000 rows).

Answer with: the version (or time) the failures started, the task(s) and the tool call where
runs break, the error seen there, and the evidence (run ids, rates before and after)."""


def build_server(open_store: Callable[[], Store], default_metrics: Sequence[str]) -> MCPServer:
    """The server with every tool, reading through clients that `open_store` opens on first use."""
    reader = StoreReader(open_store)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    server = MCPServer("agenttrail", instructions=INSTRUCTIONS, log_level="WARNING")
    root.handlers[:] = handlers  # its constructor configures the host's root logger: undo that
    root.setLevel(level)

    def answer(function: Callable[[Store], _T], client: str = "reads") -> _T:
        try:
            return reader.run(function, client=client)
        except ToolInputError as exc:
            raise ToolError(str(exc)) from exc
        except StoreError as exc:
            raise ToolError(f"the store refused the query: {exc}") from exc

    @server.tool(annotations=READ_ONLY)
    def list_agents() -> dict[str, Any]:
        """Every agent with its versions (oldest first): runs, failure rate, first/last run, tasks."""
        return answer(queries.list_agents)

    @server.tool(annotations=READ_ONLY)
    def search_runs(
        agent: str = "",
        version: str = "",
        task: str = "",
        status: Annotated[Literal["", "ok", "failed"], Field(description="ok or failed")] = "",
        tool: Annotated[str, Field(description="runs that called this tool")] = "",
        text: Annotated[str, Field(description="free text in the run's input or output")] = "",
        since: Annotated[str, Field(description="ISO 8601 or a duration back: 15m, 2h, 7d")] = "",
        until: str = "",
        metric: Annotated[
            str, Field(description="with below: runs whose score of this metric is below")
        ] = "",
        below: str = "",
        verdict: Annotated[str, Field(description="a judge's label, e.g. fail")] = "",
        before: Annotated[str, Field(description="next_cursor of a previous page")] = "",
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
    ) -> dict[str, Any]:
        """Runs matching every filter, newest first, each with its tool path ('!' marks a failed
        call). When nothing matches, why_empty names the filter that emptied the result."""
        filters = {
            "agent": agent,
            "version": version,
            "task": task,
            "status": status,
            "tool": tool,
            "q": text,
            "since": since,
            "until": until,
            "metric": metric,
            "below": below,
            "verdict": verdict,
            "before": before,
        }
        return answer(lambda store: queries.search_runs(store, filters, limit))

    @server.tool(annotations=READ_ONLY)
    def get_run(
        run_id: Annotated[str, Field(description="trace id, or its first 8+ hex characters")],
        full_io: Annotated[bool, Field(description="longer inputs and outputs (4000 characters)")] = False,
        spans: Annotated[bool, Field(description="also the spans, with their attributes as stored")] = False,
    ) -> dict[str, Any]:
        """One run: its tool calls in order (status, error, input, output), their alignment with the
        task's reference trajectory (matched, wrong_arguments, extra, missing...), scores, judge
        verdicts with reasons, and errors; with spans, the span tree (up to 200) and attributes.
        An unknown id answers with the closest stored ids."""
        return answer(
            lambda store: queries.get_run(store, run_id, default_metrics, full_io=full_io, spans=spans)
        )

    @server.tool(annotations=READ_ONLY)
    def compare_versions(
        agent: Annotated[str, Field(description="the agent; empty: the first with two versions")] = "",
        version_a: Annotated[str, Field(description="the baseline version; empty: the one before b")] = "",
        version_b: Annotated[str, Field(description="the version to check; empty: the newest")] = "",
    ) -> dict[str, Any]:
        """Version b against a: runs, failure rate, latency, score deltas with 95% intervals,
        tools ordered by how much their error rate changed, tools added or dropped, top paths."""
        return answer(lambda store: queries.compare(store, agent, version_a, version_b))

    @server.tool(annotations=READ_ONLY)
    def drift_findings(
        agent: str = "",
        since: Annotated[str, Field(description="how far back to look for checks: 1h, 24h, 7d")] = "24h",
        drifted_only: bool = True,
    ) -> dict[str, Any]:
        """The drift monitor's latest check of each agent, task and metric: baseline and recent
        values, p-value and effect size; only those that drifted unless drifted_only is false."""
        since_s = _duration_s(since)
        return answer(lambda store: queries.drift_findings(store, agent, since_s, drifted_only))

    @server.tool(annotations=READ_ONLY)
    def alerts(
        include_resolved: bool = False,
        history: Annotated[bool, Field(description="transitions and deliveries instead of states")] = False,
        since: str = "",
        rule: str = "",
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
    ) -> dict[str, Any]:
        """Alert state (pending and firing, or resolved too) or, with history, every transition
        and notification, newest first."""
        params = {"limit": str(limit), "all": "1" if include_resolved else "", "since": since, "rule": rule}
        given = {key: value for key, value in params.items() if value}
        return answer(lambda store: queries.alerts(store, given, history))

    @server.tool(annotations=READ_ONLY)
    def metrics_over_time(
        since: str = "24h",
        until: str = "",
        bucket: Annotated[str, Field(description="time bucket, 1m to 1d")] = "1h",
        agent: str = "",
        task: str = "",
        by: Annotated[str, Field(description="also group by, comma-separated: task, version, model")] = "",
        metric: Annotated[str, Field(description="only these score metrics, comma-separated")] = "",
    ) -> dict[str, Any]:
        """Per time bucket and agent: runs, failure rate, latency p50/p95, failing tools, mean scores."""
        params = {"since": since, "until": until, "bucket": bucket, "agent": agent, "task": task, "by": by}
        params["metric"] = metric
        given = {key: value for key, value in params.items() if value}
        return answer(lambda store: queries.metrics_over_time(store, given))

    @server.tool(annotations=READ_ONLY)
    def sql(
        query: Annotated[
            str, Field(description="one SELECT on tables such as trajectories, scores, drift_events")
        ],
        limit: Annotated[int, Field(ge=1, le=SQL_MAX_ROWS)] = 100,
    ) -> dict[str, Any]:
        """Run one read-only SELECT on the store (ClickHouse SQL), at most `limit` rows, 10 s. Writes,
        several statements, SETTINGS/FORMAT clauses, settings-exposing system tables and table
        functions reading outside the store are refused."""
        return answer(lambda store: queries.run_sql(store, query, limit), client="sql")

    @server.prompt()
    def triage_failure_spike(agent: str = "", since: str = "") -> str:
        """Walk the tools in order to find which version, task and tool call a failure spike comes from."""
        return TRIAGE.format(
            agent_part=f" of agent {agent}" if agent else "",
            since_part=f" since {since}" if since else "",
        )

    server.agenttrail_reader = reader  # type: ignore[attr-defined]  # closed by its owner
    return server


def _duration_s(text: str) -> int:
    from agenttrail.collector.queries import QueryError
    from agenttrail.evaluators.monitoring.timespec import parse_duration_s

    try:
        return parse_duration_s(text, what="since", low_s=60)
    except QueryError as exc:
        raise ToolError(str(exc)) from exc
