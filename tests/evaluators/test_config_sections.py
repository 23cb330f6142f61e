"""The evaluators' config sections as the loader sees them: tables equal to their parsers'
defaults, unknown keys and bad values refused naming section, key and file, `config show`
printing every setting with its source, and `serve` refusing a bad section before it starts."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agenttrail.collector.config import load_settings
from agenttrail.collector.errors import ConfigError
from agenttrail.collector.settings import MASK
from agenttrail.evaluators.cli.main import cli
from agenttrail.evaluators.composition import CONFIG_SECTIONS
from agenttrail.evaluators.config_sections import ALERTS, DRIFT, EVALUATORS, JUDGE_DEFAULTS, METRICS_EXPORT


def defaults(section: Any) -> dict[str, Any]:
    return {setting.name: setting.default for setting in section.settings}


def test_tables_hold_their_parsers_defaults() -> None:
    """Each table's defaults are what its section's parser builds from an empty section, so the
    table cannot drift from the code that reads the file."""
    from agenttrail.evaluators.judges.client import JudgeSettings
    from agenttrail.evaluators.monitoring.alerts.config import AlertsConfig
    from agenttrail.evaluators.monitoring.drift_monitor import DriftConfig
    from agenttrail.evaluators.monitoring.export_config import MetricsExportConfig
    from agenttrail.evaluators.scoring.worker import EvaluatorConfig

    assert defaults(EVALUATORS) == dataclasses.asdict(EvaluatorConfig.from_mapping({}))
    assert defaults(METRICS_EXPORT) == dataclasses.asdict(MetricsExportConfig.from_mapping({}))
    drift = DriftConfig.from_mapping({})
    table = defaults(DRIFT)
    assert {key: table.pop(key) for key in ("recent", "baseline")} == drift.window
    for key in ("baseline_from", "baseline_to", "baseline_version"):
        assert table.pop(key) is None
    assert table == {
        **{k: v for k, v in dataclasses.asdict(drift).items() if k not in ("window", "settings")},
        **dataclasses.asdict(drift.settings),
    }
    alerts = AlertsConfig.from_mapping({})
    assert (ALERTS.setting("queue_size"), ALERTS.setting("external_url")) != (None, None)
    assert defaults(ALERTS)["queue_size"] == alerts.queue_size
    assert defaults(ALERTS)["external_url"] == alerts.external_url
    assert (
        AlertsConfig.from_mapping({"evaluation_interval": defaults(ALERTS)["evaluation_interval"]}) == alerts
    )
    judge = {f.name: f.default for f in dataclasses.fields(JudgeSettings) if f.name != "budget"}
    table = defaults(JUDGE_DEFAULTS)
    assert table.pop("budget") == {}
    assert table == {**judge, "model": None}


SECTION_ERRORS = [
    (
        "evaluators",
        "evaluators:\n  sample_rat: 0.5\n",
        r"unknown setting\(s\) \['sample_rat'\] in section 'evaluators'",
    ),
    (
        "evaluators",
        "evaluators:\n  sample_rate: 2\n",
        r"evaluators.sample_rate: bad value 2 \(must be from 0 to 1\)",
    ),
    ("evaluators", "evaluators:\n  metrics: [no_such_metric]\n", r"evaluators.metrics: .*no_such_metric"),
    ("drift", "drift:\n  intervl_s: 5\n", r"unknown setting\(s\) \['intervl_s'\] in section 'drift'"),
    ("drift", "drift:\n  min_samples: many\n", r"drift.min_samples: bad value 'many'"),
    ("drift", "drift:\n  recent: soon\n", r"drift section is invalid"),
    ("metrics_export", "metrics_export:\n  prometeus: false\n", r"unknown setting\(s\) \['prometeus'\]"),
    ("metrics_export", "metrics_export:\n  otlp_protocol: udp\n", r"metrics_export.otlp_protocol: 'udp'"),
    ("metrics_export", "metrics_export:\n  interval_s: 0\n", r"metrics_export.interval_s: bad value 0"),
    ("alerts", "alerts:\n  queue_sze: 5\n", r"unknown setting\(s\) \['queue_sze'\] in section 'alerts'"),
    ("alerts", "alerts:\n  evaluation_interval: often\n", r"alerts.evaluation_interval"),
    ("alerts", "alerts:\n  rules: [{name: r, kind: nope}]\n", r"alerts.rules"),
    ("judges", "judges:\n  - {name: j, type: rubric, sample_rate: 3}\n", r"judge 'j': key 'sample_rate'"),
    ("judges", "judges: {name: j}\n", r"'judges' must be a list, got dict"),
    ("judge_defaults", "judge_defaults:\n  model: m\n  modle: x\n", r"judge_defaults: unknown judge setting"),
    ("judge_defaults", "judge_defaults:\n  timeout_s: -1\n", r"judge_defaults.timeout_s: bad value -1"),
    ("collector", "collector:\n  grpc: nowhere\n", r"collector.grpc: bad value 'nowhere'"),
    ("(top)", "collector: {}\ndirft: {}\n", r"unknown section\(s\) \['dirft'\] \(did you mean 'drift'"),
]


@pytest.mark.parametrize(
    ("section", "text", "message"),
    SECTION_ERRORS,
    ids=[f"{s}-{i}" for i, (s, *_) in enumerate(SECTION_ERRORS)],
)
def test_each_section_refuses_unknown_keys_and_bad_values(
    tmp_path: Path, section: str, text: str, message: str
) -> None:
    """An unknown key or a bad value in any section is a ConfigError naming the file and the
    section's key (with the known keys or what is accepted)."""
    file = tmp_path / "agenttrail.yaml"
    file.write_text(text)
    with pytest.raises(ConfigError, match=rf"config file {file}.*{message}"):
        load_settings(config_file=file, environ={}, sections=CONFIG_SECTIONS, check_sections=True)


