"""The bearer token guards every route, checked over the wire against a real sidecar.

Requests go over real HTTP and gRPC connections on loopback, never into handler code, so the
checks hold whichever server implementation answers them.
"""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from otlp_builders import agent_span, new_span_id, new_trace_id, request, tool_span

from agenttrail.api.v1 import evaluation_pb2 as pb
from agenttrail.api.v1.evaluation_pb2_grpc import EvaluationServiceStub
from agenttrail.collector.auth import bearer_ok, sent_token, token_ok

pytestmark = pytest.mark.slow

TOKEN = "s3cret-t0ken"
GOOD = f"Bearer {TOKEN}"
# Header values that must be refused: none, another token, the token without its scheme, a
# prefix and an extension of the right value, and a token of the same length.
BAD: tuple[str | None, ...] = (
    None,
    "Bearer wrong",
    TOKEN,
    f"Bearer {TOKEN[:-1]}",
    f"{GOOD}x",
    f"Bearer {'x' * len(TOKEN)}",
    "",
)
# Every authenticated GET route with a query it answers 200 to (some need parameters).
GET_ROUTES: dict[str, str] = {
    "/api/v1/trajectories": "",
    "/api/v1/scores": "",
    "/api/v1/stats": "",
    "/api/v1/drift": "",
    "/api/v1/report": "",
    "/api/v1/alerts": "",
    "/api/v1/alerts/history": "",
    "/api/v1/alerts/test": "rule=spike&since=10m&step=5m",
    "/api/v1/criteria-sets": "",
    "/api/v1/decisions": "trace_id=" + "ab" * 16,
    "/api/v1/references": "",
    "/api/v1/runs": "",
    "/api/v1/judges": "",
    "/metrics": "",
}
OTLP_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def test_bearer_ok_matches_only_the_exact_header() -> None:
    """`Bearer <token>` passes; anything else fails; with no token configured everything passes."""
    assert bearer_ok(GOOD, TOKEN)
    for header in BAD:
        assert not bearer_ok(header, TOKEN), header
    for header in (*BAD, GOOD):
        assert bearer_ok(header, None)
        assert bearer_ok(header, "")


def test_several_configured_tokens_are_each_accepted_and_the_first_is_sent() -> None:
    """A comma-separated `bearer_token` (a rotation: new, old) accepts each of its tokens, blanks
    around them dropped, and nothing else: not an empty token, not the list itself; clients of
    this machine send the first. A setting of only commas accepts nothing."""
    rotating = f"new-t0ken , {TOKEN}"
    for given in ("new-t0ken", TOKEN):
        assert bearer_ok(f"Bearer {given}", rotating)
        assert token_ok(given, rotating)
    for header in (*BAD, "Bearer new-t0ken ", f"Bearer {rotating}", "Bearer ", "bearer new-t0ken"):
        assert not bearer_ok(header, rotating), header
    assert not bearer_ok("Bearer ", "a, ,b")
    assert not token_ok("", "a, ,b")
    assert not bearer_ok("Bearer ", ",")
    assert not token_ok("x", ",")
    assert token_ok("anything", None)  # no token configured: everything passes, as bearer_ok
    assert token_ok("", "")
    assert sent_token(rotating) == "new-t0ken"
    assert sent_token(TOKEN) == TOKEN
    assert sent_token(None) is None
    assert sent_token(" , ") is None


@pytest.fixture
def guarded(start_sidecar: Any, tmp_path: Path) -> Any:
    """A sidecar with a bearer token, Prometheus /metrics and an alert rule (for /alerts/test)."""
    config = {
        "metrics_export": {"interval_s": 0.2, "settle_s": 0.2},
        "alerts": {
            "channels": {"log": {"type": "log"}},
            "rules": [{"name": "spike", "kind": "failure_rate_spike", "params": {"min_runs": 10}}],
        },
    }
    path = tmp_path / "agenttrail.yaml"
    path.write_text(yaml.safe_dump(config))
    return start_sidecar(str(path), bearer_token=TOKEN)


def get(address: str, path: str, authorization: str | None) -> tuple[int, str, bytes]:
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        headers = {} if authorization is None else {"Authorization": authorization}
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read()
    finally:
        connection.close()


