"""`agenttrail schema`: the cluster DDL parses in ClickHouse's own parser and its replicated
tables run on the embedded engine once replication is taken out; retention TTLs from config
reach the tables' DDL on the single-node schema."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from agenttrail.collector.cluster_ddl import cluster_ddl
from agenttrail.collector.schema import Retention, apply_retention, migrate
from agenttrail.collector.store import Store, parse_store

from .tools import DEPLOY


def all_migrations() -> list[Any]:
    from agenttrail.evaluators.composition import ALL_MIGRATIONS

    return list(ALL_MIGRATIONS)


def invoke_schema(*args: str) -> Any:
    from click.testing import CliRunner

    from agenttrail.evaluators.cli.main import cli

    return CliRunner().invoke(cli, ["schema", *args])


def run_schema(*args: str) -> str:
    result = invoke_schema(*args)
    assert result.exit_code == 0, result.output
    return str(result.stdout)


def split(sql: str) -> list[str]:
    return [part.strip() for part in sql.split(";\n\n") if part.strip().rstrip(";")]


def test_cluster_ddl_parses_in_clickhouse(store: Store) -> None:
    """Every statement of `schema --cluster` is accepted by ClickHouse's parser (formatQuery),
    and the formatted text keeps ON CLUSTER, the replicated engines and the sharding keys."""
    statements = split(run_schema("--cluster", "prod", "--database", "traces"))
    assert len(statements) > 30
    kinds: dict[str, int] = {}
    for statement in statements:
        text = statement.rstrip(";")
        (formatted,) = store.query("SELECT formatQuery({q:String})", {"q": text})[0]
        assert "ON CLUSTER prod" in formatted or formatted.startswith("INSERT INTO traces.")
        engine = re.search(r"ENGINE = `?(\w+)", formatted)
        if engine:
            kinds[engine.group(1)] = kinds.get(engine.group(1), 0) + 1
    # a Null entry table (scores_runs) keeps nothing to replicate, and has its Distributed table too
    replicated = (
        kinds["ReplicatedMergeTree"]
        + kinds["ReplicatedReplacingMergeTree"]
        + kinds["ReplicatedAggregatingMergeTree"]  # score_version_days (migration 126)
    )
    assert kinds["Distributed"] == replicated + kinds["Null"]
    assert not {k for k in kinds if k.endswith("MergeTree") and not k.startswith("Replicated")}
    joined = "\n".join(statements)
    for table in (
        *("otel_traces", "trajectories", "scores", "scores_runs"),
        *("evaluation_decisions", "assembled_traces"),
    ):
        assert f"Distributed(prod, traces, {table}_local, cityHash64(TraceId))" in joined
    assert "TO traces.otel_traces_trace_id_ts_local" in joined
    # an ARRAY JOIN's arrays are the entry table's columns, not tables to qualify
    assert "FROM traces.scores_runs_local ARRAY JOIN Metrics AS Metric" in joined
    assert "replicated_deduplication_window_seconds = 604800" in joined
    assert "non_replicated" not in joined
    assert "FROM traces.otel_traces_local" in joined
    # the rollups' views read each node's own rows; their one-off fill goes through the Distributed tables
    assert "TO traces.runs_by_start_local" in joined
    assert "FROM traces.trajectories_stored" in joined
    assert "traces.trajectories_stored ON CLUSTER prod AS SELECT * FROM traces.trajectories_local" in joined
    assert re.search(r"INSERT INTO traces\.runs_by_start .* FROM traces\.trajectories FINAL", joined)
    # ... and so do their hash samples' views, which read each node's rollups
    assert re.search(
        r"TO traces\.scores_by_start_sample_local\s+AS SELECT .* FROM traces\.scores_by_start_local WHERE",
        joined,
    )
    assert re.search(r"INSERT INTO traces\.runs_by_start_sample .* FROM traces\.runs_by_start FINAL", joined)
    assert "Distributed(prod, traces, runs_by_start_sample_local, cityHash64(TraceId))" in joined
    # projections and storage settings exist on the MergeTree tables only, not the Distributed ones
    storage_alters = re.findall(
        r"ALTER TABLE (\S+) ON CLUSTER prod (?:MODIFY SETTING|RESET SETTING|\w+ PROJECTION)", joined
    )
    assert storage_alters
    assert all(table.endswith("_local") for table in storage_alters), storage_alters
    assert (
        "ALTER TABLE traces.trajectories_local ON CLUSTER prod DROP PROJECTION IF EXISTS by_start" in joined
    )


def test_cluster_tables_run_without_replication(store: Store) -> None:
    """The local tables, views and ALTERs of the cluster DDL (replication and ON CLUSTER taken
    out, since no Keeper runs here) create on the embedded engine the same columns as the
    single-node migrations, with the configured TTLs."""
    retention = Retention(spans_days=14, trajectories_days=90, scores_days=365)
    statements = cluster_ddl(all_migrations(), "prod", store.location.database, retention)
    local = [
        re.sub(r"Replicated(\w+)\('[^']*', '\{replica\}'(?:, )?", r"\1(", s.replace(" ON CLUSTER prod", ""))
        for s in statements
        if "ENGINE = Distributed" not in s
        and not s.startswith(("CREATE DATABASE", "INSERT"))
        and not re.match(r"ALTER TABLE \S+\.(\w+)(?<!_local) ", s)
    ]
    for statement in local:
        store.command(statement)
    single = parse_store(str(store.location.path), store.location.database + "_single")
    reference = Store(single)
    try:
        migrate(reference, tuple(all_migrations()))
        for table in ("otel_traces", "trajectories", "scores", "alert_state"):
            ours = store.query(f"DESCRIBE TABLE {table}_local")
            theirs = reference.query(f"DESCRIBE TABLE {table}")
            assert [row[:2] for row in ours] == [row[:2] for row in theirs], table
    finally:
        reference.command(f"DROP DATABASE IF EXISTS {single.database}")
        reference.close()
    for table, ttl in (
        ("otel_traces_local", "toDateTime(Timestamp) + toIntervalDay(14)"),
        ("scores_local", "toDateTime(RunStart) + toIntervalDay(365)"),
        ("score_starts_of_revised_runs_local", "toDateTime(RunStart) + toIntervalDay(365)"),
    ):
        (ddl,) = store.query(f"SHOW CREATE TABLE {table}")[0]
        assert f"TTL {ttl}" in ddl, table


def test_replicas_only_keeps_the_table_names() -> None:
    """--replicas-only: replicated tables under the sidecar's own names, no Distributed table."""
    statements = split(run_schema("--cluster", "prod", "--replicas-only"))
    joined = "\n".join(statements)
    assert "Distributed" not in joined
    assert "_local" not in joined
    assert "CREATE TABLE IF NOT EXISTS agenttrail.trajectories ON CLUSTER prod" in joined