def shipped_configs() -> list[tuple[str, str]]:
    """Every config file deploy/ ships: the example, the compose sidecar's, the ConfigMaps'."""
    import yaml

    deploy = Path(__file__).parents[2] / "deploy"
    found = [
        (str(path.relative_to(deploy)), path.read_text())
        for path in (deploy / "agenttrail.yaml", deploy / "compose" / "agenttrail.yaml")
    ]
    documents = [
        (manifest.name, document)
        for manifest in sorted((deploy / "kubernetes").glob("*.yaml"))
        for document in yaml.safe_load_all(manifest.read_text())
    ]
    found.extend(
        (f"{manifest}:{document['metadata']['name']}", document["data"]["agenttrail.yaml"])
        for manifest, document in documents
        if document and document.get("kind") == "ConfigMap" and "agenttrail.yaml" in document["data"]
    )
    return found


@pytest.mark.parametrize(("name", "text"), shipped_configs(), ids=[name for name, _ in shipped_configs()])
def test_every_shipped_config_passes_every_section(tmp_path: Path, name: str, text: str) -> None:
    """What `config show` checks: each shipped file's sections, keys and values are accepted."""
    file = tmp_path / "agenttrail.yaml"
    file.write_text(text)
    settings = load_settings(config_file=file, environ={}, sections=CONFIG_SECTIONS, check_sections=True)
    assert any(row.source == f"file {file}" for row in settings.resolved), name


def test_the_shipped_example_passes_every_section() -> None:
    shipped = Path(__file__).parents[2] / "deploy" / "agenttrail.yaml"
    settings = load_settings(config_file=shipped, environ={}, sections=CONFIG_SECTIONS, check_sections=True)
    rows = {(row.section, row.name): row for row in settings.resolved}
    assert rows["drift", "max_samples"].value == 20_000
    assert rows["drift", "max_samples"].source == f"file {shipped}"
    assert rows["evaluators", "batch_size"].source == "default"


CONFIG = """\
collector:
  grpc: 127.0.0.1:5317
  idle_timeout_s: 9
  bearer_token: hunter2
drift:
  interval_s: 60
metrics_export:
  otlp_headers: {authorization: Bearer abc}
judge_defaults:
  model: gpt-4o-mini
  api_key: sk-secret
"""


