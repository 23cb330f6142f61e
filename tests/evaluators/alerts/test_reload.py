"""SIGHUP to a real `agenttrail serve` process, or its admin HTTP route (which `agenttrail alerts
reload` calls), reloads the alerts section, as Prometheus and Alertmanager reload theirs: new
rules and channels take effect, a kept rule's firing alert is not announced again, and a section
that does not parse is refused while the rules in force run on."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from otlp_builders import BASE_NS, agent_span, new_span_id, new_trace_id, request
from serve_processes import AGENTTRAIL, ServeProcess, StartServe, call_json

from .webhook_server import WebhookServer

pytestmark = pytest.mark.timeout(600)  # a serve start-up can take minutes on a loaded machine


def slow_rule(name: str, channel: str) -> dict[str, Any]:
    """Fires at once on any run slower than 10 ms in the last hour."""
    return {
        "name": name,
        "kind": "latency_above",
        "params": {"threshold_s": 0.01, "min_runs": 1, "window": "1h"},
        "channels": [channel],
    }


def write_alerts(config: Path, channels: dict[str, str], rules: list[dict[str, Any]]) -> None:
    section = {
        "evaluation_interval": "1s",
        "channels": {name: {"type": "webhook", "url": url} for name, url in channels.items()},
        "rules": rules,
    }
    config.write_text(yaml.safe_dump({"alerts": section}))


def get(http: str, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{http}{path}", timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def wait_for_log(serve: ServeProcess, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in serve.output():
            return
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not in serve's log:\n{serve.output()}")


def send_slow_run(grpc_address: str, token: str | None = None) -> None:
    """One 100 ms run that starts now (the spans' times are offsets from BASE_NS)."""
    now_ms = (time.time_ns() - BASE_NS) / 1e6
    body = request(agent_span(new_trace_id(), new_span_id(), now_ms, now_ms + 100)).SerializeToString()
    with grpc.insecure_channel(grpc_address) as channel:
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        export(body, timeout=30, metadata=(("authorization", f"Bearer {token}"),) if token else None)


def test_sighup_reloads_alert_rules_and_channels_keeping_the_state_of_kept_rules(
    tmp_path: Path, serve_process: StartServe, webhook: WebhookServer
) -> None:
    """After SIGHUP the new rule fires to the new channel, the kept rule's firing alert is not
    posted again, `/api/v1/alerts/test` and the console know the new rule, and no restart warning
    names alerts; a broken edit is refused (the log names the key) and the rules stay in force."""
    config, store = tmp_path / "agenttrail.yaml", tmp_path / "store"
    first = {"hook": webhook.url("/first")}
    write_alerts(config, first, [slow_rule("slow", "hook")])
    serve = serve_process("--config", str(config), "--store", str(store), "--quiet-period-s", "0.3")
    send_slow_run(serve.grpc)
    (fired,) = webhook.wait_for("/first", 1, timeout=120)
    assert (fired["rule"], fired["kind"]) == ("slow", "firing")

    both = {**first, "pager": webhook.url("/second")}
    write_alerts(config, both, [slow_rule("slow", "hook"), slow_rule("slower", "pager")])
    serve.process.send_signal(signal.SIGHUP)
    (added,) = webhook.wait_for("/second", 1, timeout=60)
    assert (added["rule"], added["kind"]) == ("slower", "firing")
    time.sleep(3)  # three more evaluations: the kept rule's alert stays firing, announced once
    assert len(webhook.bodies("/first")) == 1
    status, body = get(serve.http, "/api/v1/alerts/test?rule=slower&since=1h")
    assert status == 200, body
    status, page = get(serve.http, "/console/alerts")
    assert status == 200, page
    assert "slower" in page

    broken = slow_rule("slower", "pager") | {"for": "soon"}
    write_alerts(config, both, [slow_rule("slow", "hook"), broken])
    serve.process.send_signal(signal.SIGHUP)
    wait_for_log(serve, "reload refused")
    assert serve.process.poll() is None, "serve keeps running"
    status, body = get(serve.http, "/api/v1/alerts/test?rule=slower&since=1h")
    assert status == 200, body  # the section in force is still the last good one
    assert serve.stop() == 0
    logged = serve.output()
    refusal = next(line for line in logged.splitlines() if "reload refused" in line)
    assert "alerts.rules[slower].for: 'soon' is not a duration" in refusal, refusal
    assert "alerts section reloaded: rules added slower; channels added pager" in logged
    assert "changed since serve started" not in logged


TOKEN = "s3cret-reload-token"


def post_reload(http: str, token: str | None = TOKEN) -> tuple[int, dict[str, Any]]:
    """POST /api/v1/admin/alerts/reload with the bearer token; (status, JSON answer)."""
    status, answer = call_json(http, "/api/v1/admin/alerts/reload", {}, token)
    return status, answer


def test_alerts_reload_over_http_and_the_cli_without_a_signal(
    tmp_path: Path, serve_process: StartServe, webhook: WebhookServer
) -> None:
    """A serve that cannot be signalled (another user, a container) takes an edited alerts section
    through its admin HTTP: POST /api/v1/admin/alerts/reload needs the bearer token, answers what
    changed, and `agenttrail alerts reload` sends it; a broken edit is 422 naming file, rule and
    key (the CLI exits 3 with it) and the rules in force keep firing."""
    config, store = tmp_path / "agenttrail.yaml", tmp_path / "store"
    first = {"hook": webhook.url("/first")}
    write_alerts(config, first, [slow_rule("slow", "hook")])
    env = {**os.environ, "AGENTTRAIL_BEARER_TOKEN": TOKEN}
    serve = serve_process("--config", str(config), "--store", str(store), "--quiet-period-s", "0.3", env=env)
    status, answer = post_reload(serve.http)
    assert (status, answer["summary"]) == (200, "nothing changed"), answer
    assert answer["config_file"] == str(config.resolve())

    both = {**first, "pager": webhook.url("/second")}
    write_alerts(config, both, [slow_rule("slow", "hook"), slow_rule("slower", "pager")])
    assert post_reload(serve.http, token=None)[0] == 401
    assert post_reload(serve.http, token="wrong")[0] == 401
    reloaded = run_cli("alerts", "reload", "--store", str(store), "--config", str(config), env=env)
    assert reloaded.returncode == 0, reloaded.stderr
    assert reloaded.stdout.strip() == (
        f"alerts reloaded from {config.resolve()}: rules added slower; channels added pager"
    )
    send_slow_run(serve.grpc, TOKEN)
    (added,) = webhook.wait_for("/second", 1, timeout=120)
    assert (added["rule"], added["kind"]) == ("slower", "firing")

    write_alerts(config, both, [slow_rule("slow", "hook"), slow_rule("slower", "pager") | {"for": "soon"}])
    status, answer = post_reload(serve.http)
    assert status == 422, answer
    assert str(config) in answer["message"]
    assert "alerts.rules[slower].for: 'soon' is not a duration" in answer["message"]
    assert "the alert rules in force are unchanged" in answer["message"]
    refused = run_cli("alerts", "reload", "--store", str(store), "--config", str(config), env=env)
    assert refused.returncode == 3, refused.stderr
    assert "alerts.rules[slower].for: 'soon' is not a duration" in refused.stderr
    write_alerts(
        config, both, [slow_rule("slow", "hook"), slow_rule("slower", "pager"), slow_rule("x", "pager")]
    )
    assert post_reload(serve.http)[1]["rules"] == {
        "added": ["x"],
        "changed": [],
        "removed": [],
        "unchanged": ["slow", "slower"],
    }, "the refused edit left slower in force"

    # POST /-/reload, as Prometheus has it: what SIGHUP does, over HTTP.
    assert call_json(serve.http, "/-/reload", {}, None)[0] == 401
    write_alerts(config, both, [slow_rule("slow", "hook"), slow_rule("y", "pager") | {"for": "soon"}])
    status, answer = call_json(serve.http, "/-/reload", {}, TOKEN)
    assert status == 422, answer
    assert "alerts.rules[y].for: 'soon' is not a duration" in answer["message"]
    write_alerts(config, both, [slow_rule("slow", "hook"), slow_rule("y", "pager")])
    assert call_json(serve.http, "/-/reload", {}, TOKEN) == (200, {"reloaded": True})
    assert post_reload(serve.http)[1]["rules"]["unchanged"] == ["slow", "y"], "/-/reload took the section"
    assert serve.stop() == 0
    assert "alert rules reload refused, the alert rules in force stay as they were" in serve.output()


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AGENTTRAIL, *args], capture_output=True, text=True, timeout=120, check=False, env=env
    )


def test_alerts_reload_says_why_when_serve_has_no_config_file(start_sidecar: Any) -> None:
    """Without --config there is no section to read again: 422 saying to restart with --config,
    and the token is required first."""
    sidecar = start_sidecar(bearer_token=TOKEN)
    assert post_reload(sidecar.http.address, token=None)[0] == 401
    status, answer = post_reload(sidecar.http.address)
    assert status == 422, answer
    assert "started without --config" in answer["message"]
