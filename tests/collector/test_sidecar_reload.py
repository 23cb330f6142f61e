"""Sidecar.reload (what SIGHUP to serve calls): every extension's reload runs, and one that
refuses or fails is logged and reported without stopping the others or the sidecar."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agenttrail.collector.config import SidecarConfig
from agenttrail.collector.errors import ConfigError
from agenttrail.collector.sidecar import Sidecar


def test_a_refused_or_failing_reload_is_logged_and_the_rest_still_reload(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A ConfigError is a refusal, any other exception a failure: both are logged at ERROR, the
    next extensions still reload, and reload() answers False; with none failing it answers True."""
    sidecar = Sidecar(SidecarConfig(store=str(tmp_path / "store")))
    called: list[str] = []

    def refuse() -> None:
        called.append("refuse")
        raise ConfigError("config file x: judge 'a': key 'sample_rate' must be a number from 0 to 1")

    def crash() -> None:
        called.append("crash")
        raise RuntimeError("a bug")

    sidecar.on_reload.extend([refuse, crash, lambda: called.append("fine")])
    with caplog.at_level(logging.ERROR):
        assert sidecar.reload() is False
    assert called == ["refuse", "crash", "fine"]
    messages = [record.getMessage() for record in caplog.records]
    assert any("reload refused" in m and "sample_rate" in m for m in messages)
    assert any("reload failed unexpectedly" in m for m in messages)
    sidecar.on_reload[:] = [lambda: called.append("again")]
    assert sidecar.reload() is True
