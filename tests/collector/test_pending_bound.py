"""The assembler holds at most `max_pending_traces` traces in memory: while it is behind, a
batch's new traces beyond that wait in `trace_arrivals` (what the writer stores before it
notifies) and are read back as room frees, oldest first. Nothing is lost or assembled twice, and
a restart still finds what was not assembled (recover()), held in memory or not."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from otlp_builders import agent_span, new_span_id, new_trace_id, request, tool_span

from agenttrail.collector import assembler as assembler_module
from agenttrail.collector.assembler import Assembler
from agenttrail.collector.config import COLLECTOR, SidecarConfig
from agenttrail.collector.ingest import IngestPipeline
from agenttrail.collector.rows import ArrivalRow


def agent_trace(trace_id: str) -> bytes:
    root = new_span_id()
    return request(
        agent_span(trace_id, root, 0, 100), tool_span(trace_id, new_span_id(), root, "lookup", 10, 20)
    ).SerializeToString()


def runs_by_trace(store: Any, traces: list[str]) -> dict[str, list[tuple[int, int]]]:
    """Each trace's stored versions of its runs (revision, deleted), every row, not FINAL."""
    rows = store.query(
        "SELECT TraceId, Revision, IsDeleted FROM trajectories WHERE TraceId IN {ids:Array(String)} "
        "ORDER BY TraceId, Revision",
        {"ids": traces},
    )
    found: dict[str, list[tuple[int, int]]] = {trace: [] for trace in traces}
    for trace_id, revision, deleted in rows:
        found[trace_id].append((int(revision), int(deleted)))
    return found


def store_batches(pipeline: IngestPipeline, batches: list[list[str]]) -> None:
    """Each batch of traces sent, then stored by the real writer (which records their arrivals
    and notifies the assembler) one spool segment, so one batch, at a time: the pipeline's
    batch_max_rows is a batch's spans."""
    for batch in batches:
        for trace_id in batch:
            pipeline.accept(agent_trace(trace_id))
    pipeline.start()
    assert pipeline.flush(60)
    pipeline.stop()


def bounded(
    store: Any, tmp_path: Path, room: int, batch_spans: int, **options: Any
) -> tuple[Assembler, IngestPipeline]:
    """An assembler holding at most `room` traces, recovered as at a start, fed by a real writer
    whose spool segments (so batches) hold `batch_spans` spans."""
    assembler = Assembler(
        store.clone(), quiet_period_s=0.0, max_pending_traces=room, sql_min_traces=1, **options
    )
    assembler.recover()
    pipeline = IngestPipeline(
        store.clone(),
        tmp_path / "spool",
        batch_max_rows=batch_spans,
        flush_interval_s=30,
        on_stored=assembler.notify,
    )
    return assembler, pipeline


def assemble_all(assembler: Assembler, rounds: int = 10) -> None:
    """Assembly rounds until nothing waits (each reads back what room allows)."""
    for _ in range(rounds):
        if assembler.pending_count == 0:
            break
        assembler.assemble_due()


def test_traces_beyond_the_bound_are_read_back_from_their_arrivals_and_each_assembled_once(
    store: Any, tmp_path: Path
) -> None:
    """Five batches of three new traces with room for four in memory: the first batch is held
    and one trace of the second, the other ten wait as arrival ranges (counted as pending); the
    assembler reads them back a range at a time, never holding more than four, and every trace
    gets one run, revision 1."""
    assembler, pipeline = bounded(store, tmp_path, room=4, batch_spans=6)
    batches = [[new_trace_id() for _ in range(3)] for _ in range(5)]
    store_batches(pipeline, batches)
    assert assembler.held_count == 4
    assert assembler.overflowed_traces == 11  # the second batch's two not held, then all nine
    assert assembler.pending_count == 15
    held_while_assembling: list[int] = []
    assembler.listeners.append(lambda: held_while_assembling.append(assembler.held_count))
    assemble_all(assembler, rounds=20)
    assert assembler.pending_count == 0
    assert assembler.reread_traces == 11
    assert held_while_assembling
    assert max(held_while_assembling) <= 4
    traces = [trace for batch in batches for trace in batch]
    assert runs_by_trace(store, traces) == {trace: [(1, 0)] for trace in traces}
    assert assembler.wait_idle(1)


