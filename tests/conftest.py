"""Shared fixtures: a real embedded ClickHouse (chDB), real sidecars on loopback, OTLP builders.

chDB hosts one engine directory per process, so every in-process test shares one directory
and gets a database of its own. Tests that need a process of their own start `agenttrail`
as a subprocess with its own directory.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

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


class DatabasePool:
    """Migrated databases in this process's chDB directory, each lent to one test at a time.

    A fresh database costs a few seconds of DDL (every migration, each statement a metadata
    write and fsync in chDB); emptying a used one with TRUNCATE costs milliseconds. A database
    goes back to the pool only if the test left it as the pool made it: the same tables with
    the same DDL, the same migration records, no mutation run on it and no sidecar's lock held;
    otherwise it is left behind and the next test gets a freshly migrated one. TRUNCATE also
    clears the tables' insert-deduplication log, so a test may insert the same blocks again.
    """

    # "collector": what the `store` fixture always gave (the collector's MIGRATIONS);
    # "all": what a sidecar the composition root builds applies on start (ALL_MIGRATIONS).
    KINDS = ("collector", "all")

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.free: dict[str, list[str]] = {kind: [] for kind in self.KINDS}
        self.shape: dict[str, tuple[Any, ...]] = {}
        self.mutations: dict[str, int] = {}  # per lent database, when lent

    def take(self, kind: str) -> str:
        if self.free[kind]:
            name = self.free[kind].pop()
            self.mutations[name] = self._mutations_of(name)
            return name
        from agenttrail.collector.schema import MIGRATIONS, migrate
        from agenttrail.collector.store import Store, parse_store

        name = f"test_{uuid.uuid4().hex[:12]}"
        opened = Store(parse_store(str(self.directory), name))
        try:
            if kind == "all":
                from agenttrail.evaluators.composition import ALL_MIGRATIONS

                migrate(opened, ALL_MIGRATIONS)
            else:
                migrate(opened, MIGRATIONS)
        finally:
            opened.close()
        self.shape.setdefault(kind, self._shape_of(name))
        self.mutations[name] = self._mutations_of(name)
        return name

    def give_back(self, name: str) -> None:
        """Empty `name` and lend it again, when the test left its schema as it found it."""
        from agenttrail.collector.store_lock import lock_file

        lock = lock_file(self.directory, name)
        if lock.exists() and lock.stat().st_size:
            return  # a sidecar the test started still holds it
        try:
            shape = self._shape_of(name)
            # A test that migrated the collector's database further leaves one of the other kind.
            kind = next((k for k, known in self.shape.items() if known == shape), "")
            if not kind or self._mutations_of(name) != self.mutations.pop(name):
                return
            tables = self.admin.query(
                "SELECT name FROM system.tables WHERE database = {db:String} "
                "AND engine NOT IN ('View', 'MaterializedView') AND name != 'schema_migrations'",
                {"db": name},
            )
            for (table,) in tables:
                self.admin.command(f"TRUNCATE TABLE `{name}`.`{table}`")
        except Exception:
            return  # left behind, as every database was before the pool
        self.free[kind].append(name)

    def _shape_of(self, name: str) -> tuple[Any, ...]:
        """What a test must leave as it was: the DDL (the database name taken out) and the
        migration records."""
        tables = self.admin.query(
            "SELECT name, engine, replaceAll(create_table_query, {db:String}, '') FROM system.tables "
            "WHERE database = {db:String} ORDER BY name",
            {"db": name},
        )
        records = self.admin.query(
            f"SELECT Version, Name, Checksum FROM `{name}`.schema_migrations FINAL ORDER BY Version"
        )
        return tuple(tables), tuple(records)

    def _mutations_of(self, name: str) -> int:
        """Mutations (ALTER ... DELETE/UPDATE) the database keeps a record of: one run by the
        test may leave traces a TRUNCATE does not undo, so such a database is not lent again."""
        rows = self.admin.query(
            "SELECT count() FROM system.mutations WHERE database = {db:String}", {"db": name}
        )
        return int(rows[0][0])

    @property
    def admin(self) -> Any:
        """A client for one call, closed with it: a client kept open would hold chDB's engine on
        this directory, and tests that open another directory in-process need it released."""
        from agenttrail.collector.store import Store, parse_store

        return _ClosingStore(Store(parse_store(str(self.directory), "test_pool")))


class _ClosingStore:
    """`query` and `command` on a Store that is closed after each call."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def query(self, *args: Any) -> Any:
        try:
            return self._store.query(*args)
        finally:
            self._store.close()

    def command(self, *args: Any) -> Any:
        try:
            return self._store.command(*args)
        finally:
            self._store.close()


@pytest.fixture(scope="session")
def database_pool(chdb_dir: Path) -> DatabasePool:
    return DatabasePool(chdb_dir)


@pytest.fixture
def database(request: pytest.FixtureRequest) -> Iterator[str]:
    """This test's database in `chdb_dir`. A test that uses `store` or `start_sidecar` gets one
    already migrated (as those fixtures would leave it) from the pool, emptied after the test
    before the next one; mark a test `fresh_database` when what it checks is the migration on
    start itself. Any other test gets a name no database has yet."""
    wanted = request.fixturenames
    kind = "all" if "start_sidecar" in wanted else "collector" if "store" in wanted else None
    if kind is None or request.node.get_closest_marker("fresh_database") is not None:
        yield f"test_{uuid.uuid4().hex[:12]}"
        return
    pool: DatabasePool = request.getfixturevalue("database_pool")
    name = pool.take(kind)
    yield name
    pool.give_back(name)


@pytest.fixture
def store(chdb_dir: Path, database: str) -> Iterator[Any]:
    from agenttrail.collector.schema import migrate
    from agenttrail.collector.store import Store, parse_store

    opened = Store(parse_store(str(chdb_dir), database))
    migrate(opened)
    yield opened
    opened.close()


@pytest.fixture
def start_sidecar(chdb_dir: Path, database: str, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Start sidecars on loopback (ephemeral ports) on this test's database; stopped after the test."""
    from agenttrail.collector.config import SidecarConfig
    from agenttrail.evaluators.composition import build_sidecar

    started: list[Any] = []

    def start(config_file: str | None = None, **overrides: Any) -> Any:
        settings: dict[str, Any] = {
            "store": str(chdb_dir),
            "database": database,
            "grpc": "127.0.0.1:0",
            "http": "127.0.0.1:0",
            "spool_dir": str(tmp_path / "spool"),
            "quiet_period_s": 0.3,
            "idle_timeout_s": 1.0,
            "flush_interval_s": 0.05,
        }
        settings.update(overrides)
        sidecar = build_sidecar(SidecarConfig(**settings), config_file)
        sidecar.start()
        started.append(sidecar)
        return sidecar

    yield start
    for sidecar in reversed(started):
        sidecar.stop()


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
