"""`GET /api/v1/runs`: the Runs page's query as JSON lines on a real sidecar, for scripts."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest
from trajectory_rows import agent_run, deleted_row, insert_trajectories, run_row

from agenttrail.collector.cli import SidecarApi

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_runs_route_pages_by_cursor_and_shows_latest_revisions(start_sidecar: Any) -> None:
    """Newest first, filtered, paged with `before`; a re-assembled run appears once, as its latest
    revision, and a deleted run not at all."""
    sidecar = start_sidecar()
    now = time.time()
    runs = [
        agent_run(start=now - i, trace_id=f"{i:032x}", root_span_id="00000000000000aa", agent_version="1",
                  task="faq", latency_s=0.1, failure=bool(i % 2), tools=["t"])
        for i in range(1, 8)
    ]  # fmt: skip
    late = replace(runs[1], failure=not runs[1].failure)  # run 2 re-assembled: its status changed
    assert sidecar.store is not None
    insert_trajectories(
        sidecar.store,
        [
            *(run_row(run, assembled_at=now) for run in runs),
            run_row(late, revision=2, assembled_at=now),
            deleted_row(runs[2], version=2),  # run 3 deleted by re-assembly
        ],
    )
    api = SidecarApi(f"http://{sidecar.http.address}")
    first = api.get_lines("/api/v1/runs", {"limit": "3"})
    assert [run["trace_id"] for run in first] == [f"{i:032x}" for i in (1, 2, 4)]
    assert first[1]["revision"] == 2
    assert first[1]["failure"] == 1  # the new revision failed; revision 1 had not
    cursor = f"{first[-1]['start_us']}:{first[-1]['trace_id']}:{first[-1]['root_span_id']}"
    rest = api.get_lines("/api/v1/runs", {"limit": "10", "before": cursor})
    assert [run["trace_id"] for run in rest] == [f"{i:032x}" for i in (5, 6, 7)]
    failed = api.get_lines("/api/v1/runs", {"status": "failed"})
    assert [run["trace_id"] for run in failed] == [f"{i:032x}" for i in (1, 2, 5, 7)]
    with pytest.raises(Exception, match="status must be one of ok, failed"):
        api.get_lines("/api/v1/runs", {"status": "broken"})


def test_serve_mounts_the_console_behind_its_token(start_sidecar: Any) -> None:
    """The sidecar `serve` builds serves the console at /console on its HTTP port: refused without
    the token or with a wrong one, the runs page (HTML) and its JSON with it."""
    import json
    import urllib.error
    import urllib.request

    sidecar = start_sidecar(bearer_token="console-token")
    base = f"http://{sidecar.http.address}/console"

    def get(path: str, headers: dict[str, str]) -> tuple[int, str, str]:
        request = urllib.request.Request(base + path, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.headers.get("content-type", ""), response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers.get("content-type", ""), exc.read().decode()

    for headers in ({}, {"Authorization": "Bearer wrong"}):
        assert get("/api/runs", headers)[0] == 401
    code, content_type, body = get("/runs", {"Authorization": "Bearer console-token"})
    assert (code, content_type.split(";")[0]) == (200, "text/html")
    assert "<html" in body.lower()
    code, _, body = get("/api/runs?limit=3", {"Authorization": "Bearer console-token"})
    assert code == 200
    assert json.loads(body)["runs"] == []  # an empty store: the page's query ran, nothing to show