def test_what_was_not_held_is_found_by_recover_after_a_restart(store: Any, tmp_path: Path) -> None:
    """A sidecar killed while traces wait outside memory: the next start's recover() finds them
    all from their arrivals (none of them was assembled), held by the first run or not, and
    holds the oldest within its own bound, the rest as ranges read back later."""
    first, pipeline = bounded(store, tmp_path, room=2, batch_spans=4)
    batches = [[new_trace_id() for _ in range(2)] for _ in range(3)]
    store_batches(pipeline, batches)
    assert (first.held_count, first.overflowed_traces) == (2, 4)
    # -- killed before assembling anything; restart, with room for three --
    second = Assembler(store.clone(), quiet_period_s=0.0, max_pending_traces=3, sql_min_traces=1)
    assert second.recover() == 6
    assert (second.held_count, second.pending_count) == (3, 6)
    assemble_all(second)
    assert second.pending_count == 0
    traces = [trace for batch in batches for trace in batch]
    assert runs_by_trace(store, traces) == {trace: [(1, 0)] for trace in traces}


def test_recover_reads_no_more_traces_than_its_bound(store: Any, tmp_path: Path) -> None:
    """recover() brings at most its room of traces into Python; the rest come back from
    ClickHouse as ranges of their last arrivals (a restart far behind read every trace of the
    lookback as one list first), and every trace is still assembled once."""
    _first, pipeline = bounded(store, tmp_path, room=2, batch_spans=4)
    batches = [[new_trace_id() for _ in range(2)] for _ in range(4)]
    store_batches(pipeline, batches)
    second = Assembler(store.clone(), quiet_period_s=0.0, max_pending_traces=3, sql_min_traces=1)
    returned: list[int] = []
    query = second._store.query

    def counted(sql: str, parameters: Any = None, **options: Any) -> Any:
        rows = query(sql, parameters, **options)
        returned.append(sum(1 for row in rows if isinstance(row[0], str)))  # rows of a trace each
        return rows

    second._store.query = counted  # type: ignore[method-assign]
    assert second.recover() == 8
    assert max(returned) == 3
    assert (second.held_count, second.pending_count) == (3, 8)
    second._store.query = query  # type: ignore[method-assign]
    assemble_all(second)
    assert second.pending_count == 0
    traces = [trace for batch in batches for trace in batch]
    assert runs_by_trace(store, traces) == {trace: [(1, 0)] for trace in traces}


def test_a_recovered_trace_not_held_whose_state_was_lost_is_assembled_again(
    store: Any, tmp_path: Path
) -> None:
    """A crash between a trace's runs and its state, and a restart with more to resume than its
    bound: the trace waits in a range, and when read back it is still known to have runs (a
    re-assembly, revision 2), not assembled as if new (a second revision 1)."""
    first, pipeline = bounded(store, tmp_path, room=10, batch_spans=4)
    lost = new_trace_id()
    store_batches(pipeline, [[lost]])
    assemble_all(first)
    assert runs_by_trace(store, [lost]) == {lost: [(1, 0)]}
    store.command("DELETE FROM assembled_traces WHERE TraceId = {t:String}", {"t": lost})
    older = new_trace_id()
    store_batches(
        IngestPipeline(store.clone(), tmp_path / "spool-2", batch_max_rows=4, flush_interval_s=30), [[older]]
    )
    # the lost trace's last arrival after the other's: the other is held, the lost one waits
    store.insert("trace_arrivals", [ArrivalRow(lost, f"{time.time():.6f}", 1)])
    second = Assembler(store.clone(), quiet_period_s=0.0, max_pending_traces=1, sql_min_traces=1)
    assert second.recover() == 2
    assert (second.held_count, second.pending_count) == (1, 2)
    assemble_all(second)
    assert runs_by_trace(store, [older, lost]) == {older: [(1, 0)], lost: [(1, 0), (2, 0)]}


