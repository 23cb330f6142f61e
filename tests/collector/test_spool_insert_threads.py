"""The writer's spool insert runs on one ClickHouse thread on the embedded engine: each parsing
and insert thread holds blocks of its own, and one thread halves the insert's memory at the same
CPU (docs/performance.md "rss22").

Runs in a fresh process: the query log that says how the insert ran is on through the engine's
config file, which chDB reads once per process."""

import subprocess
import sys
import textwrap
from pathlib import Path

QUERY_LOG = """<query_log><database>system</database><table>query_log</table>
<flush_interval_milliseconds>1000</flush_interval_milliseconds></query_log>"""

SCRIPT = """
    import sys
    sys.path.insert(0, {tests!r})
    from otlp_builders import agent_span, new_span_id, new_trace_id, request

    import agenttrail.collector.store as store_module
    from agenttrail.collector.ingest import IngestPipeline
    from agenttrail.collector.schema import migrate
    from agenttrail.collector.store import Store, parse_store

    config = {config!r}
    with open(config, "w") as file:
        file.write(store_module.engine_config_xml({query_log!r}))
    store_module.EMBEDDED_ENGINE["config-file"] = config
    store = Store(parse_store({path!r}))
    migrate(store)
    from pathlib import Path
    pipeline = IngestPipeline(store.clone(), Path({spool!r}), flush_interval_s=0.05)
    assert pipeline.clickhouse_decoding
    pipeline.start()
    pipeline.accept(request(agent_span(new_trace_id(), new_span_id(), 0, 1)).SerializeToString())
    assert pipeline.flush(60)
    pipeline.stop()
    store.command("SYSTEM FLUSH LOGS")
    print(store.query(
        "SELECT Settings['max_threads'], count() FROM system.query_log "
        "WHERE type = 'QueryFinish' AND query LIKE 'INSERT INTO otel_traces%' "
        "AND query NOT LIKE '%decode-probe%' GROUP BY 1"
    ))
    print(store.query("SELECT count() FROM otel_traces"))
"""


def test_the_spool_insert_runs_on_one_thread_on_the_embedded_engine(tmp_path: Path) -> None:
    code = textwrap.dedent(
        SCRIPT.format(
            tests=str(Path(__file__).parent.parent),
            config=str(tmp_path / "engine.xml"),
            query_log=QUERY_LOG,
            path=str(tmp_path / "store"),
            spool=str(tmp_path / "spool"),
        )
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    inserts, stored = result.stdout.strip().splitlines()
    assert stored == "[(1,)]"
    assert inserts == "[('1', 1)]"
