"""The settings model: each setting resolved flag > env > file > default with its source, typed
values, errors naming key, section and file, secrets masked."""

from __future__ import annotations

from pathlib import Path

import pytest

from agenttrail.collector.config import SETTINGS, load_settings
from agenttrail.collector.errors import ConfigError
from agenttrail.collector.settings import MASK, Resolved, masked


def source_of(settings_rows: tuple[Resolved, ...], name: str) -> tuple[object, str]:
    [row] = [row for row in settings_rows if row.section == "collector" and row.name == name]
    return row.value, row.source


def test_each_source_wins_over_the_ones_below(tmp_path: Path) -> None:
    """quiet_period_s is set in all four places, idle_timeout_s in three, flush_interval_s in
    the file only, http nowhere: each comes from the highest source that has it, and says so."""
    file = tmp_path / "c.yaml"
    file.write_text("collector:\n  quiet_period_s: 5\n  idle_timeout_s: 9\n  flush_interval_s: 0.7\n")
    env = {"AGENTTRAIL_QUIET_PERIOD_S": "4", "AGENTTRAIL_IDLE_TIMEOUT_S": "8"}
    settings = load_settings({"quiet_period_s": 3.0}, config_file=file, environ=env)
    rows = settings.resolved
    assert source_of(rows, "quiet_period_s") == (3.0, "flag --quiet-period-s")
    assert source_of(rows, "idle_timeout_s") == (8.0, "env AGENTTRAIL_IDLE_TIMEOUT_S")
    assert source_of(rows, "flush_interval_s") == (0.7, f"file {file}")
    assert source_of(rows, "http") == ("127.0.0.1:4318", "default")
    config = settings.config
    assert (config.quiet_period_s, config.idle_timeout_s, config.flush_interval_s) == (3.0, 8.0, 0.7)
    assert [row.name for row in rows] == [setting.name for setting in SETTINGS]


def test_unset_flag_falls_through() -> None:
    """A flag left unset (None, as click passes it) does not hide the env var."""
    settings = load_settings({"grpc": None}, environ={"AGENTTRAIL_GRPC": "127.0.0.1:6317"})
    assert source_of(settings.resolved, "grpc") == ("127.0.0.1:6317", "env AGENTTRAIL_GRPC")


def test_values_take_their_type() -> None:
    """Env text becomes the setting's type; whole numbers stay whole, booleans are words."""
    env = {
        "AGENTTRAIL_MAX_BODY_BYTES": "1024",
        "AGENTTRAIL_SPOOL_FSYNC": "yes",
        "AGENTTRAIL_RETENTION_SPANS_DAYS": "0",
        "AGENTTRAIL_SPAN_MAX_FUTURE_S": "60",
    }
    config = load_settings(environ=env).config
    assert config.max_body_bytes == 1024
    assert isinstance(config.max_body_bytes, int)
    assert config.spool_fsync is True
    assert config.retention_spans_days == 0
    assert config.span_max_future_s == 60.0
    assert isinstance(config.span_max_future_s, float)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("batch_max_spans: 2.5", r"collector.batch_max_spans: bad value 2.5 \(2.5 is not a whole number\)"),
        ("quiet_period_s: true", r"collector.quiet_period_s: bad value True .*a number of seconds >= 0"),
        ("retention_scores_days: -1", r"collector.retention_scores_days: bad value -1 .*0 to keep for ever"),
        ("http: localhost", r"collector.http: bad value 'localhost' \(must be host:port"),
    ],
)
def test_bad_file_value_names_file_section_key_and_what_is_accepted(
    tmp_path: Path, text: str, message: str
) -> None:
    """A bad value in the file names the file, section.key, the value and what is accepted."""
    file = tmp_path / "bad.yaml"
    file.write_text(f"collector:\n  {text}\n")
    with pytest.raises(ConfigError, match=f"config file {file}: {message}"):
        load_settings(config_file=file, environ={})