def test_a_held_trace_notified_again_while_others_wait_outside_memory_stays_held(
    store: Any, tmp_path: Path
) -> None:
    """The bound is on new traces: a held trace's later batch updates it in memory (its run is
    assembled once, from both batches) even while new traces go to arrival ranges."""
    assembler, pipeline = bounded(store, tmp_path, room=2, batch_spans=3)
    held, late, waiting = new_trace_id(), new_trace_id(), new_trace_id()
    root = new_span_id()
    pipeline.accept(request(agent_span(held, root, 0, 100)).SerializeToString())
    pipeline.accept(agent_trace(late))
    pipeline.accept(agent_trace(waiting))
    pipeline.accept(request(tool_span(held, new_span_id(), root, "lookup", 10, 20)).SerializeToString())
    store_batches(pipeline, [])
    assert (assembler.held_count, assembler.overflowed_traces) == (2, 1)
    assemble_all(assembler)
    assert runs_by_trace(store, [held, late, waiting]) == {held: [(1, 0)], late: [(1, 0)], waiting: [(1, 0)]}
    [(tools,)] = store.query("SELECT ToolCount FROM trajectories WHERE TraceId = {t:String}", {"t": held})
    assert tools == 1


def test_a_trace_in_two_ranges_is_assembled_once_with_both_batches(store: Any, tmp_path: Path) -> None:
    """Room for two: a trace whose first batch went to one range and its second to a later one
    is read back with its last arrival, so it is assembled once from both batches, not a second
    time (revision 2) when the later range is read."""
    assembler, pipeline = bounded(store, tmp_path, room=2, batch_spans=4, idle_timeout_s=0.0)
    a, b, c, split, d = (new_trace_id() for _ in range(5))
    root = new_span_id()
    pipeline.accept(agent_trace(a))
    pipeline.accept(agent_trace(b))  # batch 1 (four spans): held
    pipeline.accept(agent_trace(c))
    lookup = tool_span(split, new_span_id(), root, "lookup", 10, 20)
    pipeline.accept(request(agent_span(split, root, 0, 100), lookup).SerializeToString())  # batch 2
    refund = tool_span(split, new_span_id(), root, "refund", 30, 40)
    email = tool_span(split, new_span_id(), root, "email", 50, 60)
    pipeline.accept(request(refund, email).SerializeToString())
    pipeline.accept(agent_trace(d))  # batch 3: a range of its own
    store_batches(pipeline, [])
    assert (assembler.held_count, assembler.overflowed_traces) == (2, 4)
    assemble_all(assembler)
    assert assembler.pending_count == 0
    found = runs_by_trace(store, [a, b, c, split, d])
    assert found[split] == [(1, 0)]
    [(tools,)] = store.query("SELECT ToolCount FROM trajectories WHERE TraceId = {t:String}", {"t": split})
    assert tools == 3
    assert {trace: found[trace] for trace in (a, b, c, d)} == {trace: [(1, 0)] for trace in (a, b, c, d)}


def test_serve_bounds_the_assemblers_memory_by_the_setting(collector_with: Any) -> None:
    """`assembly_max_pending_traces` reaches the assembler; its default is the assembler's own."""
    [setting] = [s for s in COLLECTOR.settings if s.name == "assembly_max_pending_traces"]
    default = assembler_module.MAX_PENDING_TRACES
    assert SidecarConfig().assembly_max_pending_traces == setting.default == default
    sidecar = collector_with(assembly_max_pending_traces=7)
    assert sidecar.assembler is not None
    assert sidecar.assembler.max_pending_traces == 7
    detail = sidecar.health()[1]
    assert (detail["pending_traces_held"], detail["traces_not_held"]) == (0, 0)
