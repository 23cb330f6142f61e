"""deploy/compose: the file passes the compose specification's JSON schema (as vendored by
check-jsonschema), everything it mounts or builds exists, its services find each other by the
names and ports the other deploy files use, the sidecar's config loads, and the demo agent it
runs sends runs that a real sidecar assembles."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from .tools import DEPLOY, ROOT, VENV_BIN, run, tool

COMPOSE_DIR = DEPLOY / "compose"
COMPOSE = COMPOSE_DIR / "compose.yaml"


def compose() -> dict[str, Any]:
    return dict(yaml.safe_load(COMPOSE.read_text()))


def compose_schema() -> dict[str, Any]:
    import check_jsonschema

    path = Path(check_jsonschema.__file__).parent / "builtin_schemas" / "vendor" / "compose-spec.json"
    return dict(json.loads(path.read_text()))


def test_check_jsonschema_accepts_the_compose_file() -> None:
    result = run(tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", COMPOSE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_compose_schema_rejects_a_misspelt_key() -> None:
    """The same schema, through jsonschema, catches what a typo would break."""
    schema = compose_schema()
    jsonschema.validate(compose(), schema)
    broken = compose()
    broken["services"]["agenttrail"]["enviroment"] = broken["services"]["agenttrail"].pop("environment")
    with pytest.raises(jsonschema.ValidationError, match="enviroment"):
        jsonschema.validate(broken, schema)


def test_everything_mounted_or_built_exists() -> None:
    services = compose()["services"]
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (COMPOSE_DIR / source).exists(), f"{name}: mounts {source}, which is missing"
        if "build" in service:
            context = COMPOSE_DIR / service["build"]["context"]
            assert context.resolve() == ROOT
            assert (context / service["build"]["dockerfile"]).is_file()


def test_services_find_each_other() -> None:
    """Prometheus scrapes the sidecar service and alerts the alertmanager service; Grafana's data
    source and the sidecar's store name the clickhouse service; the sidecar's alertmanager
    channel names the alertmanager service."""
    services = compose()["services"]
    prometheus = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in prometheus["scrape_configs"]}
    assert jobs["agenttrail"]["static_configs"][0]["targets"] == ["agenttrail:4318"]
    assert "4318:4318" in services["agenttrail"]["ports"]
    assert prometheus["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["alertmanager:9093"]
    sources = yaml.safe_load(
        (DEPLOY / "grafana" / "provisioning" / "datasources" / "agenttrail.yaml").read_text()
    )
    hosts = {d["type"]: d.get("url") or d["jsonData"]["host"] for d in sources["datasources"]}
    assert hosts["grafana-clickhouse-datasource"] == "clickhouse"
    assert hosts["prometheus"] == "http://prometheus:9090"
    assert hosts["alertmanager"] == "http://alertmanager:9093"
    assert "@clickhouse:8123/agenttrail" in services["agenttrail"]["environment"]["AGENTTRAIL_STORE"]
    config = yaml.safe_load((COMPOSE_DIR / "agenttrail.yaml").read_text())
    assert config["alerts"]["channels"]["alertmanager"]["url"] == "http://alertmanager:9093"
    for service in services.values():
        for dependency in service.get("depends_on", []):
            assert dependency in services


def test_the_sidecar_config_loads(tmp_path: Path) -> None:
    """Every section of the compose sidecar config passes the sidecar's own parsers."""
    from agenttrail.collector.config import load_config
    from agenttrail.evaluators.composition import build_sidecar

    config_file = COMPOSE_DIR / "agenttrail.yaml"
    config = load_config({"store": str(tmp_path / "store")}, config_file=config_file, environ={})
    assert config.retention_spans_days == 7
    sidecar = build_sidecar(config, str(config_file))
    assert sidecar.workers  # the evaluator, the alert evaluator, the drift monitor ...


def test_the_clickhouse_init_script_passes_shellcheck() -> None:
    result = run(tool("shellcheck"), COMPOSE_DIR / "clickhouse" / "initdb" / "01-grafana-user.sh")
    assert result.returncode == 0, result.stdout


@pytest.mark.slow
def test_the_demo_agent_sends_runs_a_sidecar_assembles(start_sidecar: Any, tmp_path: Path) -> None:
    """demo_traffic.py (run as compose runs it, a process of its own) sends its runs over
    OTLP/gRPC; the sidecar stores and assembles every one."""
    from agenttrail.collector.queries import TrajectoryFilter, query_trajectories

    sidecar = start_sidecar()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTTRAIL_STORE", "OTEL_"))}
    env.update(
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://{sidecar.grpc_address}",
        DEMO_RUNS="6",
        DEMO_RUNS_PER_MINUTE="600",
        PATH=f"{VENV_BIN}:{env.get('PATH', '')}",
    )
    result = subprocess.run(
        [sys.executable, str(COMPOSE_DIR / "demo_traffic.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    deadline = time.monotonic() + 60
    while True:
        sidecar.wait_until_assembled(timeout_s=30)
        runs = query_trajectories(sidecar.store, TrajectoryFilter(limit=100))
        if len(runs) >= 6 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert len(runs) == 6
    assert {run["agent"] for run in runs} == {"support-agent"}
    assert all(re.fullmatch(r"[0-9a-f]{32}", run["trace_id"]) for run in runs)
