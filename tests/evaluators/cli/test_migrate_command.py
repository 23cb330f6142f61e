"""`agenttrail migrate` as a real process, as a Kubernetes Job runs it before an upgrade: it lists
the collector's and the evaluators' migrations a store lacks (--dry-run changes nothing), applies
them without serve, and exits non-zero with a message naming the problem."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from serve_processes import AGENTTRAIL

from agenttrail.collector.schema import MIGRATIONS
from agenttrail.collector.store_lock import StoreLock
from agenttrail.evaluators.composition import ALL_MIGRATIONS

pytestmark = pytest.mark.timeout(600)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [*AGENTTRAIL, "--log-level", "warning", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


def in_store(store: Path, *statements: str, collector_migrations: bool = False) -> None:
    """Run statements on an embedded store in a process of its own (one chDB path per process)."""
    code = (
        "import sys\n"
        "from agenttrail.collector.schema import migrate\n"
        "from agenttrail.collector.store import Store, parse_store\n"
        "store = Store(parse_store(sys.argv[1]))\n"
        + ("migrate(store)\n" if collector_migrations else "")
        + "for statement in sys.argv[2:]:\n    store.command(statement)\n"
        "store.close()\n"
    )
    subprocess.run([sys.executable, "-c", code, str(store), *statements], check=True, timeout=300)


def listed_versions(output: str) -> list[int]:
    return [int(version) for version in re.findall(r"^\s+(\d+)  ", output, re.M)]


def test_dry_run_lists_what_a_collector_only_store_lacks_and_migrate_applies_it(tmp_path: Path) -> None:
    """On a store the collector alone migrated, --dry-run lists exactly the evaluators' migrations
    and changes nothing (asked twice, the same list); migrate applies them and names them; after
    it the store is up to date. A dry run on a missing store exits 4 and creates nothing."""
    store = tmp_path / "store"
    missing = run_cli("migrate", "--dry-run", "--store", str(store))
    assert missing.returncode == 4, missing.stderr
    assert f"no store at {store}" in missing.stderr
    assert not store.exists()

    in_store(store, collector_migrations=True)
    evaluators = [m.version for m in ALL_MIGRATIONS if m.version not in {c.version for c in MIGRATIONS}]
    for _ in range(2):
        dry = run_cli("migrate", "--dry-run", "--store", str(store))
        assert dry.returncode == 0, dry.stderr
        assert f"{len(evaluators)} schema migration(s) pending" in dry.stdout
        assert listed_versions(dry.stdout) == evaluators

    done = run_cli("migrate", "--store", str(store))
    assert done.returncode == 0, done.stderr
    assert f"applied {len(evaluators)} schema migration(s)" in done.stdout
    assert listed_versions(done.stdout) == evaluators
    again = run_cli("migrate", "--dry-run", "--store", str(store))
    assert again.returncode == 0, again.stderr
    assert "up to date, no schema migration pending" in again.stdout


def test_migrate_exits_non_zero_naming_the_problem(tmp_path: Path) -> None:
    """A failing migration exits 1 naming it and what applied before it; an unreachable server
    and an embedded store another process holds exit 4."""
    broken = tmp_path / "broken"
    in_store(broken, "CREATE TABLE trajectories (x UInt8) ENGINE = Memory")  # not ours: no ServiceName
    failed = run_cli("migrate", "--store", str(broken))
    assert failed.returncode == 1, failed.stderr
    assert "schema migration 2 (trajectories.Model) failed" in failed.stderr
    assert "applied before it: 1" in failed.stderr

    unreachable = run_cli("migrate", "--store", "http://127.0.0.1:9/agenttrail")
    assert unreachable.returncode == 4, unreachable.stderr
    assert "cannot reach ClickHouse http://127.0.0.1:9" in unreachable.stderr

    held = tmp_path / "held"
    lock = StoreLock(held, "agenttrail")
    lock.acquire({"http": "127.0.0.1:4318", "grpc": "127.0.0.1:4317"})  # as a running serve holds it
    try:
        busy = run_cli("migrate", "--store", str(held))
    finally:
        lock.release()
    assert busy.returncode == 4, busy.stderr
    assert f"the embedded store {held} is in use by agenttrail serve (pid" in busy.stderr
    assert "a running serve migrated its store when it started" in busy.stderr


CLUSTER_MEMBER = """
import sys
import chdb
store, config = sys.argv[1], sys.argv[2]
(config_file := __import__("pathlib").Path(config)).write_text(
    "<clickhouse><remote_servers><prod><shard><replica><host>localhost</host><port>9000</port>"
    "</replica></shard></prod></remote_servers></clickhouse>"
)
engine = chdb.connect(f"{store}?config-file={config}")  # kept: the cursor dies with it
cursor = engine.cursor()
for statement in (
    "CREATE DATABASE IF NOT EXISTS agenttrail",
    "CREATE TABLE agenttrail.otel_traces_local (TraceId String) ENGINE = MergeTree ORDER BY TraceId",
    "CREATE TABLE agenttrail.otel_traces AS agenttrail.otel_traces_local "
    "ENGINE = Distributed(prod, agenttrail, otel_traces_local)",
):
    cursor.execute(statement)
from agenttrail.evaluators.cli.entry import main
sys.argv = ["agenttrail", "migrate", "--store", store, *sys.argv[3:]]
main()
"""


@pytest.mark.parametrize("dry_run", [False, True], ids=["migrate", "dry-run"])
def test_migrate_refuses_a_cluster_members_database(tmp_path: Path, dry_run: bool) -> None:
    """A database with `schema --cluster`'s layout (a Distributed otel_traces over
    otel_traces_local, made here in one engine given a one-shard cluster, no Keeper): migrate,
    and its dry run, exit 3 naming the table and `schema --cluster`, and create nothing."""
    store = tmp_path / "store"
    extra = ["--dry-run"] if dry_run else []
    done = subprocess.run(
        [sys.executable, "-c", CLUSTER_MEMBER, str(store), str(tmp_path / "config.xml"), *extra],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert (
        "database agenttrail is laid out for a ClickHouse cluster (otel_traces (Distributed))" in done.stderr
    )
    assert "agenttrail schema --cluster CLUSTER" in done.stderr
    assert "applying schema migration" not in done.stderr