def test_bad_cluster_name_is_refused() -> None:
    """A cluster name that is not an identifier is an error naming it, not broken DDL."""
    result = invoke_schema("--cluster", "prod; DROP")
    assert result.exit_code != 0
    assert "not a plain ClickHouse identifier" in result.output


def test_retention_reaches_the_tables(store: Store) -> None:
    """Retention from config becomes each table's TTL; applying it again changes nothing; 0
    removes it."""
    migrate(store, tuple(all_migrations()))
    first = apply_retention(store, Retention(spans_days=7, trajectories_days=30, scores_days=90))
    # 7, the rollups' hash samples, the runs stored again and their score starts, the versions'
    # days, the scores' latest rows, the hourly rollups and their pointers
    assert len(first) == 18
    for table, ttl in (
        ("runs_by_hour", "toDateTime(Hour) + toIntervalDay(30)"),
        ("runs_by_start_sample", "toDateTime(Start) + toIntervalDay(30)"),
        ("runs_revised", "toDateTime(Start) + toIntervalDay(30)"),
        ("score_starts_of_revised_runs", "toDateTime(RunStart) + toIntervalDay(90)"),
        ("score_version_days", "toDateTime(AgedFrom) + toIntervalDay(90)"),
        ("scores_latest_by_start", "toDateTime(RunStart) + toIntervalDay(90)"),
        ("otel_traces", "toDateTime(Timestamp) + toIntervalDay(7)"),
        ("trajectories", "toDateTime(Start) + toIntervalDay(30)"),
        ("scores", "toDateTime(RunStart) + toIntervalDay(90)"),
    ):
        (ddl,) = store.query(f"SHOW CREATE TABLE {table}")[0]
        assert f"TTL {ttl}" in ddl, table
    assert apply_retention(store, Retention(spans_days=7, trajectories_days=30, scores_days=90)) == []
    changed = apply_retention(store, Retention(spans_days=3, trajectories_days=30, scores_days=0))
    assert changed == [
        "ALTER TABLE otel_traces MODIFY TTL toDateTime(Timestamp) + toIntervalDay(3)",
        "ALTER TABLE otel_traces_trace_id_ts MODIFY TTL toDateTime(Start) + toIntervalDay(3)",
        "ALTER TABLE scores REMOVE TTL",
        "ALTER TABLE evaluation_decisions REMOVE TTL",
        "ALTER TABLE scores_by_start REMOVE TTL",
        "ALTER TABLE scores_by_start_sample REMOVE TTL",
        "ALTER TABLE score_starts_of_revised_runs REMOVE TTL",
        "ALTER TABLE score_version_days REMOVE TTL",
        "ALTER TABLE scores_latest_by_start REMOVE TTL",
        "ALTER TABLE scores_by_hour REMOVE TTL",
        "ALTER TABLE lowest_by_hour REMOVE TTL",
    ]
    (ddl,) = store.query("SHOW CREATE TABLE scores")[0]
    assert "TTL" not in ddl


