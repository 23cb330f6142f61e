"""deploy/prometheus with the real Debian Prometheus and Alertmanager: promtool and amtool
accept the files, the rules' own unit tests pass, and on loopback Prometheus scrapes a running
sidecar's /metrics (runs sent by the OpenTelemetry SDK) while the alert the sidecar raises on
those runs shows up in Alertmanager's API."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .tools import DEPLOY, run, tool

PROM = DEPLOY / "prometheus"
SIDECAR_DASHBOARD = DEPLOY / "grafana" / "dashboards" / "agenttrail-sidecar.json"


def test_promtool_checks_the_rules_and_their_unit_tests() -> None:
    result = run(tool("promtool"), "check", "rules", PROM / "agenttrail-rules.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    result = run(tool("promtool"), "test", "rules", PROM / "agenttrail-rules.test.yml", cwd=PROM)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_checks_the_prometheus_config() -> None:
    result = run(tool("promtool"), "check", "config", PROM / "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_amtool_checks_the_alertmanager_config() -> None:
    result = run(tool("amtool"), "check-config", PROM / "alertmanager.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def start_prometheus(
    processes: Callable[..., subprocess.Popen[bytes]], tmp_path: Path, config: dict[str, Any]
) -> str:
    """Debian's Prometheus on a loopback port of its choosing with `config` (written to
    tmp_path/prometheus.yml, beside which rule files it names are looked for); its URL, once it
    says it is ready."""
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    log = tmp_path / "prometheus.log"
    processes(
        tool("prometheus"),
        f"--config.file={tmp_path / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        "--web.listen-address=127.0.0.1:0",
        log=log,
    )
    url = f"http://{listening_on(log, 'Prometheus')}"
    wait_for(lambda: urllib.request.urlopen(f"{url}/-/ready", timeout=5).status == 200, "Prometheus")
    return url


def listening_on(log: Path, what: str) -> str:
    """The address a Prometheus-family server bound for port 0, from its log (exporter-toolkit's
    `msg="Listening on" address=...`): a port chosen beforehand could be taken by a parallel test
    before the server binds it."""
    line = re.compile(r'msg="Listening on" address=(\S+)')
    found = wait_for(lambda: line.search(log.read_text()), f"{what} to listen")
    return str(found.group(1))


def wait_for(check: Callable[[], Any], what: str, timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except OSError as exc:  # not listening yet
            last = exc
        if last and not isinstance(last, OSError):
            return last
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


@pytest.fixture
def processes() -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(*args: str | Path, log: Path) -> subprocess.Popen[bytes]:
        handle = log.open("wb")
        process = subprocess.Popen([str(a) for a in args], stdout=handle, stderr=subprocess.STDOUT)
        started.append(process)
        return process

    yield start
    for process in started:
        process.terminate()
    for process in started:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def scrape(address: str) -> str:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
        return str(response.read().decode())


def send_runs(endpoint: str, *, ok: int, failed: int) -> None:
    """Agent runs with a tool call each, through the real OpenTelemetry SDK and OTLP/HTTP."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.trace import Status, StatusCode

    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")))
    tracer = provider.get_tracer("deploy-tests")
    for i in range(ok + failed):
        agent = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "support",
            "agenttrail.task": "refund",
        }
        with tracer.start_as_current_span("invoke_agent support", attributes=agent) as span:
            tool_attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order"}
            with tracer.start_as_current_span("execute_tool lookup_order", attributes=tool_attrs):
                time.sleep(0.01)
            if i >= ok:
                span.set_attribute("error.type", "RefundDeclined")
                span.set_status(Status(StatusCode.ERROR, "refund declined"))
    provider.shutdown()


