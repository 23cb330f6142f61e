"""The CLI starts without its heavy libraries: `agenttrail --help` and the read commands' help
import none of scipy, matplotlib, openai, the ClickHouse drivers or gRPC (checked in a fresh
interpreter's sys.modules, not timed; the time is in benchmarks/bench_cli_start.py), and the
short helps `--help` shows for commands not yet imported match the commands' own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("scipy", "matplotlib", "openai", "chdb", "clickhouse_connect", "grpc", "numpy", "mcp")

PROBE = """
import json, sys
sys.argv = ["agenttrail", *json.loads(sys.argv[1])]
from agenttrail.evaluators.cli.entry import main
try:
    main()
except SystemExit:
    pass
print("\\n@@" + json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


def loaded_by(*args: str) -> set[str]:
    """Top-level packages imported by running `agenttrail ARGS` in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(list(args))],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return set(json.loads(done.stdout.rsplit("@@", 1)[1]))


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("trajectories", "--help"),
        ("scores", "--help"),
        ("stats", "--help"),
        ("drift", "--help"),
        ("alerts", "--help"),
        ("audit", "--help"),
        ("references", "list", "--help"),
        ("serve", "--help"),
        ("config", "show", "--help"),
        ("report", "--help"),
        ("mcp", "--help"),
    ],
)
def test_help_imports_no_heavy_library(args: tuple[str, ...]) -> None:
    """--help (the group's and the read commands') loads click and our modules, nothing heavy."""
    assert loaded_by(*args) & set(HEAVY) == set()


def test_the_group_help_loads_neither_the_otel_sdk_nor_the_judge_catalogue() -> None:
    """The error root lives in `agenttrail.instrumentation` and the criteria migrations in the
    judges wing: both packages load their public names on first use, so `--help` pays for
    neither the OpenTelemetry SDK nor the judge catalogue (with yaml and the metrics)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.replace('name.split(".")[0] for', "name for"), json.dumps(["--help"])],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    loaded = set(json.loads(done.stdout.rsplit("@@", 1)[1]))
    assert {"opentelemetry", "yaml"} & {name.split(".")[0] for name in loaded} == set()
    assert "agenttrail.evaluators.judges.registry" not in loaded
    assert "agenttrail.instrumentation._decorators" not in loaded


SERVE_PROBE = """
import json, sys
from agenttrail.evaluators.composition import build_sidecar
from agenttrail.collector.config import SidecarConfig
sidecar = build_sidecar(SidecarConfig(store=sys.argv[1], grpc="127.0.0.1:0", http="127.0.0.1:0"), None)
sidecar.start()
sidecar.stop()
print("\\n@@" + json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


def test_serve_starts_without_scipy_matplotlib_or_openai(tmp_path: Path) -> None:
    """`serve` builds and starts the sidecar as the CLI does (evaluator, judges, drift, alerts,
    report route, console, MCP mount) without importing scipy, matplotlib, openai or the MCP SDK:
    they load when a drift test, a plot, a judge or the first MCP request needs them. Under load,
    those imports made serve take 50 s to listen. The probe does see what serve loads (the store
    engine, gRPC)."""
    done = subprocess.run(
        [sys.executable, "-c", SERVE_PROBE, str(tmp_path / "store")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    loaded = set(json.loads(done.stdout.rsplit("@@", 1)[1]))
    assert {"chdb", "grpc"} <= loaded
    assert loaded & {"scipy", "matplotlib", "openai", "mcp"} == set()


def test_lazy_commands_list_their_own_short_help() -> None:
    """`agenttrail --help` shows, for each lazily loaded command, the command's own first line."""
    from agenttrail.evaluators.cli.main import LAZY_COMMANDS, cli

    for name, (_, summary) in LAZY_COMMANDS.items():
        command = cli.get_command(None, name)  # type: ignore[arg-type]
        assert command is not None, name
        assert command.get_short_help_str(500) == summary, name


REGISTRY_PROBE = """
import importlib, json
from agenttrail.collector.cli import cli as collector
from agenttrail.evaluators.cli.main import cli as full
before = [sorted(collector.commands), sorted(full.commands)]
for name in ("alerts", "common", "criteria", "judges", "mcp", "monitoring", "offline", "read", "report"):
    importlib.import_module("agenttrail.evaluators.cli." + name)
print("\\n@@" + json.dumps([before, [sorted(collector.commands), sorted(full.commands)]]))
"""


def test_importing_a_command_module_registers_nothing() -> None:
    """The group is built in one place (cli/main.py, wired to the composition root): importing the
    command modules adds no command to any group, and the collector's own group keeps the
    collector's commands only."""
    done = subprocess.run(
        [sys.executable, "-c", REGISTRY_PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    before, after = json.loads(done.stdout.rsplit("@@", 1)[1])
    assert after == before
    assert before[0] == ["config", "migrate", "schema", "serve", "spool", "trajectories"]


def test_without_the_sidecar_extra_the_cli_says_how_to_install_it() -> None:
    """A missing sidecar library (here click, blocked) is a message with an install command that
    works from a checkout or a wheel, not a traceback."""
    blocked = (
        "import sys; sys.modules['click'] = None; from agenttrail.evaluators.cli.entry import main; main()"
    )
    result = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "the command line needs the sidecar extra (click is not installed)" in result.stderr
    assert "pip install '/path/to/agenttrail[sidecar]'" in result.stderr