@pytest.mark.slow
def test_sidecar_applies_retention_from_config(start_sidecar: Any, tmp_path: Path) -> None:
    """The retention_* settings of a config file reach the tables when the sidecar starts."""
    from agenttrail.collector.config import load_config

    config_file = tmp_path / "agenttrail.yaml"
    config_file.write_text("collector:\n  retention_spans_days: 10\n  retention_trajectories_days: 20\n")
    config = load_config(config_file=config_file, environ={})
    sidecar = start_sidecar(
        retention_spans_days=config.retention_spans_days,
        retention_trajectories_days=config.retention_trajectories_days,
    )
    (ddl,) = sidecar.store.query("SHOW CREATE TABLE otel_traces")[0]
    assert "TTL toDateTime(Timestamp) + toIntervalDay(10)" in ddl
    (ddl,) = sidecar.store.query("SHOW CREATE TABLE trajectories")[0]
    assert "TTL toDateTime(Start) + toIntervalDay(20)" in ddl
    (ddl,) = sidecar.store.query("SHOW CREATE TABLE scores")[0]
    assert "TTL" not in ddl


def test_single_node_schema_runs_on_the_embedded_engine(store: Store) -> None:
    """`agenttrail schema` without --cluster prints statements that build, on an empty
    database, the same tables as the migrations."""
    single = parse_store(str(store.location.path), store.location.database + "_printed")
    printed = Store(single)
    try:
        for statement in split(run_schema()):
            printed.command(statement.rstrip(";"))
        migrate(store, tuple(all_migrations()))
        for table in ("otel_traces", "trajectories", "scores", "drift_events", "criteria_sets"):
            assert printed.query(f"DESCRIBE TABLE {table}") == store.query(f"DESCRIBE TABLE {table}"), table
    finally:
        printed.command(f"DROP DATABASE IF EXISTS {single.database}")
        printed.close()


def test_the_readme_sql_parses_and_names_real_settings(store: Store) -> None:
    """deploy/README.md's settings profile is valid ClickHouse SQL naming settings this
    ClickHouse knows, and the retention settings it documents are the sidecar's."""
    from agenttrail.collector.config import SETTINGS

    text = (DEPLOY / "README.md").read_text()
    blocks = re.findall(r"```sql\n(.*?)```", text, re.S)
    assert blocks
    for block in blocks:
        store.query("SELECT formatQuery({q:String})", {"q": block.strip().rstrip(";")})
        for name in re.findall(r"^\s+(\w+) = ", block, re.M):
            assert store.query(
                "SELECT count() FROM system.settings WHERE name = {n:String}", {"n": name}
            ) == [(1,)], name
    documented = set(re.findall(r"`(retention_\w+_days)`", text))
    assert documented == {s.name for s in SETTINGS if s.name.startswith("retention_")}


@pytest.mark.slow
@pytest.mark.timeout(450)  # a sidecar in a subprocess (up to 400 s on a loaded machine)
def test_the_sidecar_runs_on_the_cluster_layout(tmp_path: Path) -> None:
    """On the cluster DDL's tables (Distributed over local tables, in an engine given a cluster
    and the README's settings profile), the unchanged sidecar runs no DDL of its own, stores the
    spans, assembles and scores every run through the Distributed tables, stays healthy, and
    the configured TTL is on the local table."""
    import json
    import sys

    from .tools import run

    runs = 20
    result = run(
        sys.executable, Path(__file__).parent / "cluster_sidecar.py", tmp_path, str(runs), timeout=400
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(summary["engines"].values()) == {"Distributed"}, summary["engines"]
    assert summary["spans"] == 3 * runs
    assert summary["runs"] == runs
    assert summary["failed"] == runs // 4
    assert summary["scored_runs"] == runs
    assert summary["per_shard_runs"] == {"shard_1": runs}
    assert "TTL toDateTime(Timestamp) + toIntervalDay(30)" in summary["ttl"]
    assert summary["health"] is True
    # What the README says does not work through a Distributed table.
    assert "DELETE query is not supported" in summary["delete"]
