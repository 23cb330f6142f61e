"""The MCP tools as a coding assistant meets them: an MCP client of the `mcp` SDK connects to
`agenttrail mcp` over stdio (on the store itself, and relayed through a running `serve`) and to
`serve`'s streamable-HTTP endpoint, and answers from the demo's data, by calling tools, which
version broke refunds and at which tool call (the demo ships 1.1, whose payment gateway
declines most refunds). The demo fills one store once per module, in a process of its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from serve_processes import AGENTTRAIL, launch_serve

pytestmark = pytest.mark.timeout(900)  # the demo fill and serve's start on a loaded 2-core machine

TOKEN = "mcp-test-token"
DEMO = """
from agenttrail.evaluators.composition import build_sidecar
from agenttrail.evaluators.demo.run import run_demo
run_demo(runs=120, seed=7, keep={store!r}, serve=False, build=build_sidecar, report=None)
"""
_T = TypeVar("_T")


@pytest.fixture(scope="module")
def demo_stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The demo's store (for serve) and a copy of it that nothing holds (for stdio on the store)."""
    root = tmp_path_factory.mktemp("mcp-demo")
    store = root / "store"
    done = subprocess.run(
        [sys.executable, "-c", DEMO.format(store=str(store))],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    copy = root / "direct"
    shutil.copytree(store, copy, symlinks=True)  # chDB links tables to store/ relatively
    return store, copy


@pytest.fixture(scope="module")
def served(demo_stores: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`agenttrail serve` holding the demo's store with a bearer token; yields its MCP URL.
    Module-scoped, so serve_process (per test) does not fit: launch_serve, as it does."""
    log = tmp_path_factory.mktemp("served") / "serve.log"
    serve = launch_serve(
        log, "--store", str(demo_stores[0]), env={**os.environ, "AGENTTRAIL_BEARER_TOKEN": TOKEN}
    )
    try:
        yield f"http://{serve.wait_listening(300).http}/mcp/"
    finally:
        serve.stop(60)


def stdio(store: Path, **env: str) -> Client:
    return Client(
        StdioServerParameters(
            command=AGENTTRAIL[0], args=[*AGENTTRAIL[1:], "mcp", "--store", str(store)], env=env
        ),
        read_timeout_seconds=120,
    )


def run_with(connect: Callable[[], Any], check: Callable[[Client], Awaitable[_T]]) -> _T:
    """`check` on a connected client (a fresh event loop per test)."""

    async def main() -> _T:
        async with connect() as client:
            return await check(client)

    return anyio.run(main)


def http_client(url: str, token: str | None) -> Callable[[], Any]:
    """A connector for the SDK client over streamable HTTP, sending `token` (or no header)."""

    class Connection:
        async def __aenter__(self) -> Client:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            self.http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120))
            await self.http.__aenter__()
            self.client = Client(streamable_http_client(url, http_client=self.http))
            try:
                return await self.client.__aenter__()
            except BaseException:
                await self.http.__aexit__(None, None, None)
                raise

        async def __aexit__(self, *exc: Any) -> None:
            try:
                await self.client.__aexit__(*exc)
            finally:
                await self.http.__aexit__(None, None, None)

    return Connection


async def call(client: Client, tool: str, /, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool} {arguments}: {result.content}"
    assert result.structured_content is not None
    return result.structured_content


async def which_version_broke_refunds(client: Client) -> tuple[str, str, int, str]:
    """The question, answered by tools only: (version, tool, step in the run, the error there)."""
    agents = await call(client, "list_agents")
    agent = next(a for a in agents["agents"] if len(a["versions"]) > 1)
    versions = [v["version"] for v in agent["versions"]]
    comparison = await call(client, "compare_versions", agent=agent["agent"])
    assert comparison["b"]["version"] == versions[-1]
    assert comparison["a"]["version"] == versions[-2]
    worst = comparison["tools_by_error_rate_change"][0]
    assert worst["error_rate_b"] > worst["error_rate_a"] + 0.3, worst
    failed = await call(
        client,
        "search_runs",
        agent=agent["agent"],
        version=comparison["b"]["version"],
        task="refund",
        status="failed",
    )
    assert failed["runs"], failed
    broken = next(run for run in failed["runs"] if worst["tool"] + "!" in run["tool_path"])
    detail = await call(client, "get_run", run_id=broken["run_id"][:12])  # a prefix, as tables print
    (run,) = detail["runs"]
    first_error = next(c for c in run["tool_calls"] if c["status"] == "error")
    missing = [s["expected"] for s in run["alignment"] if s["kind"] == "missing"]
    assert "send_email" in missing  # the reference's step after the refund never ran
    return comparison["b"]["version"], first_error["name"], first_error["step"], first_error["error_type"]


ANSWER = ("1.1", "issue_refund", 2, "PaymentGatewayError")


def test_stdio_on_the_store_answers_which_version_broke_refunds(demo_stores: tuple[Path, Path]) -> None:
    """`agenttrail mcp` on a store nothing holds: version 1.1 broke refunds at issue_refund, step 2."""
    assert run_with(lambda: stdio(demo_stores[1]), which_version_broke_refunds) == ANSWER


def test_http_answers_which_version_broke_refunds(served: str) -> None:
    """serve's /mcp/ endpoint, with the bearer token, gives the same answer."""
    assert run_with(http_client(served, TOKEN), which_version_broke_refunds) == ANSWER


def test_stdio_relays_through_serve_while_it_holds_the_store(
    served: str, demo_stores: tuple[Path, Path]
) -> None:
    """While serve holds the store, `agenttrail mcp` relays to it (with the token) and answers the same."""

    async def check(client: Client) -> tuple[tuple[str, str, int, str], list[str]]:
        prompts = await client.list_prompts()
        return await which_version_broke_refunds(client), [p.name for p in prompts.prompts]

    answer, prompts = run_with(lambda: stdio(demo_stores[0], AGENTTRAIL_BEARER_TOKEN=TOKEN), check)
    assert answer == ANSWER
    assert prompts == ["triage_failure_spike"]


@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_http_refuses_a_missing_or_wrong_token(served: str, token: str | None) -> None:
    """Without the right bearer token: 401 on the wire, and the SDK client cannot connect."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    answer = httpx2.post(
        served, json=initialize, headers={**headers, "Accept": "application/json, text/event-stream"}
    )
    assert answer.status_code == 401
    assert "bearer token" in answer.json()["message"]

    async def never(client: Client) -> None:
        raise AssertionError("connected without the token")

    refused: list[Exception] = []
    try:
        run_with(http_client(served, token), never)
    except* MCPError as group:  # the SDK's task groups wrap it
        refused.extend(group.exceptions)
    assert refused


def test_errors_a_model_can_act_on(served: str) -> None:
    """An unknown run id lists the closest stored ids (which exist); an empty search names the
    filter that emptied it and the values that exist."""

    async def check(client: Client) -> None:
        unknown = await client.call_tool("get_run", {"run_id": "0123456789abcdef"})
        assert unknown.is_error
        text = unknown.content[0].text  # type: ignore[union-attr]
        assert "no run '0123456789abcdef' is stored; the closest stored ids:" in text
        closest = text.rsplit(":", 1)[1].split(", ")
        assert len(closest) == 5
        found = await call(client, "get_run", run_id=closest[0].strip())
        assert found["run_id"] == closest[0].strip()
        empty = await call(client, "search_runs", agent="support-agent", task="refnd", status="failed")
        assert empty["runs"] == []
        assert empty["why_empty"].startswith("filter task='refnd' left no runs (120 matched")
        assert "refund" in empty["why_empty"].split("known task values:")[1]
        unheard = await call(client, "search_runs", task="refund", text="no such phrase anywhere")
        assert unheard["why_empty"].startswith("filter text='no such phrase anywhere' left no runs")
        versions = await client.call_tool("compare_versions", {"agent": "support-agent", "version_a": "0.9"})
        assert versions.is_error
        assert "has no version '0.9'; its versions: 1.0, 1.1" in versions.content[0].text  # type: ignore[union-attr]

    run_with(http_client(served, TOKEN), check)


def test_get_run_gives_spans_only_when_asked(served: str) -> None:
    """A run's answer holds its trajectory, not its spans; spans=true adds the span tree with
    attributes, where the failed refund's span is marked as an error."""

    async def check(client: Client) -> tuple[dict[str, Any], dict[str, Any]]:
        failed = await call(
            client, "search_runs", version="1.1", task="refund", tool="issue_refund", status="failed"
        )
        run_id = failed["runs"][0]["run_id"]
        return await call(client, "get_run", run_id=run_id), await call(
            client, "get_run", run_id=run_id, spans=True
        )

    compact, full = run_with(http_client(served, TOKEN), check)
    assert "spans" not in compact
    assert len(full["spans"]) == full["span_count"] == compact["span_count"] > 2
    refund = [span for span in full["spans"] if "issue_refund" in span["name"]]
    assert len(refund) == 1
    assert refund[0]["error"] is True
    assert refund[0]["depth"] == 1
    assert refund[0]["attributes"]


REFUSED_SQL = [
    ("INSERT INTO trajectories (TraceId) VALUES ('x')", "only SELECT"),
    ("ALTER TABLE scores DELETE WHERE 1", "only SELECT"),
    ("SELECT count() FROM trajectories; DROP TABLE scores", "multiple statements"),
    ("SELECT name, value FROM system.settings", "system.settings"),
    ("SELECT name FROM system.users", "system.users"),
    ("SELECT * FROM system.grants", "system.grants"),
    ("SELECT getSetting('readonly')", "getSetting"),
    ("SELECT * FROM file('/etc/passwd', 'LineAsString')", "file"),
    ("SELECT 1 SETTINGS readonly = 0", "SETTINGS"),
]


def test_sql_tool_reads_with_a_row_limit_and_refuses_the_rest(served: str) -> None:
    """SELECT answers within the row limit (truncated says so); writes, several statements,
    settings-exposing system tables and outside-reaching functions are refused, changing nothing."""

    async def check(client: Client) -> None:
        counted = await call(
            client,
            "sql",
            query="SELECT AgentVersion, count() AS runs FROM trajectories FINAL "
            "WHERE IsDeleted = 0 GROUP BY AgentVersion ORDER BY AgentVersion",
        )
        assert counted["columns"] == ["AgentVersion", "runs"]
        assert counted["rows"] == [["1.0", 60], ["1.1", 60]]
        limited = await call(client, "sql", query="SELECT number FROM system.numbers", limit=7)
        assert limited["rows"] == [[n] for n in range(7)]
        assert limited["truncated"] is True
        for query, reason in REFUSED_SQL:
            result = await client.call_tool("sql", {"query": query})
            assert result.is_error, query
            assert reason in result.content[0].text, (query, result.content)  # type: ignore[union-attr]
        after = await call(client, "sql", query="SELECT count() FROM trajectories FINAL WHERE IsDeleted = 0")
        assert after["rows"] == [[120]]
        schema = await call(
            client, "sql", query="SELECT name FROM system.tables WHERE database = currentDatabase()"
        )
        assert ["scores"] in schema["rows"]

    run_with(http_client(served, TOKEN), check)


def test_the_triage_prompt_walks_tools_that_exist(served: str) -> None:
    """Every tool the triage prompt tells the model to call is one the server lists."""

    async def check(client: Client) -> tuple[str, set[str]]:
        prompt = await client.get_prompt("triage_failure_spike", {"agent": "support-agent", "since": "1h"})
        tools = await client.list_tools()
        return prompt.messages[0].content.text, {t.name for t in tools.tools}  # type: ignore[union-attr]

    text, tools = run_with(http_client(served, TOKEN), check)
    assert "of agent support-agent since 1h" in text
    named = {word.strip(":,.()") for word in text.split()} & {
        "alerts", "metrics_over_time", "drift_findings", "compare_versions", "search_runs", "get_run", "sql",
        "list_agents",
    }  # fmt: skip
    assert named >= {
        "alerts",
        "metrics_over_time",
        "drift_findings",
        "compare_versions",
        "search_runs",
        "get_run",
    }
    assert named <= tools