def post_traces(address: str, body: bytes, authorization: str | None) -> int:
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        headers = {"Content-Type": "application/x-protobuf"}
        if authorization is not None:
            headers["Authorization"] = authorization
        connection.request("POST", "/v1/traces", body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def metadata(authorization: str | None) -> tuple[tuple[str, str], ...]:
    return () if authorization is None else (("authorization", authorization),)


def test_the_route_table_covers_every_registered_route(guarded: Any) -> None:
    """A route added to the sidecar without a line here would go untested: the table must list it."""
    registered = set(guarded._read_routes) | set(guarded._page_routes)
    assert registered <= set(GET_ROUTES), f"add these routes to GET_ROUTES: {registered - set(GET_ROUTES)}"


def test_every_get_route_refuses_a_missing_or_wrong_token(guarded: Any) -> None:
    """Each read route and /metrics answers 401 without the token or with a wrong one, leaking nothing."""
    for route, query in GET_ROUTES.items():
        path = f"{route}?{query}" if query else route
        for authorization in BAD:
            status, _, body = get(guarded.http.address, path, authorization)
            assert status == 401, (path, authorization, status)
            assert b"bearer token" in body


def test_every_get_route_serves_the_right_token(guarded: Any) -> None:
    """With the token, each route answers 200 with its content; a stored run is readable."""
    trace, root = new_trace_id(), new_span_id()
    body = request(
        agent_span(trace, root, 0, 10), tool_span(trace, new_span_id(), root, "lookup", 1, 2)
    ).SerializeToString()
    assert post_traces(guarded.http.address, body, GOOD) == 200
    assert guarded.wait_until_assembled(30)
    for route, query in GET_ROUTES.items():
        path = f"{route}?{query}" if query else route
        status, content_type, _ = get(guarded.http.address, path, GOOD)
        assert status == 200, (path, status)
        expected = "text/plain" if route == "/metrics" else "application/x-ndjson"
        assert content_type.startswith(expected), (path, content_type)
    _, _, lines = get(guarded.http.address, f"/api/v1/trajectories?trace_id={trace}", GOOD)
    assert [json.loads(line)["trace_id"] for line in lines.decode().splitlines()] == [trace]


def test_health_probes_answer_without_a_token(guarded: Any) -> None:
    """/healthz and /readyz stay open to orchestrator probes (which carry no token) and say only health."""
    for path in ("/healthz", "/readyz"):
        status, _, body = get(guarded.http.address, path, None)
        assert status == 200
        assert json.loads(body)["status"] == "ok"


def test_a_rotating_sidecar_takes_the_old_and_the_new_token_everywhere(start_sidecar: Any) -> None:
    """With `bearer_token: new,old` the OTLP receivers (HTTP and gRPC), the read API and the
    console take either token, so agents move to the new one without spans refused meanwhile;
    the CLI with that setting sends the first."""
    sidecar = start_sidecar(bearer_token=f"new-t0ken,{TOKEN}")
    body = request(agent_span(new_trace_id(), new_span_id(), 0, 1)).SerializeToString()
    with grpc.insecure_channel(sidecar.grpc_address) as channel:
        export = channel.unary_unary(OTLP_EXPORT, request_serializer=None, response_deserializer=None)
        for given in ("new-t0ken", TOKEN):
            assert export(body, timeout=30, metadata=metadata(f"Bearer {given}")) == b""
        with pytest.raises(grpc.RpcError) as caught:
            export(body, timeout=30, metadata=metadata("Bearer wrong"))
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    for given, expected in (("new-t0ken", 200), (TOKEN, 200), ("wrong", 401)):
        assert post_traces(sidecar.http.address, body, f"Bearer {given}") == expected, given
        assert get(sidecar.http.address, "/api/v1/trajectories", f"Bearer {given}")[0] == expected, given
        assert get(sidecar.http.address, "/console/runs", f"Bearer {given}")[0] == expected, given
    # The CLI given the same setting sends its first token (not the list), and is served.
    from click.testing import CliRunner

    from agenttrail.evaluators.cli.main import cli

    read = ["trajectories", "--server", f"http://{sidecar.http.address}", "--format", "json"]
    result = CliRunner().invoke(cli, read, env={"AGENTTRAIL_BEARER_TOKEN": f"new-t0ken,{TOKEN}"})
    assert result.exit_code == 0, result.output


def test_metrics_auth_false_opens_metrics_alone(start_sidecar: Any, tmp_path: Path) -> None:
    """`metrics_auth: false` serves /metrics without the token (scrapers by pod annotation send
    none), and only /metrics: every other route still answers 401 without it."""
    path = tmp_path / "agenttrail.yaml"
    path.write_text(yaml.safe_dump({"metrics_export": {"interval_s": 0.2, "settle_s": 0.2}}))
    sidecar = start_sidecar(str(path), bearer_token=TOKEN, metrics_auth=False)
    status, content_type, body = get(sidecar.http.address, "/metrics", None)
    assert (status, content_type.split(";")[0]) == (200, "text/plain"), body
    assert b"agenttrail_ingest_accepted_spans_total" in body
    for route in set(GET_ROUTES) - {"/metrics"}:
        status, _, _ = get(sidecar.http.address, route, None)
        assert status == 401, route
    status, _, _ = get(sidecar.http.address, "/metrics/x", None)
    assert status != 200  # the path itself, not a prefix


def test_otlp_http_refuses_a_missing_or_wrong_token_and_stores_nothing(guarded: Any) -> None:
    """POST /v1/traces answers 401 to each wrong header and nothing of those requests is stored."""
    refused = new_trace_id()
    body = request(agent_span(refused, new_span_id(), 0, 1)).SerializeToString()
    for authorization in BAD:
        assert post_traces(guarded.http.address, body, authorization) == 401
    accepted = new_trace_id()
    good_body = request(agent_span(accepted, new_span_id(), 0, 1)).SerializeToString()
    assert post_traces(guarded.http.address, good_body, GOOD) == 200
    assert guarded.flush(30)
    rows = guarded.store.query(
        "SELECT TraceId, count() FROM otel_traces WHERE TraceId IN ({a:String}, {r:String}) GROUP BY TraceId",
        {"a": accepted, "r": refused},
    )
    assert [tuple(row) for row in rows] == [(accepted, 1)]


def test_otlp_grpc_refuses_a_missing_or_wrong_token(guarded: Any) -> None:
    """TraceService/Export is UNAUTHENTICATED for each wrong header and served with the token."""
    body = request(agent_span(new_trace_id(), new_span_id(), 0, 1)).SerializeToString()
    with grpc.insecure_channel(guarded.grpc_address) as channel:
        export = channel.unary_unary(OTLP_EXPORT, request_serializer=None, response_deserializer=None)
        for authorization in BAD:
            with pytest.raises(grpc.RpcError) as caught:
                export(body, timeout=30, metadata=metadata(authorization))
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED, authorization
        assert export(body, timeout=30, metadata=metadata(GOOD)) == b""  # an empty ExportTraceServiceResponse


def test_evaluation_service_refuses_a_missing_or_wrong_token(guarded: Any) -> None:
    """Evaluate, GetRun and ListScores are UNAUTHENTICATED for each wrong header, served with the token."""
    calls = (
        ("Evaluate", pb.EvaluateRequest(trajectory=pb.Trajectory(tool_calls=[pb.ToolCall(name="a")]))),
        ("GetRun", pb.GetRunRequest(trace_id="ab" * 16)),
        ("ListScores", pb.ListScoresRequest()),
    )
    with grpc.insecure_channel(guarded.grpc_address) as channel:
        stub = EvaluationServiceStub(channel)
        for name, message in calls:
            for authorization in BAD:
                with pytest.raises(grpc.RpcError) as caught:
                    getattr(stub, name)(message, timeout=30, metadata=metadata(authorization))
                assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED, (name, authorization)
        assert stub.Evaluate(calls[0][1], timeout=30, metadata=metadata(GOOD)).results
        with pytest.raises(grpc.RpcError) as caught:  # served: the run is looked up, and is not there
            stub.GetRun(calls[1][1], timeout=30, metadata=metadata(GOOD))
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert not stub.ListScores(calls[2][1], timeout=30, metadata=metadata(GOOD)).scores


def post_json(address: str, path: str, body: dict[str, Any], authorization: str | None) -> tuple[int, bytes]:
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if authorization is not None:
            headers["Authorization"] = authorization
        connection.request("POST", path, body=json.dumps(body).encode(), headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_the_mcp_endpoint_refuses_a_missing_or_wrong_token(guarded: Any) -> None:
    """POST /mcp/ (the MCP tools) answers 401 to every bad header, and initializes with the token."""
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
    for authorization in BAD:
        status, body = post_json(guarded.http.address, "/mcp/", initialize, authorization)
        assert status == 401, (authorization, status)
        assert b"bearer token" in body
    status, body = post_json(guarded.http.address, "/mcp/", initialize, GOOD)
    assert status == 200, body
    assert json.loads(body)["result"]["serverInfo"]["name"] == "agenttrail"
