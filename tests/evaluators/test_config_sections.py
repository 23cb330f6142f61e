"""The evaluators' config sections as the loader sees them: tables equal to their parsers'
defaults, unknown keys and bad values refused naming section, key and file, `config show`
printing every setting with its source, and `serve` refusing a bad section before it starts."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
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
    export = dataclasses.asdict(MetricsExportConfig.from_mapping({}))
    assert defaults(METRICS_EXPORT) == {**export, "otlp_headers": dict(export["otlp_headers"])}
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
    ("drift", "drift:\n  recent: soon\n", r"drift.recent: bad value 'soon' \('soon' is not a duration"),
    ("drift", "drift:\n  baseline_from: someday\n", r"drift section is invalid"),
    ("metrics_export", "metrics_export:\n  prometeus: false\n", r"unknown setting\(s\) \['prometeus'\]"),
    (
        "metrics_export",
        "metrics_export:\n  otlp_protocol: udp\n",
        r"metrics_export.otlp_protocol: bad value 'udp' \(must be one of grpc, http\)",
    ),
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
    # no collector: section, so the top level is the collector's keys: a misspelt section still says so
    (
        "(top)",
        "colector:\n  grpc: 127.0.0.1:1\n",
        r"unknown section\(s\) \['colector'\] \(did you mean 'collector'",
    ),
    (
        "(top)",
        "drift: {}\nquiet_period: 3\n",
        r"unknown setting\(s\) \['quiet_period'\] in section 'collector' \(did",
    ),
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
    the key, found by the section's table (a type) or by its parser (a baseline that is no date);
    serve refuses before it creates the store."""
    file = tmp_path / "agenttrail.yaml"
    store = "collector:\n  store: " + str(tmp_path / "store") + "\n"
    for section, message in (
        ("drift:\n  interval_s: nope\n", "drift.interval_s: bad value 'nope'"),
        ("drift:\n  baseline_from: someday\n", "drift section is invalid"),
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
    # A secret left unset shows as unset: no "****" that reads as if headers were configured.
    rows = {(row["section"], row["key"]): row["value"] for row in map(json.loads, result.output.splitlines())}
    assert not rows["metrics_export", "otlp_headers"]  # empty
    text = CliRunner().invoke(cli, ["config", "show"], env={}, terminal_width=200).output
    shown = {line.split()[0]: line.split()[1] for line in text.splitlines()[2:]}
    # An unset mapping reads as the other unset mappings do ({}), not as an empty list.
    assert shown["metrics_export.otlp_headers"] == shown["judge_defaults.budget"] == "{}"
    assert rows["metrics_export", "otlp_headers"] == {}
    assert rows["collector", "bearer_token"] is None
    assert MASK not in result.output


# Precedence env > file > default, one scalar per evaluator section: (section, key, file value,
# env text, default, file's effect, env's effect, what the composition root's parsed object holds).
PRECEDENCE = [
    ("evaluators", "batch_size", 50, "70", 2000, 50, 70, lambda s: s.evaluators.batch_size),
    ("evaluators", "always_sample_failures", False, "yes", True, False, True,
     lambda s: s.evaluators.always_sample_failures),
    ("drift", "interval_s", 60, "90.5", 300.0, 60.0, 90.5, lambda s: s.drift.interval_s),
    ("drift", "recent", "2h", "30m", "1h", "2h", "30m", lambda s: s.drift.window["recent"]),
    ("metrics_export", "settle_s", 1, "2", 5.0, 1.0, 2.0, lambda s: s.metrics_export.settle_s),
    ("metrics_export", "otlp_protocol", "http", "grpc", "grpc", "http", "grpc",
     lambda s: s.metrics_export.otlp_protocol),
    ("alerts", "queue_size", 10, "20", 1000, 10, 20, lambda s: s.alerts.queue_size),
    ("alerts", "evaluation_interval", "1m", "5s", "30s", "1m", "5s",
     lambda s: s.alerts.evaluation_interval_s),
    ("judge_defaults", "max_retries", 1, "0", 3, 1, 0, lambda s: s.judges.inline.max_retries),
]  # fmt: skip
_SECONDS = {"30s": 30.0, "1m": 60.0, "5s": 5.0}


@pytest.mark.parametrize(
    ("section", "key", "in_file", "in_env", "default", "from_file", "from_env", "parsed"),
    PRECEDENCE,
    ids=[f"{row[0]}.{row[1]}" for row in PRECEDENCE],
)
def test_env_beats_file_beats_default_in_every_evaluator_section(
    tmp_path: Path,
    section: str,
    key: str,
    in_file: Any,
    in_env: str,
    default: Any,
    from_file: Any,
    from_env: Any,
    parsed: Any,
) -> None:
    """Each evaluator section's scalar resolves env AGENTTRAIL_<SECTION>_<KEY> > file > default,
    in `config show`'s rows and in the parsed sections the composition root hands the sidecar."""
    from agenttrail.evaluators import config_sections

    env = f"AGENTTRAIL_{section.upper()}_{key.upper()}"
    base = {"judge_defaults": {"model": "m"}} if section == "judge_defaults" else {}
    file = tmp_path / "agenttrail.yaml"
    empty, given = tmp_path / "empty.yaml", {**base, section: {**base.get(section, {}), key: in_file}}
    empty.write_text(yaml.safe_dump(base))
    file.write_text(yaml.safe_dump(given))
    for path, environ, value, source in (
        (empty, {}, default, "default"),
        (file, {}, from_file, f"file {file}"),
        (file, {env: in_env}, from_env, f"env {env}"),
        (empty, {env: in_env}, from_env, f"env {env}"),
    ):
        settings = load_settings(
            config_file=path, environ=environ, sections=CONFIG_SECTIONS, check_sections=True
        )
        (row,) = [r for r in settings.resolved if (r.section, r.name) == (section, key)]
        assert (row.value, row.source) == (value, source), (path.name, environ)
        got = parsed(config_sections.load(str(path), environ))
        assert got == _SECONDS.get(value, value), (path.name, environ)
        if section == "evaluators":  # as `agenttrail worker` reads it
            alone = config_sections.load_evaluators(str(path), environ)
            assert getattr(alone, key) == value, (path.name, environ)


def test_every_scalar_has_its_section_env_var_and_lists_stay_in_the_file() -> None:
    """AGENTTRAIL_<SECTION>_<KEY> for every scalar of the evaluators' sections, none shared with
    another setting (the collector's AGENTTRAIL_<KEY> included); lists and mappings have none."""
    from agenttrail.collector.config import SETTINGS

    names = [setting.env for setting in SETTINGS]
    for section in CONFIG_SECTIONS:
        for setting in section.settings:
            structured = setting.kind.python in (list, dict)
            assert setting.env_var is not structured, (section.name, setting.name)
            if setting.env_var:
                assert setting.env == f"AGENTTRAIL_{section.name.upper()}_{setting.name.upper()}"
                names.append(setting.env)
    assert len(names) == len(set(names))
    assert "AGENTTRAIL_DRIFT_INTERVAL_S" in names
    assert "AGENTTRAIL_JUDGE_DEFAULTS_API_KEY" in names
    assert "AGENTTRAIL_ALERTS_RULES" not in names
    assert "AGENTTRAIL_METRICS_EXPORT_OTLP_HEADERS" not in names


BAD_ENV = [
    ("AGENTTRAIL_DRIFT_INTERVAL_S", "soon",
     r"drift.interval_s: bad value 'soon'.*accepted: a number of seconds > 0"),
    ("AGENTTRAIL_EVALUATORS_SAMPLE_RATE", "2",
     r"evaluators.sample_rate: bad value '2' \(must be from 0 to 1\)"),
    ("AGENTTRAIL_EVALUATORS_ALWAYS_SAMPLE_FAILURES", "maybe",
     r"evaluators.always_sample_failures: bad value 'maybe' \(must be true or false\)"),
    ("AGENTTRAIL_METRICS_EXPORT_OTLP_PROTOCOL", "udp",
     r"metrics_export.otlp_protocol: bad value 'udp' \(must be one of grpc, http\)"),
    ("AGENTTRAIL_ALERTS_EVALUATION_INTERVAL", "often",
     r"alerts.evaluation_interval: bad value 'often' \('often' is not a duration"),
    ("AGENTTRAIL_ALERTS_QUEUE_SIZE", "0",
     r"alerts.queue_size: bad value '0' \(must be a positive whole number\)"),
    ("AGENTTRAIL_JUDGE_DEFAULTS_RESPONSE_FORMAT", "xml", r"judge_defaults.response_format: bad value 'xml'"),
]  # fmt: skip


@pytest.mark.parametrize(("env", "value", "message"), BAD_ENV, ids=[row[0] for row in BAD_ENV])
def test_a_bad_env_value_names_the_variable_and_what_is_accepted(
    tmp_path: Path, env: str, value: str, message: str
) -> None:
    """As for the collector's variables: the error names the variable, the key and what is
    accepted, whether `config show` or the composition root resolves it."""
    from agenttrail.evaluators import config_sections

    file = tmp_path / "agenttrail.yaml"
    file.write_text("drift:\n  interval_s: 60\n")
    expected = rf"^environment variable {env}: {message}"
    with pytest.raises(ConfigError, match=expected):
        load_settings(config_file=file, environ={env: value}, sections=CONFIG_SECTIONS, check_sections=True)
    with pytest.raises(ConfigError, match=expected):
        config_sections.load(str(file), {env: value})


def test_a_value_only_the_parser_refuses_names_the_env_var_too(tmp_path: Path) -> None:
    """A value the table accepts but the section's parser refuses (a baseline that is no date)
    names the variables from the environment beside the parser's message."""
    from agenttrail.evaluators import config_sections

    file = tmp_path / "agenttrail.yaml"
    file.write_text("drift:\n  interval_s: 60\n")
    environ = {"AGENTTRAIL_DRIFT_BASELINE_FROM": "someday"}
    expected = r"drift section is invalid.*\(with AGENTTRAIL_DRIFT_BASELINE_FROM from the environment\)"
    with pytest.raises(ConfigError, match=expected):
        config_sections.load(str(file), environ)
    with pytest.raises(ConfigError, match=expected):
        load_settings(config_file=file, environ=environ, sections=CONFIG_SECTIONS, check_sections=True)
    with pytest.raises(ConfigError, match=expected):
        config_sections.load(None, environ)


def test_config_show_and_serve_take_evaluator_env_vars(tmp_path: Path) -> None:
    """`config show` prints an evaluator setting's env source (secrets from env masked); serve
    refuses a bad one with exit 3 naming it, before it creates the store."""
    env = {"AGENTTRAIL_DRIFT_INTERVAL_S": "90", "AGENTTRAIL_JUDGE_DEFAULTS_API_KEY": "sk-from-env"}
    result = show(tmp_path, "--format", "json", env=env)
    assert result.exit_code == 0, result.output
    rows = {(row["section"], row["key"]): row for row in map(json.loads, result.output.splitlines())}
    assert rows["drift", "interval_s"] == {
        "section": "drift",
        "key": "interval_s",
        "value": 90.0,
        "type": "float",
        "source": "env AGENTTRAIL_DRIFT_INTERVAL_S",
    }
    assert rows["judge_defaults", "api_key"]["value"] == MASK
    assert rows["judge_defaults", "api_key"]["source"] == "env AGENTTRAIL_JUDGE_DEFAULTS_API_KEY"
    assert rows["drift", "alpha"]["source"] == "default"
    assert "sk-from-env" not in result.output
    text = show(tmp_path, env=env)
    by_key = {line.split()[0]: line.split()[1:] for line in text.output.splitlines()[2:]}
    assert by_key["drift.interval_s"] == ["90.0", "env", "AGENTTRAIL_DRIFT_INTERVAL_S"]

    file = tmp_path / "serve.yaml"
    file.write_text("collector:\n  store: " + str(tmp_path / "store") + "\n")
    for command in (["config", "show"], ["serve"]):
        result = CliRunner().invoke(
            cli, [*command, "--config", str(file)], env={"AGENTTRAIL_DRIFT_MIN_SAMPLES": "many"}
        )
        assert result.exit_code == 3, result.output
        assert "environment variable AGENTTRAIL_DRIFT_MIN_SAMPLES: drift.min_samples: bad value 'many'" in (
            result.output
        )
    assert not (tmp_path / "store").exists()


def test_the_composition_root_hands_each_part_its_resolved_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """build_sidecar reads the sections once with the environment over the file: env switches
    off what the file switches on, and a judges reload reads file and environment again."""
    from agenttrail.collector.config import SidecarConfig
    from agenttrail.evaluators.composition import build_sidecar
    from agenttrail.evaluators.judges.setup import LiveJudges
    from agenttrail.evaluators.monitoring.drift_monitor import DriftMonitor
    from agenttrail.evaluators.monitoring.exporter import MetricsFeed

    file = tmp_path / "agenttrail.yaml"
    judge = {"name": "helpful", "type": "trajectory_accuracy"}
    document = {
        "drift": {"enabled": True},
        "metrics_export": {"prometheus": True},
        "judge_defaults": {"model": "file-model", "api_key": "test"},
        "judges": [judge],
    }
    file.write_text(yaml.safe_dump(document))
    config = SidecarConfig(store=str(tmp_path / "store"))

    def built() -> tuple[list[type], LiveJudges]:
        sidecar = build_sidecar(config, str(file))
        live = next(hook.__self__ for hook in sidecar.on_reload if isinstance(hook.__self__, LiveJudges))
        return [type(worker) for worker in sidecar.workers], live

    kinds, live = built()
    assert DriftMonitor in kinds
    assert MetricsFeed in kinds
    assert live.config.get("helpful").options["model"] == "file-model"

    monkeypatch.setenv("AGENTTRAIL_DRIFT_ENABLED", "false")
    monkeypatch.setenv("AGENTTRAIL_METRICS_EXPORT_PROMETHEUS", "off")
    monkeypatch.setenv("AGENTTRAIL_JUDGE_DEFAULTS_MODEL", "env-model")
    kinds, live = built()
    assert DriftMonitor not in kinds
    assert MetricsFeed not in kinds
    assert live.config.get("helpful").options["model"] == "env-model"

    file.write_text(yaml.safe_dump({**document, "judges": [{**judge, "name": "kind"}]}))
    monkeypatch.setenv("AGENTTRAIL_JUDGE_DEFAULTS_MODEL", "newer-model")
    summary = live.reload()
    assert (summary.changes.added, summary.changes.removed) == (["kind"], ["helpful"])
    assert live.config.get("kind").options["model"] == "newer-model"


def test_a_reload_names_the_edited_sections_it_does_not_take(
    start_sidecar: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """SIGHUP (`systemctl reload`) takes the judges and alerts sections: an edited drift setting
    is named in a warning saying it waits for a restart, the judges and alerts edits are not; an
    untouched file warns about nothing."""
    path = tmp_path / "agenttrail.yaml"
    rule = {"name": "spike", "kind": "failure_rate_spike", "params": {"min_runs": 10}}
    document: dict[str, Any] = {
        "alerts": {"channels": {"log": {"type": "log"}}, "rules": [rule]},
        "drift": {"interval_s": 60},
        "judge_defaults": {"model": "m"},
    }
    path.write_text(yaml.safe_dump(document))
    sidecar = start_sidecar(str(path))
    caplog.set_level("WARNING", logger="agenttrail.evaluators.config_sections")
    sidecar.reload()
    assert not [r for r in caplog.records if "changed since serve started" in r.getMessage()]
    document["alerts"]["rules"][0]["params"]["min_runs"] = 20
    document["drift"]["interval_s"] = 30
    document["judge_defaults"]["model"] = "n"
    path.write_text(yaml.safe_dump(document))
    sidecar.reload()
    (warning,) = [r.getMessage() for r in caplog.records if "changed since serve started" in r.getMessage()]
    assert "section(s) drift changed" in warning
    assert "next restart" in warning
