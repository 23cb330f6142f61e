"""Settings precedence and errors: argument > env > file > default, bad values named."""

from __future__ import annotations

from pathlib import Path

import pytest

from agenttrail.collector.config import SidecarConfig, load_config, read_section
from agenttrail.collector.errors import ConfigError


def test_precedence_argument_env_file_default(tmp_path: Path) -> None:
    """An argument beats the env var, which beats the file, which beats the default."""
    file = tmp_path / "c.yaml"
    file.write_text("collector:\n  quiet_period_s: 5\n  idle_timeout_s: 9\n  grpc: 0.0.0.0:5317\n")
    env = {"AGENTTRAIL_QUIET_PERIOD_S": "4", "AGENTTRAIL_GRPC": "127.0.0.1:6317"}
    config = load_config({"grpc": "127.0.0.1:7317"}, config_file=file, environ=env)
    assert config.grpc == "127.0.0.1:7317"
    assert config.quiet_period_s == 4.0
    assert config.idle_timeout_s == 9.0
    assert config.http == SidecarConfig().http


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"AGENTTRAIL_QUIET_PERIOD_S": "soon"}, "AGENTTRAIL_QUIET_PERIOD_S"),
        ({"AGENTTRAIL_GRPC": "localhost"}, "host:port"),
        ({"AGENTTRAIL_MAX_BODY_BYTES": "-1"}, "positive"),
        ({"AGENTTRAIL_SPOOL_FSYNC": "maybe"}, "true or false"),
    ],
)
def test_bad_env_values_name_the_variable(env: dict[str, str], message: str) -> None:
    """A bad env value raises ConfigError naming the variable and what is accepted."""
    with pytest.raises(ConfigError, match=message):
        load_config({}, environ=env)


def test_bad_files(tmp_path: Path) -> None:
    """Unreadable, invalid or unknown-key config files say which file and what is wrong."""
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config({}, config_file=tmp_path / "missing.yaml", environ={})
    broken = tmp_path / "broken.yaml"
    broken.write_text("collector: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config({}, config_file=broken, environ={})
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("collector:\n  quiet_periods: 3\n")
    with pytest.raises(ConfigError, match="quiet_periods"):
        load_config({}, config_file=unknown, environ={})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, r"cannot read config file .*missing.yaml \(reading its 'drift' section\)"),
        ("drift: [unclosed\n", r"broken.yaml \(reading its 'drift' section\) is not valid YAML"),
        ("- drift\n", r"broken.yaml \(reading its 'drift' section\) must be a mapping of sections"),
        ("drift: [1, 2]\n", r"broken.yaml: 'drift' must be a mapping of settings, got list"),
        ("drift:\n", r"broken.yaml: 'drift' must be a mapping of settings, got NoneType"),
    ],
)
def test_section_errors_name_file_and_section(tmp_path: Path, text: str | None, message: str) -> None:
    """An unreadable file, bad YAML or a section that is no mapping is a ConfigError naming both."""
    path = tmp_path / ("missing.yaml" if text is None else "broken.yaml")
    if text is not None:
        path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        read_section(path, "drift")


def test_section_is_read_or_empty(tmp_path: Path) -> None:
    """A section comes back as written; a file without it (or an empty file) gives {}."""
    path = tmp_path / "c.yaml"
    path.write_text("collector:\n  grpc: 127.0.0.1:1\ndrift:\n  interval_s: 5\n")
    assert read_section(path, "drift") == {"interval_s": 5}
    assert read_section(path, "alerts") == {}
    path.write_text("")
    assert read_section(path, "drift") == {}


def test_tls_needs_cert_and_key() -> None:
    """Half a TLS configuration is refused."""
    with pytest.raises(ConfigError, match="tls_cert and tls_key"):
        load_config({"tls_cert": "cert.pem"}, environ={})


def test_shipped_example_config_loads() -> None:
    """deploy/agenttrail.yaml is a valid config: every key known, every value accepted."""
    shipped = Path(__file__).parents[2] / "deploy" / "agenttrail.yaml"
    config = load_config({}, config_file=shipped, environ={})
    assert config.store == "/var/lib/agenttrail"
    assert config.quiet_period_s == 2.0