def show(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    file = tmp_path / "agenttrail.yaml"
    file.write_text(CONFIG)
    return CliRunner().invoke(
        cli, ["config", "show", "--config", str(file), *args], env=env or {}, terminal_width=200
    )


def test_config_show_json_gives_each_setting_its_value_type_and_source(tmp_path: Path) -> None:
    result = show(
        tmp_path, "--format", "json", "--grpc", "127.0.0.1:7317", env={"AGENTTRAIL_IDLE_TIMEOUT_S": "8"}
    )
    assert result.exit_code == 0, result.output
    rows = {(row["section"], row["key"]): row for row in map(json.loads, result.output.splitlines())}
    file = tmp_path / "agenttrail.yaml"
    assert rows["collector", "grpc"] == {
        "section": "collector",
        "key": "grpc",
        "value": "127.0.0.1:7317",
        "type": "str",
        "source": "flag --grpc",
    }
    assert rows["collector", "idle_timeout_s"]["value"] == 8.0
    assert rows["collector", "idle_timeout_s"]["source"] == "env AGENTTRAIL_IDLE_TIMEOUT_S"
    assert rows["collector", "bearer_token"]["value"] == MASK
    assert rows["collector", "bearer_token"]["source"] == f"file {file}"
    assert rows["collector", "max_body_bytes"] == {
        "section": "collector",
        "key": "max_body_bytes",
        "value": 64 * 1024 * 1024,
        "type": "int",
        "source": "default",
    }
    assert rows["drift", "interval_s"]["value"] == 60.0
    assert rows["drift", "interval_s"]["source"] == f"file {file}"
    assert rows["drift", "alpha"]["source"] == "default"
    assert rows["metrics_export", "otlp_headers"]["value"] == MASK
    assert rows["judge_defaults", "api_key"]["value"] == MASK
    assert rows["judge_defaults", "model"]["value"] == "gpt-4o-mini"
    assert {section for section, _ in rows} == {"collector", *(section.name for section in CONFIG_SECTIONS)}
    for secret in ("hunter2", "sk-secret", "abc"):
        assert secret not in result.output


def test_config_show_text_is_a_table_of_setting_value_source(tmp_path: Path) -> None:
    result = show(tmp_path)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["setting", "value", "source"]
    by_key = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert by_key["collector.grpc"] == ["127.0.0.1:5317", "file", str(tmp_path / "agenttrail.yaml")]
    assert by_key["collector.spool_fsync"] == ["false", "default"]
    assert by_key["collector.bearer_token"][0] == MASK
    assert by_key["drift.interval_s"][0] == "60.0"


def test_config_show_and_serve_refuse_a_bad_file_with_exit_3(tmp_path: Path) -> None:
    """`config show` checks as serve does: a bad section is bad input (exit 3) naming the file and
    the key, found by the section's table (a type) or by its parser (a window that is no duration);
    serve refuses before it creates the store."""
    file = tmp_path / "agenttrail.yaml"
    store = "collector:\n  store: " + str(tmp_path / "store") + "\n"
    for section, message in (
        ("drift:\n  interval_s: nope\n", "drift.interval_s: bad value 'nope'"),
        ("drift:\n  recent: soon\n", "drift section is invalid"),
    ):
        file.write_text(store + section)
        for command in (["config", "show"], ["serve"]):
            result = CliRunner().invoke(cli, [*command, "--config", str(file)], env={})
            assert result.exit_code == 3, result.output
            assert f"config file {file}: {message}" in result.output
        assert not (tmp_path / "store").exists()


def test_config_show_without_a_file_is_all_defaults() -> None:
    result = CliRunner().invoke(cli, ["config", "show", "--format", "json"], env={})
    assert result.exit_code == 0, result.output
    sources = {json.loads(line)["source"] for line in result.output.splitlines()}
    assert sources == {"default"}
