"""`agenttrail serve --help`: every option shows its type and its default."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agenttrail.collector import background
from agenttrail.collector.cli import cli
from agenttrail.collector.config import SETTINGS


def test_every_serve_option_shows_type_and_default() -> None:
    """Numbers show as numbers (not TEXT), addresses as HOST:PORT, and each help names the default
    and the environment variable."""
    result = CliRunner().invoke(cli, ["serve", "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    for setting in SETTINGS:
        flag = "--" + setting.name.replace("_", "-")
        match = re.search(re.escape(flag) + r" (\S+(?: RANGE)?) (.*?)(?= --|$)", text)
        assert match is not None, flag
        kind, described = match.groups()
        if isinstance(setting.default, bool):
            assert kind == "BOOLEAN", flag
        elif isinstance(setting.default, int):
            assert kind == "INTEGER RANGE", flag
        elif isinstance(setting.default, float):
            assert kind == "FLOAT RANGE", flag
        elif setting.name in ("grpc", "http"):
            assert kind == "HOST:PORT", flag
        elif setting.name.startswith("tls_"):
            assert kind == "FILE", flag
        elif setting.name == "spool_dir":
            assert kind == "DIRECTORY", flag
        assert "default: " in described, flag
        if setting.name not in ("store", "database"):
            assert f"env {setting.env}, file collector.{setting.name}" in described, flag
        if isinstance(setting.default, int | float) and not isinstance(setting.default, bool):
            assert f"x>={setting.kind.minimum:g}" in described, flag  # the range the table allows
    for flag in ("--retention-spans-days", "--retention-scores-days"):  # 0 (keep for ever) is allowed
        zero = CliRunner().invoke(cli, ["config", "show", flag, "0", "--format", "json"], env={})
        assert zero.exit_code == 0, zero.output
    bad = CliRunner().invoke(cli, ["serve", "--quiet-period-s", "soon"])
    assert bad.exit_code == 2
    assert "'soon' is not a valid float" in bad.output


def test_serve_sets_the_switch_interval_it_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gil_switch_interval_s (default 1 ms) reaches sys.setswitchinterval and background_nice
    (default 0) the background threads in serve, before the sidecar is built (here the store is
    a file, so building it fails and serve exits with the store's error)."""
    given: list[float] = []
    monkeypatch.setattr(sys, "setswitchinterval", given.append)
    nice: list[int] = []
    monkeypatch.setattr(background, "set_background_nice", nice.append)
    store = tmp_path / "a-file"
    store.write_text("")
    result = CliRunner().invoke(
        cli, ["serve", "--store", str(store), "--gil-switch-interval-s", "0.0007", "--background-nice", "4"]
    )
    assert result.exit_code != 0
    assert (given, nice) == ([0.0007], [4])
    # Unset, serve shortens Python's 5 ms (a receiver waits at most 1 ms for the GIL) and leaves
    # its background threads at the receivers' priority (background_nice is opt-in).
    monkeypatch.delenv("AGENTTRAIL_GIL_SWITCH_INTERVAL_S", raising=False)
    monkeypatch.delenv("AGENTTRAIL_BACKGROUND_NICE", raising=False)
    result = CliRunner().invoke(cli, ["serve", "--store", str(store)])
    assert result.exit_code != 0
    assert (given, nice) == ([0.0007, 0.001], [4, 0])


def test_version_prints_the_installed_distributions_version() -> None:
    """`agenttrail --version` answers with the installed package's version (a platform engineer's
    first question, and what a bug report needs)."""
    from importlib.metadata import version

    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"agenttrail {version('agenttrail')}"
