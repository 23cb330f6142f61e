"""deploy/grafana: every dashboard query (panels, the agent variable, annotations) runs on a
store the demo filled, with the variables and the ClickHouse plugin's macros substituted, and
returns rows where the demo made some; the provisioning files point at what the dashboard uses."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from .grafana_macros import render
from .tools import DEPLOY, run

GRAFANA = DEPLOY / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "agenttrail-overview.json"


@pytest.fixture(scope="module")
def demo_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("grafana")
    now = int(time.time())
    result = run(
        sys.executable,
        Path(__file__).parent / "demo_dashboard_queries.py",
        tmp / "store",
        DASHBOARD,
        str(now - 3600),
        str(now + 3600),
        tmp / "results.json",
        timeout=1200,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(json.loads((tmp / "results.json").read_text()))


@pytest.mark.slow
@pytest.mark.timeout(1300)  # the fixture runs the demo in a subprocess (minutes on a 2-core CI machine)
def test_every_dashboard_query_runs_on_demo_data(demo_results: dict[str, Any]) -> None:
    failed = {name: r["error"] for name, r in demo_results.items() if name != "agents" and "error" in r}
    assert not failed, failed
    assert demo_results["agents"] == ["support-agent"]


@pytest.mark.slow
def test_the_panels_show_the_demo(demo_results: dict[str, Any]) -> None:
    """The demo's 120 runs, its failures after the bad release, its scores, its drift and its
    alerts show up in the panels meant for them."""
    rows = {
        name.split(" ", 2)[2] if name.startswith("panel") else name: r["rows"]
        for name, r in demo_results.items()
        if name != "agents"
    }
    assert rows["Runs"] == [["120"]]
    assert 0 < float(rows["Failure rate"][0][0]) < 1
    assert float(rows["p95 latency"][0][0]) > 0
    assert 0 <= float(rows["Mean score"][0][0]) <= 1
    assert sum(int(r[2]) for r in rows["Runs per agent"]) == 120
    assert {r[1] for r in rows["Evaluation scores"]} >= {"trajectory_exact_match"}
    assert rows["Failures by error type"]
    assert {r[1] for r in rows["Tool calls"]} >= {"lookup_order"}
    assert any(r[3] == "failure_rate" for r in rows["Drift findings"])
    assert rows["annotation Drift"]
    # Whether the demo's alerts fire before it ends depends on the machine's pace; the panels
    # must agree with each other either way.
    firing = [r for r in rows["Alert state"] if r[1] == "firing"]
    assert rows["Firing alerts"] == [[str(len(firing))]]
    assert {r[0] for r in rows["Alert state"]} <= {"support-failure-spike", "support-failure-drift"}
    assert len(rows["annotation Alerts"]) >= len(rows["Alert state"])  # each got there by a transition


def test_macro_expansion_refuses_unknown_macros() -> None:
    """The substitution the queries go through fails on what it does not know, so a panel using
    an unhandled macro cannot pass by accident."""
    assert render("SELECT 1 WHERE $__timeFilter(Start)", {}, from_s=10, to_s=20) == (
        "SELECT 1 WHERE Start >= toDateTime(10) AND Start <= toDateTime(20)"
    )
    with pytest.raises(ValueError, match="unexpanded"):
        render("SELECT $__unknownMacro(x)", {}, from_s=0, to_s=1)
    with pytest.raises(KeyError):
        render("SELECT ${nope}", {}, from_s=0, to_s=1)


def test_provisioning_matches_the_dashboard() -> None:
    """The provisioned ClickHouse data source is the plugin the dashboard's variable asks for,
    on the database the dashboard reads; the dashboard provider loads the folder compose mounts."""
    sources = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "agenttrail.yaml").read_text())
    clickhouse = next(d for d in sources["datasources"] if d["type"] == "grafana-clickhouse-datasource")
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["query"] == clickhouse["type"]
    assert variables["database"]["query"] == clickhouse["jsonData"]["defaultDatabase"]
    assert all(p["datasource"]["uid"] == "${datasource}" for p in dashboard["panels"])
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    providers = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "agenttrail.yaml").read_text())
    assert providers["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards/agenttrail"


def test_the_sidecar_dashboard_reads_the_provisioned_prometheus() -> None:
    """agenttrail-sidecar.json (its queries run against a real Prometheus in
    test_prometheus_alertmanager.py) asks for the Prometheus data source compose provisions, on
    every panel, with distinct panel ids and its own uid."""
    sources = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "agenttrail.yaml").read_text())
    prometheus = next(d for d in sources["datasources"] if d["type"] == "prometheus")
    dashboard = json.loads((GRAFANA / "dashboards" / "agenttrail-sidecar.json").read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["prometheus"]["query"] == prometheus["type"]
    assert variables["job"]["current"]["value"] == "agenttrail"  # deploy/prometheus/prometheus.yml's job
    assert all(p["datasource"]["uid"] == "${prometheus}" for p in dashboard["panels"])
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    assert dashboard["uid"] != json.loads(DASHBOARD.read_text())["uid"]