def test_bad_flag_and_env_values_name_their_source() -> None:
    with pytest.raises(
        ConfigError, match=r"option --max-queue-spans: collector.max_queue_spans: bad value 0"
    ):
        load_settings({"max_queue_spans": 0}, environ={})
    with pytest.raises(
        ConfigError, match=r"environment variable AGENTTRAIL_HEALTH_AUTH: collector.health_auth: bad value"
    ):
        load_settings(environ={"AGENTTRAIL_HEALTH_AUTH": "sometimes"})


def test_unknown_collector_key_names_it_the_section_and_a_close_one(tmp_path: Path) -> None:
    file = tmp_path / "c.yaml"
    file.write_text("collector:\n  quiet_periods: 3\n")
    with pytest.raises(
        ConfigError,
        match=rf"config file {file}: unknown setting\(s\) \['quiet_periods'\] in section 'collector' "
        r"\(did you mean 'quiet_period_s' for 'quiet_periods'\?\); "
        r"known: \['assembly_max_memory_bytes', 'assembly_max_pending_traces', 'assembly_max_traces', "
        r"'background_nice', 'batch_max_spans'",
    ):
        load_settings(config_file=file, environ={})


def test_unknown_section_is_refused_when_the_sections_are_known(tmp_path: Path) -> None:
    """With the sections given (the full CLI), a top-level key nobody owns is an error naming
    it and the known sections; without them (the collector alone) it is skipped."""
    file = tmp_path / "c.yaml"
    file.write_text("collector:\n  grpc: 127.0.0.1:5317\nalert:\n  rules: []\n")
    with pytest.raises(
        ConfigError, match=r"unknown section\(s\) \['alert'\]; known sections: \['collector'\]"
    ):
        load_settings(config_file=file, environ={}, sections=())
    assert load_settings(config_file=file, environ={}).config.grpc == "127.0.0.1:5317"


def test_secrets_are_masked() -> None:
    """The bearer token, a URL's password, headers, API keys and webhook paths never show."""
    settings = load_settings(
        environ={"AGENTTRAIL_BEARER_TOKEN": "t0ken", "AGENTTRAIL_STORE": "https://u:pw@ch:8443/db"}
    )
    shown = {row.name: row.shown() for row in settings.resolved}
    assert shown["bearer_token"] == MASK
    assert shown["store"] == f"https://u:{MASK}@ch:8443/db"
    assert shown["tls_cert"] is None  # unset secrets-or-not show as unset
    nested = masked(
        {
            "api_key": "sk-1",
            "api_key_env": "OPENAI_API_KEY",
            "otlp_headers": {"authorization": "Bearer x"},
            "channels": {"s": {"type": "slack", "url": "https://hooks.slack.com/services/T/B/X"}},
        }
    )
    assert nested == {
        "api_key": MASK,
        "api_key_env": "OPENAI_API_KEY",
        "otlp_headers": MASK,
        "channels": {"s": {"type": "slack", "url": f"https://hooks.slack.com/{MASK}"}},
    }


def test_spool_commands_find_the_spool_the_settings_name(tmp_path: Path) -> None:
    """`spool list` without --spool-dir takes serve's spool directory from the settings: the
    file's collector.spool_dir, else <store>/spool (it raised NameError before)."""
    from click.testing import CliRunner

    from agenttrail.collector.cli import cli

    file = tmp_path / "c.yaml"
    file.write_text(f"collector:\n  spool_dir: {tmp_path / 'spool-here'}\n")
    result = CliRunner().invoke(cli, ["spool", "list", "--config", str(file)], env={})
    assert result.exit_code == 0, result.output
    assert f"no quarantined records in {tmp_path / 'spool-here' / 'quarantine'}" in result.output
    result = CliRunner().invoke(cli, ["spool", "list", "--store", str(tmp_path / "store")], env={})
    assert result.exit_code == 0, result.output
    assert f"no quarantined records in {tmp_path / 'store' / 'spool' / 'quarantine'}" in result.output
