"""The `alerts:` config section: what it accepts, and errors that name the file, rule and key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agenttrail.collector.config import load_config
from agenttrail.collector.errors import ConfigError
from agenttrail.evaluators.monitoring.alerts.conditions import FailureRateSpike, LatencyAbove
from agenttrail.evaluators.monitoring.alerts.config import AlertsConfig

DEPLOY = Path(__file__).parents[3] / "deploy" / "agenttrail.yaml"
RULE = {"name": "spike", "kind": "failure_rate_spike"}


def write(tmp_path: Path, alerts: Any) -> Path:
    path = tmp_path / "agenttrail.yaml"
    path.write_text(yaml.safe_dump({"collector": {"store": "/tmp/x"}, "alerts": alerts}))
    return path


def error_for(tmp_path: Path, alerts: Any) -> str:
    path = write(tmp_path, alerts)
    with pytest.raises(ConfigError) as caught:
        AlertsConfig.from_file(path)
    message = str(caught.value)
    assert str(path) in message
    return message


def test_a_full_rule(tmp_path: Path) -> None:
    """Every rule key is read into the rule; defaults fill the rest."""
    rule = {
        "name": "slow",
        "kind": "latency_above",
        "params": {"percentile": "p99", "threshold_s": 2.5, "window": "10m", "min_runs": 5},
        "for": "2m",
        "severity": "critical",
        "labels": {"team": "core"},
        "annotations": {"runbook": "https://x/{agent}"},
        "summary": "{agent} {percentile} is {value:.1f}s",
        "filter": {"agent": ["a", "b"], "task": "refund"},
        "group_by": ["agent", "task"],
        "channels": ["hook"],
        "repeat_interval": "30m",
        "send_resolved": False,
    }
    channels = {"hook": {"type": "webhook", "url": "http://127.0.0.1:9/x", "timeout": "2s"}}
    config = AlertsConfig.from_file(
        write(tmp_path, {"evaluation_interval": "15s", "channels": channels, "rules": [rule]})
    )
    (parsed,) = config.rules
    assert parsed.condition == LatencyAbove(threshold_s=2.5, quantile=0.99, window_s=600, min_runs=5)
    assert (parsed.for_s, parsed.repeat_interval_s, parsed.send_resolved) == (120, 1800, False)
    assert (parsed.scope.agents, parsed.scope.tasks, parsed.scope.group_by) == (
        ("a", "b"),
        ("refund",),
        ("agent", "task"),
    )
    assert parsed.channels == ("hook",)
    assert parsed.annotations["summary"] == "{agent} {percentile} is {value:.1f}s"
    assert config.evaluation_interval_s == 15
    assert config.channels["hook"].timeout_s == 2
    assert set(config.channels) == {"hook", "log"}


def test_defaults(tmp_path: Path) -> None:
    """A bare rule groups by agent, fires without delay, and goes to every declared channel."""
    channels = {"a": {"type": "slack", "url": "https://hooks.slack.com/x"}, "b": {"type": "log"}}
    (rule,) = AlertsConfig.from_file(write(tmp_path, {"channels": channels, "rules": [RULE]})).rules
    assert rule.condition == FailureRateSpike()
    assert (rule.scope.group_by, rule.for_s, rule.severity, rule.channels) == (
        ("agent",),
        0,
        "warning",
        ("a", "b"),
    )
    assert AlertsConfig.from_file(write(tmp_path, {"rules": [RULE]})).rules[0].channels == ("log",)


def test_no_section_means_no_rules(tmp_path: Path) -> None:
    """A config file without `alerts:` (or no file) configures nothing."""
    path = tmp_path / "c.yaml"
    path.write_text("collector: {store: /tmp/x}\n")
    assert AlertsConfig.from_file(path).rules == ()
    assert AlertsConfig.from_file(None).rules == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- alerts\n", r"c.yaml \(reading its 'alerts' section\) must be a mapping of sections"),
        ("alerts: [unclosed\n", r"c.yaml \(reading its 'alerts' section\) is not valid YAML"),
    ],
)
def test_a_file_that_is_no_mapping_is_refused(tmp_path: Path, text: str, message: str) -> None:
    """The alerts read their file as every section does (collector/config.py): a document that is
    no mapping of sections is an error naming the file, not a silent 'no alerts'."""
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        AlertsConfig.from_file(path)


@pytest.mark.parametrize(
    ("alerts", "expected"),
    [
        ({"rules": [{**RULE, "fro": "5m"}]}, "alerts.rules[spike].fro: unknown key"),
        (
            {"rules": [{**RULE, "kind": "failure_spike"}]},
            "alerts.rules[spike].kind: 'failure_spike' is not a rule kind",
        ),
        ({"rules": [{**RULE, "for": "5 minutes"}]}, "alerts.rules[spike].for: '5 minutes' is not a duration"),
        (
            {"rules": [{**RULE, "params": {"window": "-"}}]},
            "alerts.rules[spike].params.window: '-' is not a duration",
        ),
        (
            {"rules": [{**RULE, "params": {"windw": "5m"}}]},
            "alerts.rules[spike].params.windw: unknown parameter",
        ),
        (
            {"rules": [{**RULE, "params": {"floor": 5}}]},
            "alerts.rules[spike].params.floor: 5 must be a proportion",
        ),
        ({"rules": [{"name": "m", "kind": "metric_below"}]}, "alerts.rules[m].params.metric: required"),
        (
            {"rules": [{**RULE, "channels": ["pager"]}]},
            "alerts.rules[spike].channels: no channel named 'pager'",
        ),
        (
            {"rules": [{**RULE, "summary": "{agnt} failing"}]},
            "alerts.rules[spike].annotations.summary: the template",
        ),
        (
            {"rules": [{**RULE, "group_by": ["model"]}]},
            "alerts.rules[spike].group_by: 'model' is not a group label",
        ),
        (
            {"rules": [{**RULE, "labels": {"agent": "x"}}]},
            "alerts.rules[spike].labels.agent: set by agenttrail",
        ),
        ({"rules": [{**RULE, "filter": {"agnt": "x"}}]}, "alerts.rules[spike].filter.agnt: unknown key"),
        ({"rules": [RULE, RULE]}, "alerts.rules[1].name: 'spike' is used by another rule"),
        ({"rules": [{"kind": "drift"}]}, "alerts.rules[0].name: every rule needs a name"),
        ({"channels": {"x": {"type": "pager"}}}, "alerts.channels.x.type: 'pager' is not a channel type"),
        ({"channels": {"x": {"type": "slack"}}}, "alerts.channels.x.url: required"),
        ({"channels": {"x": {"type": "log", "url": "http://x"}}}, "alerts.channels.x.url: unknown key"),
        (
            {"channels": {"x": {"type": "webhook", "url": "ftp://x"}}},
            "alerts.channels.x.url: 'ftp://x' must be",
        ),
        ({"evaluation_interval": "0s"}, "alerts.evaluation_interval: '0s' must be greater than 0"),
        ({"rule": []}, "alerts.rule: unknown key"),
    ],
)
def test_config_errors_name_file_rule_and_key(tmp_path: Path, alerts: Any, expected: str) -> None:
    """Each mistake is refused with the file, the rule (or channel) and the key in the message."""
    assert expected in error_for(tmp_path, alerts)


def test_deploy_example_is_valid() -> None:
    """The commented `alerts:` example in deploy/agenttrail.yaml parses once uncommented."""
    lines = DEPLOY.read_text().splitlines()
    start = lines.index("# alerts:")
    block = []
    for line in lines[start:]:
        if not line.startswith("#"):
            break
        block.append(line[2:])
    document = yaml.safe_load("\n".join(block))
    config = AlertsConfig.from_mapping(document["alerts"], str(DEPLOY))
    assert [rule.kind for rule in config.rules] == [
        "failure_rate_spike",
        "metric_below",
        "latency_above",
        "tool_error_rate",
        "drift",
    ]
    assert load_config({}, config_file=DEPLOY, environ={}).store == "/var/lib/agenttrail"
