"""Shared fixtures: a real embedded ClickHouse (chDB), real sidecars on loopback, OTLP builders.

chDB hosts one engine directory per process, so every in-process test shares one directory
and gets a database of its own. Tests that need a process of their own start `agenttrail`
as a subprocess with its own directory.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from serve_processes import ServeProcess, StartServe, launch_serve

os.environ.setdefault("AGENTTRAIL_RAISE_INTERNAL_ERRORS", "1")

# A shared 2-core CI machine can stall for seconds: a per-example deadline would fail property
# tests that are correct. Properties are checked, not timed (speed lives in benchmarks/).
settings.register_profile("agenttrail", deadline=None)
# .ci/mutation.py runs the tests once per mutant: fewer examples, and the same ones every run,
# so that the set of surviving mutants does not change from run to run.
settings.register_profile(
    "mutation", parent=settings.get_profile("agenttrail"), max_examples=25, derandomize=True, database=None
)
settings.load_profile(os.environ.get("AGENTTRAIL_HYPOTHESIS_PROFILE", "agenttrail"))


# pytest-xdist (`make unit` runs -n workers): each test is a unit of work of its own, except these
# modules, which run whole on one worker because a module-scoped fixture of theirs is costly (the
# demo store behind the MCP tools, the offline embedding model, the Grafana demo store). The
# xdist_group mark cannot say this: pytest 9.2's node ids drop its suffix (pytest-xdist #1386).
WHOLE_MODULES = frozenset(
    {
        "tests/evaluators/mcp_server/test_mcp_tools.py",
        "tests/evaluators/judges/criteria/test_consolidate.py",
        "tests/deploy/test_grafana.py",
    }
)
# Handed out first, so that no worker starts one of these minutes-long tests while the others
# run out of work: the above, the framework venvs and agents, the demo, the heaviest properties.
SLOW_FIRST = (
    *sorted(WHOLE_MODULES),
    "tests/frameworks/",
    "tests/evaluators/demo/test_demo.py",
    "tests/collector/test_canonical.py",
    "tests/collector/test_otlp_sql.py",
    "tests/collector/test_serve_process.py",
    "tests/collector/test_soak.py",
)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The scheduler for `-n N` (whose --dist is `load`); an explicit other --dist is kept."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class WholeModulesOrSingleTests(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in WHOLE_MODULES else nodeid

    return WholeModulesOrSingleTests(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On pytest-xdist workers, the SLOW_FIRST tests go to the front (a stable sort, the same on
    every worker, as xdist requires); a run without workers keeps the collection order."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return

    def rank(item: pytest.Item) -> int:
        module = item.nodeid.split("::", 1)[0]
        return next((i for i, prefix in enumerate(SLOW_FIRST) if module.startswith(prefix)), len(SLOW_FIRST))

    items.sort(key=rank)


@pytest.fixture(scope="session")
def chdb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("chdb")


@pytest.fixture
def database(chdb_dir: Path) -> Iterator[str]:
    """A database of this test's own in the worker's engine directory, dropped afterwards.

    Dropped because the embedded engine loads every database in its directory each time it
    opens (when a test's last client closes it, the next test's first client reopens it): a
    worker's directory that kept one database per test made each open ~30 ms slower per test
    run before it, seconds per open late in a run.
    """
    name = f"test_{uuid.uuid4().hex[:12]}"
    yield name
    from agenttrail.collector.store import Store, StoreError, parse_store

    try:
        # Created if the test never did (it failed early, or used only subprocesses): a client
        # bound to a missing database cannot run even the DROP.
        cleaner = Store(parse_store(str(chdb_dir), name))
    except StoreError:
        return  # the directory is gone or held elsewhere: nothing to save
    try:
        cleaner.command(f"DROP DATABASE IF EXISTS `{name}` SYNC")
    finally:
        cleaner.close()


@pytest.fixture
def store(chdb_dir: Path, database: str) -> Iterator[Any]:
    from agenttrail.collector.schema import migrate
    from agenttrail.collector.store import Store, parse_store

    opened = Store(parse_store(str(chdb_dir), database))
    migrate(opened)
    yield opened
    opened.close()


@pytest.fixture
def grpc_path(request: pytest.FixtureRequest) -> dict[str, bool]:
    """`grpc_process` for the sidecars the fixtures build from a `SidecarConfig` (which reads no
    environment): false for a test marked `grpc_in_serve` (it patches or reads serve's own gRPC
    receiver), else `AGENTTRAIL_GRPC_PROCESS` (true / false) from the tests' environment, so the
    suite runs on either gRPC receiver path; empty (the config's default) when that is unset. A
    test that passes `grpc_process` itself keeps its value."""
    if request.node.get_closest_marker("grpc_in_serve"):
        return {"grpc_process": False}
    value = os.environ.get("AGENTTRAIL_GRPC_PROCESS", "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return {"grpc_process": True}
    if value in ("0", "false", "no", "off"):
        return {"grpc_process": False}
    return {}


@pytest.fixture
def sidecar_settings(
    chdb_dir: Path, database: str, tmp_path: Path, grpc_path: dict[str, bool]
) -> dict[str, Any]:
    """The tests' `SidecarConfig` fields: this test's database, loopback on ephemeral ports, a
    short quiet period and flush interval, and the gRPC path chosen for the run."""
    return {
        "store": str(chdb_dir),
        "database": database,
        "grpc": "127.0.0.1:0",
        "http": "127.0.0.1:0",
        "spool_dir": str(tmp_path / "spool"),
        "quiet_period_s": 0.3,
        "idle_timeout_s": 1.0,
        "flush_interval_s": 0.05,
        **grpc_path,
    }


@pytest.fixture
def keep_started() -> Iterator[Callable[[Any], Any]]:
    """Start a sidecar and keep it until the test ends; all are stopped then, last started first
    (a later one may stand on an earlier one's store or ports)."""
    started: list[Any] = []

    def keep(sidecar: Any) -> Any:
        sidecar.start()
        started.append(sidecar)
        return sidecar

    yield keep
    for sidecar in reversed(started):
        sidecar.stop()


@pytest.fixture
def start_sidecar(sidecar_settings: dict[str, Any], keep_started: Callable[[Any], Any]) -> Callable[..., Any]:
    """Start sidecars on loopback (ephemeral ports) on this test's database; stopped after the test."""
    from agenttrail.collector.config import SidecarConfig
    from agenttrail.evaluators.composition import build_sidecar

    def start(config_file: str | None = None, **overrides: Any) -> Any:
        return keep_started(build_sidecar(SidecarConfig(**{**sidecar_settings, **overrides}), config_file))

    return start


# 2026-01-01T00:00:00Z: a UTC midnight, so also the top of an hour.
BUDGET_BOUNDARY = 1_767_225_600.0


@pytest.fixture
def budget_clock(monkeypatch: pytest.MonkeyPatch) -> float:
    """Judge budgets of clients made during the test, and the pauses of sidecars' judge workers,
    read a clock frozen 1 ms before a UTC midnight; returns that instant. Budget windows are
    calendar UTC hours and days, so on the wall clock a test that spends and then checks fails
    whenever it straddles the top of an hour or midnight; frozen just before the boundary, such a
    test shows it no longer depends on when it runs."""
    from functools import partial

    from agenttrail.evaluators.judges import client
    from agenttrail.evaluators.judges import setup as judge_setup
    from agenttrail.evaluators.judges.budget import BudgetTracker
    from agenttrail.evaluators.judges.worker import JudgeWorker

    now = BUDGET_BOUNDARY - 0.001
    monkeypatch.setattr(client, "BudgetTracker", partial(BudgetTracker, clock=lambda: now))
    monkeypatch.setattr(judge_setup, "JudgeWorker", partial(JudgeWorker, clock=lambda: now))
    return now


@pytest.fixture
def closed_port() -> Iterator[socket.socket]:
    """A loopback port held bound and not listening for the whole test: connecting to it is
    refused, no parallel test can take it meanwhile (a port bound and closed at once could be
    taken before it was used), and `listen()` on this socket opens it later."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held


@pytest.fixture
def serve_process(tmp_path: Path) -> Iterator[StartServe]:
    """Start `agenttrail serve` with these arguments on port 0 and wait until it listens (its
    addresses then in .grpc and .http); each one still running at the end gets SIGTERM, then a
    kill. Their logs are printed at teardown: pytest shows them when the test failed."""
    started: list[ServeProcess] = []

    def start(
        *args: str, options: tuple[str, ...] = (), env: dict[str, str] | None = None, timeout: float = 240
    ) -> ServeProcess:
        serve = launch_serve(tmp_path / f"serve-{len(started)}.log", *args, options=options, env=env)
        started.append(serve)
        return serve.wait_listening(timeout)

    yield start
    for serve in started:
        try:
            serve.stop(60)
        finally:
            print(f"--- {serve.log.name} (exit {serve.process.returncode}) ---\n{serve.output()}")


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    """The serve processes a test starts: killed, if still running, when it ends."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(10)


CONSOLE_TESTS = Path(__file__).parent / "console"


@pytest.fixture(autouse=True)
def no_event_loop_left_running(request: pytest.FixtureRequest) -> None:
    """A test starts with no asyncio loop running in the main thread: one a fixture left open
    (Playwright's sync API, while its browser lives) makes `asyncio.run`/`anyio.run` fail with
    "another loop is running" in whatever test comes next. The console's own tests share that
    browser, so they are not checked."""
    if request.path.is_relative_to(CONSOLE_TESTS):
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    pytest.fail("an asyncio loop is left running in the main thread (a fixture of an earlier test)")
