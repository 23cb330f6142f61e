"""`agenttrail alerts` and `alerts test RULE`, on the store and through a running sidecar."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner, Result

from agenttrail.evaluators.cli.main import cli
from agenttrail.evaluators.monitoring.alerts.evaluator import AlertEvaluator

from .data import insert_runs
from .webhook_server import WebhookServer

HOUR = 3600.0
MINUTE = 60.0


def config_file(tmp_path: Path, webhook: WebhookServer, **rule: Any) -> Path:
    alerts = {
        "evaluation_interval": "200ms",
        "channels": {"hook": {"type": "webhook", "url": webhook.url("/hook"), "backoff": "50ms"}},
        "rules": [
            {
                "name": "spike",
                "kind": "failure_rate_spike",
                "params": {"window": "15m", "baseline": "24h", "factor": 3, "floor": 0.1, "min_runs": 10},
                "for": "10m",
                **rule,
            }
        ],
    }
    path = tmp_path / "agenttrail.yaml"
    path.write_text(yaml.safe_dump({"alerts": alerts}))
    return path


def test_external_url_is_the_base_of_generator_urls(
    start_sidecar: Callable[..., Any], tmp_path: Path, webhook: WebhookServer
) -> None:
    """Behind a proxy, `alerts.external_url` replaces the sidecar's address in the link; a rule
    name is quoted into the path."""
    path = config_file(tmp_path, webhook, **{"for": "0s", "name": "spike/eu"})
    document = yaml.safe_load(path.read_text())
    document["alerts"]["external_url"] = "https://agenttrail.example.com/"
    path.write_text(yaml.safe_dump(document))
    sidecar = start_sidecar(str(path))
    insert_runs(sidecar.store, agent="checkout", at=time.time(), count=30, failed=15, spread_s=5 * MINUTE)
    (body,) = webhook.wait_for("/hook", 1)
    assert body["generatorURL"] == (
        f"https://agenttrail.example.com/console/alerts/spike%2Feu?fingerprint={body['fingerprint']}"
    )


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def stored_history(store: Any, now: float) -> None:
    """Four hours of checkout runs: clean, a burst of failures 1h45m-1h30m ago, clean again."""
    insert_runs(store, agent="checkout", at=now - 2 * HOUR, count=200, spread_s=2 * HOUR)
    insert_runs(store, agent="checkout", at=now - 1.5 * HOUR, count=40, failed=20, spread_s=30 * MINUTE)
    insert_runs(store, agent="checkout", at=now, count=60, spread_s=1.5 * HOUR)
    insert_runs(store, agent="search", at=now, count=3, failed=3, spread_s=HOUR)  # below min_runs


def ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_alerts_test_replays_a_rule_over_stored_runs(
    alert_store: Any, chdb_dir: Path, database: str, tmp_path: Path, webhook: WebhookServer
) -> None:
    """The replay shows pending, firing `for` later, then resolved, for the burst only; nothing is sent
    or stored."""
    now = time.time()
    stored_history(alert_store, now)
    path = config_file(tmp_path, webhook)
    where = ["--store", str(chdb_dir), "--database", database, "--config", str(path)]
    result = invoke("alerts", "test", "spike", *where, "--since", "4h", "--step", "5m", "--format", "json")
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(e["from"], e["to"], e["notify"]) for e in events] == [
        ("inactive", "pending", ""),
        ("pending", "firing", "firing"),
        ("firing", "resolved", "resolved"),
    ]
    assert {e["labels"]["agent"] for e in events} == {"checkout"}
    pending, firing, resolved = (ts(e["at"]) for e in events)
    assert firing - pending == 10 * MINUTE  # `for: 10m` at a 5-minute step
    assert now - 2 * HOUR <= pending <= now - 1.5 * HOUR
    assert now - 1.5 * HOUR < resolved <= now - 1.5 * HOUR + 20 * MINUTE
    assert events[1]["value"] > events[1]["threshold"] == 0.1

    table = invoke("alerts", "test", "spike", *where, "--since", "4h", "--step", "5m")
    assert table.exit_code == 0, table.output
    assert "pending -> firing" in table.stdout
    assert "agent=checkout" in table.stdout
    assert "would have fired 1 time(s) in 1 group(s)" in table.stderr
    assert alert_store.query("SELECT count() FROM alert_state")[0][0] == 0
    assert alert_store.query("SELECT count() FROM alert_history")[0][0] == 0
    assert webhook.bodies("/hook") == []


def test_alerts_test_errors(chdb_dir: Path, database: str, tmp_path: Path, webhook: WebhookServer) -> None:
    """An unknown rule names the configured ones; too many steps asks for a larger step."""
    where = [
        "--store",
        str(chdb_dir),
        "--database",
        database,
        "--config",
        str(config_file(tmp_path, webhook)),
    ]
    unknown = CliRunner().invoke(cli, ["alerts", "test", "spik", *where])
    assert unknown.exit_code == 2  # a usage error
    assert "no alert rule named 'spik' (rules: spike)" in unknown.output
    many = CliRunner().invoke(cli, ["alerts", "test", "spike", *where, "--since", "30d", "--step", "1m"])
    assert many.exit_code == 2
    assert "use a larger --step" in many.output


def test_sidecar_runs_the_evaluator_and_serves_alerts(
    start_sidecar: Callable[..., Any], chdb_dir: Path, database: str, tmp_path: Path, webhook: WebhookServer
) -> None:
    """With rules configured, `serve` evaluates them in the background and pages the webhook; the
    CLI lists the alert, its history and a replay through the sidecar's read API."""
    sidecar = start_sidecar(str(config_file(tmp_path, webhook, **{"for": "0s"})))
    (evaluator,) = [worker for worker in sidecar.workers if isinstance(worker, AlertEvaluator)]
    now = time.time()
    insert_runs(sidecar.store, agent="checkout", at=now, count=30, failed=15, spread_s=5 * MINUTE)
    (body,) = webhook.wait_for("/hook", 1)
    assert (body["status"], body["group"]) == ("firing", {"agent": "checkout"})
    # the link is the console's page for the rule on the address serve really listens on
    assert body["generatorURL"] == (
        f"http://{sidecar.http.address}/console/alerts/spike?fingerprint={body['fingerprint']}"
    )
    assert not sidecar.http.address.endswith(":4318")
    assert evaluator.alive()
    assert sidecar.dead_workers() == []

    where = ["--store", str(chdb_dir), "--database", database]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # notifications are queued before the cycle saves its state
        listed = invoke("alerts", *where, "--format", "json")
        assert listed.exit_code == 0, listed.output
        if listed.stdout:
            break
        time.sleep(0.1)
    (alert,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert (alert["rule"], alert["state"], alert["labels"], alert["value"]) == (
        "spike",
        "firing",
        {"agent": "checkout"},
        0.5,
    )
    assert alert["fingerprint"] == body["fingerprint"]
    table = invoke("alerts", *where)
    assert table.stdout.splitlines()[0].split() == [
        "state",
        "since",
        "value",
        "threshold",
        "rule",
        "severity",
        "group",
        "summary",
    ]
    assert table.stdout.splitlines()[2].split()[:2] == ["firing", alert["since"][:19]]
    history = invoke("alerts", "history", *where, "--format", "json")
    events = [json.loads(line) for line in history.stdout.splitlines()]
    assert ("transition", "pending", "firing") in {(e["event"], e["from"], e["to"]) for e in events}
    replay = invoke("alerts", "test", "spike", *where, "--since", "10m", "--step", "1m", "--format", "json")
    assert replay.exit_code == 0, replay.output
    assert [json.loads(line)["to"] for line in replay.stdout.splitlines()][:2] == ["pending", "firing"]
    assert len(webhook.bodies("/hook")) == 1  # the replay notified nobody


def test_alerts_lists_nothing_on_a_fresh_store(chdb_dir: Path, database: str) -> None:
    """A store that never ran alerts answers with an empty list, not an error."""
    result = invoke("alerts", "--store", str(chdb_dir), "--database", database, "--all")
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert "no alerts" in result.stderr


def test_no_alerts_says_when_no_rule_is_configured(
    chdb_dir: Path, database: str, tmp_path: Path, webhook: WebhookServer
) -> None:
    """An empty answer says when the config it reads has no alert rules (so nothing could fire),
    naming the config; with rules it says only that none is pending or firing."""
    where = ["alerts", "--store", str(chdb_dir), "--database", database]
    bare = tmp_path / "bare.yaml"
    bare.write_text("drift: {enabled: true}\n")
    no_rules = invoke(*where, "--config", str(bare))
    assert no_rules.exit_code == 0, no_rules.output
    assert f"no alert rules are configured (config {bare})" in no_rules.stderr
    assert "no alert rules are configured (no --config or AGENTTRAIL_CONFIG given)" in invoke(*where).stderr
    with_rules = invoke(*where, "--config", str(config_file(tmp_path, webhook)))
    assert with_rules.exit_code == 0, with_rules.output
    assert "no alerts pending or firing" in with_rules.stderr
    assert "no alert rules" not in with_rules.stderr


def test_alerts_test_reads_the_section_env_over_the_file(
    alert_store: Any, chdb_dir: Path, database: str, tmp_path: Path, webhook: WebhookServer
) -> None:
    """`alerts test` takes the `alerts:` section as serve does: an evaluation_interval the file
    gets wrong (0s) is no error when AGENTTRAIL_ALERTS_EVALUATION_INTERVAL sets it, and an env
    value only the section's parser refuses is exit 3 naming the variable."""
    path = config_file(tmp_path, webhook)
    document = yaml.safe_load(path.read_text())
    document["alerts"]["evaluation_interval"] = "0s"
    path.write_text(yaml.safe_dump(document))
    where = ["--store", str(chdb_dir), "--database", database, "--config", str(path)]
    command = ["alerts", "test", "spike", *where, "--since", "1h", "--step", "5m"]
    runner = CliRunner()
    refused = runner.invoke(cli, command)
    assert refused.exit_code == 3, refused.output
    assert "evaluation_interval" in refused.output
    replayed = runner.invoke(cli, command, env={"AGENTTRAIL_ALERTS_EVALUATION_INTERVAL": "30s"})
    assert replayed.exit_code == 0, replayed.output
    path.write_text(yaml.safe_dump({"alerts": {**document["alerts"], "evaluation_interval": "30s"}}))
    bad = runner.invoke(cli, command, env={"AGENTTRAIL_ALERTS_EVALUATION_INTERVAL": "0s"})
    assert bad.exit_code == 3, bad.output
    assert "AGENTTRAIL_ALERTS_EVALUATION_INTERVAL" in bad.output
