"""The run queue's FINAL read takes the pending runs' keys only; their columns (the tool calls)
are read by trace id without FINAL, which would hold a block of every part's calls at once (~90
MiB a batch under overload). Runs in a fresh process: the engine's query log is an engine option,
set when the first client opens it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

QUERY_LOG = """<clickhouse><query_log><database>system</database><table>query_log</table>
<flush_interval_milliseconds>1000</flush_interval_milliseconds></query_log></clickhouse>"""

SCRIPT = """
    import agenttrail.collector.store as store_module
    from agenttrail.collector.schema import migrate
    from agenttrail.collector.store import Store, parse_store
    from agenttrail.evaluators.composition import ALL_MIGRATIONS
    from agenttrail.evaluators.scoring.run_queue import pending_runs

    store_module.EMBEDDED_ENGINE["config-file"] = {config!r}
    store = Store(parse_store({path!r}))
    migrate(store, ALL_MIGRATIONS)
    store.command("SYSTEM STOP MERGES trajectories")
    columns = "TraceId, RootSpanId, Revision, Version, IsDeleted, ToolCalls, AssembledAt"
    for trace, revision, version, calls, ago in (
        ("a", 1, 1, "a1", 30), ("b", 1, 1, "b1", 20), ("a", 2, 2, "a2", 10), ("c", 1, 1, "c1", 5)
    ):
        store.command(
            f"INSERT INTO trajectories ({{columns}}) SELECT '{{trace}}', 'root', {{revision}}, "
            f"{{version}}, 0, '{{calls}}', now64(6) - {{ago}}"
        )
    store.command(
        "INSERT INTO evaluation_decisions (TraceId, RootSpanId, Evaluator, EvaluatorVersion, Revision, "
        "Decision) VALUES ('c', 'root', 'e', 'v1', 1, 'scored')"
    )
    rows = pending_runs(store, "v1", "t.TraceId, t.Revision, t.ToolCalls", params={{"lookback": 3600}})
    store.command("SYSTEM FLUSH LOGS")
    calls = f"{{store.location.database}}.trajectories.ToolCalls"
    [(final_reads, reads)] = store.query(
        "SELECT countIf(positionCaseInsensitive(query, 'FINAL') > 0), count() FROM system.query_log "
        "WHERE type = 'QueryFinish' AND has(columns, {{calls:String}})",
        {{"calls": calls}},
    )
    print(rows, final_reads, reads)
"""


def test_pending_runs_read_the_calls_without_final(tmp_path: Path) -> None:
    """Each pending run comes with its pending revision's columns, in assembly order (a decided
    run left out), and no FINAL statement reads the tool calls."""
    config = tmp_path / "query_log.xml"
    config.write_text(QUERY_LOG)
    code = textwrap.dedent(SCRIPT.format(config=str(config), path=str(tmp_path / "store")))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "[('b', 1, 'b1'), ('a', 2, 'a2')] 0 1"