@pytest.mark.slow
def test_prometheus_scrapes_the_sidecar_and_alertmanager_receives_its_alert(
    start_sidecar: Any, processes: Callable[..., subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    processes(
        tool("prometheus-alertmanager"),
        f"--config.file={PROM / 'alertmanager.yml'}",
        f"--storage.path={tmp_path / 'am'}",
        "--web.listen-address=127.0.0.1:0",
        "--cluster.listen-address=",
        log=tmp_path / "alertmanager.log",
    )
    am_address = listening_on(tmp_path / "alertmanager.log", "Alertmanager")
    am_url = f"http://{am_address}"
    config = tmp_path / "agenttrail.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "metrics_export": {"prometheus": True, "interval_s": 0.5, "settle_s": 0.2},
                "alerts": {
                    "evaluation_interval": "1s",
                    "channels": {"am": {"type": "alertmanager", "url": am_url, "resend_interval": "1m"}},
                    "rules": [
                        {
                            "name": "support-slow",
                            "kind": "latency_above",
                            "params": {"threshold_s": 0.001, "window": "15m", "min_runs": 3},
                            "severity": "warning",
                            "group_by": ["agent"],
                            "channels": ["am"],
                        }
                    ],
                },
            }
        )
    )
    sidecar = start_sidecar(str(config))
    sidecar_address = sidecar.http.address

    # The deploy files, pointed at loopback and made fast; otherwise as shipped.
    prometheus_config = yaml.safe_load((PROM / "prometheus.yml").read_text())
    prometheus_config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    prometheus_config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] = [am_address]
    # Prometheus's own job goes: its port is known only once it listens, and nothing here reads it.
    prometheus_config["scrape_configs"] = [
        job for job in prometheus_config["scrape_configs"] if job["job_name"] != "prometheus"
    ]
    jobs = {job["job_name"]: job for job in prometheus_config["scrape_configs"]}
    jobs["agenttrail"]["static_configs"][0]["targets"] = [sidecar_address]
    rules = yaml.safe_load((PROM / "agenttrail-rules.yml").read_text())
    for group in rules["groups"]:
        group["interval"] = "1s"
    (tmp_path / "agenttrail-rules.yml").write_text(yaml.safe_dump(rules))
    prom_url = start_prometheus(processes, tmp_path, prometheus_config)
    wait_for(lambda: urllib.request.urlopen(f"{am_url}/-/ready", timeout=5).status == 200, "Alertmanager")

    send_runs(f"http://{sidecar_address}", ok=4, failed=2)

    def query(promql: str) -> dict[tuple[tuple[str, str], ...], float]:
        body = get_json(f"{prom_url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}")
        return {
            tuple(sorted((k, v) for k, v in r["metric"].items() if k not in ("instance", "job"))): float(
                r["value"][1]
            )
            for r in body["data"]["result"]
        }

    runs = wait_for(
        lambda: (r := query("sum by (status) (agenttrail_runs_total)")) and sum(r.values()) == 6 and r,
        "Prometheus to scrape the six runs",
    )
    assert runs == {(("status", "ok"),): 4.0, (("status", "error"),): 2.0}
    up = query('up{job="agenttrail"}')
    assert list(up.values()) == [1.0]
    # The recording rules ran over the scraped series.
    wait_for(lambda: query("agenttrail:runs:rate5m"), "the recording rule agenttrail:runs:rate5m")
    rule_health = {
        rule["name"]: rule["health"]
        for group in get_json(f"{prom_url}/api/v1/rules")["data"]["groups"]
        for rule in group["rules"]
    }
    assert len(rule_health) == 14
    assert set(rule_health.values()) == {"ok"}, rule_health
    # Every series the rules and the sidecar dashboard read is one the sidecar serves (those two
    # appear with their first value).
    served = set(re.findall(r"^# TYPE (\S+)", scrape(sidecar_address), re.M))
    read = set(re.findall(r"\bagenttrail_\w+", (PROM / "agenttrail-rules.yml").read_text()))
    read |= set(re.findall(r"\bagenttrail_\w+", SIDECAR_DASHBOARD.read_text()))
    later = {"agenttrail_evaluation_score", "agenttrail_metrics_label_values_dropped_total"}
    assert {name for name in read if re.sub(r"_(sum|count|bucket)$", "", name) not in served | later} == set()

    def sidecar_alert() -> list[dict[str, Any]]:
        alerts = get_json(f"{am_url}/api/v2/alerts")
        return [a for a in alerts if a["labels"].get("alertname") == "support-slow"]

    (alert,) = wait_for(sidecar_alert, "the sidecar's alert in Alertmanager")
    assert alert["labels"]["agent"] == "support"
    assert alert["labels"]["severity"] == "warning"
    assert alert["status"]["state"] == "active"
    assert alert["generatorURL"].startswith("http")

    # The sidecar-health dashboard's queries, with Grafana's variables as it would fill them,
    # over spans sent after Prometheus has scraped the sidecar (so the rates have a rise to see).
    send_runs(f"http://{sidecar_address}", ok=2, failed=0)
    dashboard = json.loads(SIDECAR_DASHBOARD.read_text())
    positive = {"up", "{{instance}} accepted", "{{instance}} stored"}  # the rest stay 0 here
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"].replace("$__rate_interval", "1m").replace("$job", "agenttrail")

            def answered(expr: str = expr, legend: str = target["legendFormat"]) -> bool:
                values = query(expr).values()
                return bool(values) and (sum(values) > 0) == (legend in positive)

            wait_for(answered, f"{target['legendFormat']}: {expr}", timeout=60)


