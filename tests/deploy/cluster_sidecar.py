"""Run as its own process: the cluster schema inside one embedded engine, and a sidecar (the
same code as on one server) ingesting, assembling and scoring runs through its Distributed
tables.

The engine gets a `remote_servers` cluster `prod` of one shard on this engine (a second shard
would need a ClickHouse server to connect to) and the settings profile deploy/README.md asks
for. The local tables are the cluster DDL's `<table>_local` (in database shard_1) with
replication taken out, since no Keeper runs here; the Distributed tables are the cluster DDL's,
under the sidecar's own names in `agenttrail`.

    python cluster_sidecar.py WORKDIR RUNS   # prints a JSON summary
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

CONFIG = """<clickhouse>
  <tcp_port>9000</tcp_port>
  <remote_servers>
    <prod>
      <shard><replica><host>localhost</host><port>9000</port></replica></shard>
    </prod>
  </remote_servers>
  <profiles>
    <default>
      <distributed_foreground_insert>1</distributed_foreground_insert>
      <distributed_product_mode>local</distributed_product_mode>
    </default>
  </profiles>
</clickhouse>
"""
SHARDS = ("shard_1",)


def main(workdir: Path, runs: int) -> None:
    import chdb

    from agenttrail.collector.cluster_ddl import cluster_ddl
    from agenttrail.collector.config import SidecarConfig
    from agenttrail.collector.errors import StoreError
    from agenttrail.collector.schema import Retention
    from agenttrail.evaluators.composition import ALL_MIGRATIONS, build_sidecar

    store_dir = workdir / "store"
    (workdir / "config.xml").write_text(CONFIG)
    engine = chdb.connect(f"{store_dir}?config-file={workdir / 'config.xml'}")
    cursor = engine.cursor()
    ddl = cluster_ddl(ALL_MIGRATIONS, "prod", "agenttrail", Retention(spans_days=30))
    for shard in SHARDS:
        cursor.execute(f"CREATE DATABASE IF NOT EXISTS {shard}")
    for statement in ddl:
        statement = statement.replace(" ON CLUSTER prod", "")
        statement = re.sub(r"Replicated(\w+)\('[^']*', '\{replica\}'(?:, )?", r"\1(", statement)
        statement = statement.replace("replicated_deduplication_window_seconds = 604800", "")
        statement = statement.replace("replicated_deduplication_window = 10000, ", "")
        statement = statement.replace("replicated_deduplication_window = 10000", "")
        statement = re.sub(r"SETTINGS\s*(;|$)", "", statement.rstrip()).rstrip(", \n")
        if re.search(r"\bagenttrail\.\w+_local\b", statement) and "ENGINE = Distributed" not in statement:
            for shard in SHARDS:  # the local tables, views and their ALTERs: on every shard
                cursor.execute(statement.replace("agenttrail.", f"{shard}."))
        else:
            statement = statement.replace(" AS agenttrail.", " AS shard_1.")  # the columns
            cursor.execute(statement.replace("Distributed(prod, agenttrail, ", "Distributed(prod, shard_1, "))
    # the engine stays open: the sidecar's clients join it, cluster config and all

    config = SidecarConfig(
        store=str(store_dir),
        grpc="127.0.0.1:0",
        http="127.0.0.1:0",
        quiet_period_s=0.3,
        idle_timeout_s=1.0,
        flush_interval_s=0.05,
        spool_dir=str(workdir / "spool"),
    )
    config_file = workdir / "agenttrail.yaml"
    config_file.write_text("evaluators:\n  poll_interval_s: 0.2\n")
    sidecar = build_sidecar(config, str(config_file))
    sidecar.start()
    try:
        assert sidecar.pipeline is not None
        assert sidecar.store is not None
        from agenttrail.evaluators.scoring.reference_store import store_reference_set
        from agenttrail.evaluators.scoring.references import parse_reference_set

        store_reference_set(
            sidecar.store,
            parse_reference_set(
                {"refund": {"reference_trajectory": [{"tool_name": "lookup"}, {"tool_name": "refund"}]}}
            ),
            source="cluster-test",
        )
        sys.path.insert(0, str(Path(__file__).parents[1]))
        from otlp_builders import SpanSpec, new_span_id, new_trace_id, request

        now_ms = (time.time_ns() - 1_790_000_000_000_000_000) / 1e6
        for index in range(runs):
            trace, root = new_trace_id(), new_span_id()
            agent = {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "bot",
                "agenttrail.task": "refund",
            }
            spans = [
                SpanSpec(
                    trace,
                    root,
                    "invoke_agent bot",
                    now_ms,
                    now_ms + 50,
                    attributes=agent,
                    error="RuntimeError" if index % 4 == 0 else None,
                )
            ]
            for step, tool in enumerate(("lookup", "refund")):
                attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
                spans.append(
                    SpanSpec(
                        trace,
                        new_span_id(),
                        f"execute_tool {tool}",
                        now_ms + step * 10 + 1,
                        now_ms + step * 10 + 9,
                        parent=root,
                        attributes=attrs,
                    )
                )
            sidecar.pipeline.accept(request(*spans).SerializeToString())
        assert sidecar.wait_until_assembled(timeout_s=120)
        store = sidecar.store
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            scored = store.query("SELECT uniqExact(TraceId) FROM scores FINAL")[0][0]
            if scored >= runs:
                break
            time.sleep(0.5)
        engines = dict(
            store.query("SELECT name, engine FROM system.tables WHERE database = currentDatabase()")
        )
        summary = {
            "engines": engines,
            "spans": store.query("SELECT count() FROM otel_traces")[0][0],
            "runs": store.query("SELECT count() FROM trajectories FINAL WHERE IsDeleted = 0")[0][0],
            "failed": store.query("SELECT sum(Failure) FROM trajectories FINAL WHERE IsDeleted = 0")[0][0],
            "scored_runs": store.query("SELECT uniqExact(TraceId) FROM scores FINAL")[0][0],
            "per_shard_runs": {
                shard: store.query(f"SELECT count() FROM {shard}.trajectories_local")[0][0]
                for shard in SHARDS
            },
            "ttl": store.query(
                "SELECT create_table_query FROM system.tables "
                "WHERE database = 'shard_1' AND name = 'otel_traces_local'"
            )[0][0],
            "health": sidecar.health()[0],
        }
        try:  # the evaluator's sweep of deleted runs' scores (deploy/README.md: --replicas-only)
            store.command("DELETE FROM scores WHERE TraceId = ''")
            summary["delete"] = "ok"
        except StoreError as exc:
            summary["delete"] = str(exc)
    finally:
        sidecar.stop()
    print(json.dumps(summary, default=str))


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