@pytest.mark.slow
def test_prometheus_scrapes_a_sidecar_with_a_token_as_the_kubernetes_manifests_set_it(
    start_sidecar: Any, processes: Callable[..., subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    """With a bearer token on the sidecar, a real Prometheus scrapes /metrics two ways: as
    prometheus-operator's ServiceMonitor sets it (the Secret's token sent, `metrics_auth` on)
    and as a pod found by its prometheus.io annotations (no token: down while /metrics needs
    one, up once the sidecar runs with the sidecar pattern's AGENTTRAIL_METRICS_AUTH)."""
    from agenttrail.collector.config import load_config

    k8s = DEPLOY / "kubernetes"
    secret = next(d for d in yaml.safe_load_all((k8s / "secret.yaml").read_text()) if d["kind"] == "Secret")
    monitor = yaml.safe_load_all((k8s / "prometheus-operator" / "monitors.yaml").read_text())
    (endpoint,) = next(d for d in monitor if d["kind"] == "ServiceMonitor")["spec"]["endpoints"]
    pod = next(
        d for d in yaml.safe_load_all((k8s / "sidecar-pattern.yaml").read_text()) if d["kind"] == "Deployment"
    )
    annotations = pod["spec"]["template"]["metadata"]["annotations"]
    container = next(c for c in pod["spec"]["template"]["spec"]["containers"] if c["name"] == "agenttrail")
    metrics_auth = load_config(
        environ={e["name"]: e["value"] for e in container["env"] if e["name"] == "AGENTTRAIL_METRICS_AUTH"}
    ).metrics_auth
    token = secret["stringData"][endpoint["authorization"]["credentials"]["key"]]
    token_file = tmp_path / "token"
    token_file.write_text(token)

    config = tmp_path / "agenttrail.yaml"
    config.write_text(yaml.safe_dump({"metrics_export": {"prometheus": True, "interval_s": 0.5}}))
    sidecar = start_sidecar(str(config), bearer_token=token, http="127.0.0.1:0")
    address = sidecar.http.address  # the restart below binds it again: Prometheus keeps one target
    jobs = [
        {  # what prometheus-operator makes of the ServiceMonitor's endpoint
            "job_name": "servicemonitor",
            "metrics_path": endpoint["path"],
            "authorization": {"type": endpoint["authorization"]["type"], "credentials_file": str(token_file)},
            "static_configs": [{"targets": [address]}],
        },
        {  # a pod found by annotation: its path, no authorization
            "job_name": "annotations",
            "metrics_path": annotations["prometheus.io/path"],
            "static_configs": [{"targets": [address]}],
        },
    ]
    prom_config = {"global": {"scrape_interval": "1s"}, "scrape_configs": jobs}
    prom_url = start_prometheus(processes, tmp_path, prom_config)

    def health() -> dict[str, tuple[str, str]]:
        targets = get_json(f"{prom_url}/api/v1/targets")["data"]["activeTargets"]
        return {t["labels"]["job"]: (t["health"], t["lastError"]) for t in targets}

    def scraped(expected: dict[str, str]) -> dict[str, tuple[str, str]] | None:
        found = health()
        return found if {job: found.get(job, ("", ""))[0] for job in expected} == expected else None

    found = wait_for(lambda: scraped({"servicemonitor": "up", "annotations": "down"}), "the first scrapes")
    assert "401" in found["annotations"][1]
    sidecar.stop()
    start_sidecar(str(config), bearer_token=token, http=address, metrics_auth=metrics_auth)
    wait_for(lambda: scraped({"servicemonitor": "up", "annotations": "up"}), "both jobs up", timeout=60)
