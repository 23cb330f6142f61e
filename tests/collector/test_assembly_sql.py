"""Plain traces assembled in ClickHouse (assembly_sql) give the trajectories build_runs gives.

build_runs is the definition; the SQL path may only take a trace when it gets the same result.
Each random trace is stored twice under two trace ids, one assembled with the SQL path on, one
with it off (build_runs alone), and the stored rows are compared: every column, the JSON
columns as the values they hold (the SQL path stores an attribute's JSON text as it came, Python
re-encodes it).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from otlp_builders import new_span_id, new_trace_id

from agenttrail.collector.assembler import Assembler, even_chunk, trajectory_row
from agenttrail.collector.otlp_decode import ns_to_clickhouse
from agenttrail.collector.rows import ArrivalRow
from agenttrail.collector.schema import MIGRATIONS, migrate
from agenttrail.collector.store import Store, parse_store
from agenttrail.collector.trajectory import SpanEvent, SpanRecord, build_runs

BASE_NS = 1_750_000_000_000_000_000
_SPAN_COLUMNS = (
    "Timestamp",
    "TraceId",
    "SpanId",
    "ParentSpanId",
    "SpanName",
    "ServiceName",
    "SpanAttributes",
    "Duration",
    "StatusCode",
    "StatusMessage",
    "Events.Timestamp",
    "Events.Name",
    "Events.Attributes",
)
_JSON_COLUMNS = ("Input", "Output", "ToolCalls", "AvailableTools")
_ROWS = """
SELECT * EXCEPT (TraceId, AssembledAt, Version) FROM trajectories FINAL
WHERE TraceId = {trace:String} ORDER BY RootSpanId
"""


def store_spans(store: Any, trace_id: str, spans: list[SpanRecord]) -> None:
    rows = [
        (
            ns_to_clickhouse(s.start_ns),
            trace_id,
            s.span_id,
            s.parent_span_id,
            s.name,
            s.service_name,
            dict(s.attributes),
            s.duration_ns,
            s.status_code,
            s.status_message,
            [ns_to_clickhouse(e.time_ns) for e in s.events],
            [e.name for e in s.events],
            [dict(e.attributes) for e in s.events],
        )
        for s in spans
    ]
    store.insert_rows("otel_traces", _SPAN_COLUMNS, rows)


def stored_runs(store: Any, trace_id: str) -> list[dict[str, Any]]:
    names, rows = store.query_with_names(
        _ROWS.replace("{trace:String}", "'" + trace_id + "'")  # a hex id of our own
    )
    runs = []
    for row in rows:
        run = dict(zip(names, row, strict=True))
        for column in _JSON_COLUMNS:
            run[column] = json.loads(run[column]) if run[column] else run[column]
        runs.append(run)
    return runs


def assemble_both(store: Any, traces: list[list[SpanRecord]]) -> tuple[list[tuple[Any, Any]], int]:
    """Each trace through the SQL path and through build_runs alone: the pairs of stored runs,
    and how many runs the SQL path took."""
    pairs = []
    by_sql = Assembler(store.clone(), quiet_period_s=0.0, sql_min_traces=1)
    by_python = Assembler(store.clone(), quiet_period_s=0.0, sql_assembly=False)
    for spans in traces:
        sql_id, python_id = new_trace_id(), new_trace_id()
        store_spans(store, sql_id, spans)
        store_spans(store, python_id, spans)
        by_sql.notify({sql_id: True}, time.time())
        by_python.notify({python_id: True}, time.time())
        pairs.append((sql_id, python_id))
    by_sql.assemble_due()
    by_python.assemble_due()
    assert by_sql.failures == 0
    assert by_python.failures == 0
    return [(stored_runs(store, a), stored_runs(store, b)) for a, b in pairs], by_sql.plain_runs


_PLAIN_TEXTS = [
    '{"order_id": 7, "reason": "broken"}',
    '{"kwargs": {"a": 1}, "args": []}',
    '{"kwargs": {"a": 1}}',
    "[1, 2.5, null, true]",
    '"quoted"',
    "42",
    "null",
    " null ",
    "",
    "plain text",
    '{"a": "é ü 日本"}',
    "ünïcode text",
    '{"a": 1, "a": 2}',
    "12345678901234567890123",
    '  {"x": [1, {"y": "z"}]}  ',
]
# Texts Python's json and ClickHouse's validator read differently, or that look like JSON but
# are not: they must send the trace to build_runs.
_ODD_TEXTS = ["1E400", "NaN", "[NaN]", "-Infinity", "no", "{not json", "[" * 600 + "]" * 600]
_PLAIN_IDS = ["call_1", "call_2", "", "<not specified>", "NONE", "n/a"]
_PLAIN_TOKENS = ["12", "0", "", "0012"]
# Each trace is drawn either within the values the SQL path must handle (`odd` False), or with
# anything, values and shapes that must send it to build_runs included.
_VALUES = {
    False: (st.sampled_from(_PLAIN_TEXTS), st.sampled_from(_PLAIN_IDS), st.sampled_from(_PLAIN_TOKENS)),
    True: (
        st.sampled_from(_PLAIN_TEXTS + _ODD_TEXTS),
        st.sampled_from([*_PLAIN_IDS, " spaced ", "x\ty"]),
        st.sampled_from([*_PLAIN_TOKENS, "1e3", "abc", "7.5", "١٢"]),
    ),
}
_NAMES = st.sampled_from(["lookup", "search", "refund"])


@st.composite
def attributes(draw: st.DrawFn, role: str, odd: bool) -> dict[str, str]:
    attrs: dict[str, str] = {}
    texts, ids, tokens = _VALUES[odd]

    def maybe(key: str, value: st.SearchStrategy[str]) -> None:
        if draw(st.booleans()):
            attrs[key] = draw(value)

    def rarely(key: str, value: st.SearchStrategy[str]) -> None:
        # Shapes that make a trace not plain: rare, so that most traces test the SQL path.
        if odd and draw(st.booleans()):
            attrs[key] = draw(value)

    if role == "agent":
        attrs.update(
            draw(
                st.sampled_from(
                    [
                        {"gen_ai.operation.name": "invoke_agent"},
                        {"openinference.span.kind": "AGENT"},
                        {"openinference.span.kind": "agent"},
                        {"traceloop.span.kind": "workflow"},
                    ]
                )
            )
        )
        if draw(st.integers(0, 5)):
            attrs["gen_ai.agent.name"] = draw(st.sampled_from(["support", "router"]))
        maybe("gen_ai.agent.name", st.sampled_from(["support", "", "router"]))
        maybe("agent.name", st.sampled_from(["oi-agent", ""]))
        maybe("traceloop.entity.name", st.sampled_from(["tl-agent", ""]))
        maybe("gen_ai.agent.id", st.sampled_from(["a-1", ""]))
        maybe("gen_ai.agent.version", st.sampled_from(["1.2", ""]))
        maybe("agenttrail.task", st.sampled_from(["refund", ""]))
        maybe("gen_ai.conversation.id", st.sampled_from(["c-1", ""]))
        maybe("session.id", st.sampled_from(["s-1", ""]))
        maybe("input.value", texts)
        maybe("output.value", texts)
        maybe("traceloop.entity.input", texts)
        rarely("gen_ai.tool.definitions", st.just('[{"name": "lookup", "description": "d"}]'))
        rarely("agenttrail.judge", st.sampled_from(["true", "false"]))
    elif role == "tool":
        attrs.update(
            draw(
                st.sampled_from(
                    [
                        {"gen_ai.operation.name": "execute_tool"},
                        {"openinference.span.kind": "TOOL"},
                        {"traceloop.span.kind": "tool"},
                    ]
                )
            )
        )
        maybe("gen_ai.tool.name", _NAMES)
        maybe("tool.name", _NAMES)
        maybe("gen_ai.tool.call.id", ids)
        maybe("tool_call.id", ids)
        maybe("gen_ai.tool.call.arguments", texts)
        maybe("input.value", texts)
        maybe("gen_ai.tool.call.result", texts)
        maybe("output.value", texts)
        maybe("traceloop.entity.output", texts)
        maybe("gen_ai.tool.description", st.sampled_from(["Find an order", ""]))
        maybe("tool.description", st.sampled_from(["Search", ""]))
        maybe("gen_ai.tool.json_schema", texts)
        maybe("tool.parameters", st.sampled_from(['{"type": "object"}', "[]", ""]))
        maybe("error.type", st.sampled_from(["Timeout", ""]))
    elif role == "model":
        attrs.update(
            draw(
                st.sampled_from(
                    [
                        {"gen_ai.operation.name": "chat"},
                        {"openinference.span.kind": "LLM"},
                        {"llm.request.type": "chat"},
                    ]
                )
            )
        )
        maybe("gen_ai.usage.input_tokens", tokens)
        maybe("gen_ai.usage.output_tokens", tokens)
        maybe("gen_ai.usage.prompt_tokens", tokens)
        maybe("llm.token_count.completion", tokens)
        maybe("gen_ai.request.model", st.sampled_from(["gpt-4o", ""]))
        maybe("gen_ai.response.model", st.sampled_from(["gpt-4o-2024", ""]))
        maybe("llm.model_name", st.sampled_from(["llama", ""]))
        rarely(
            "gen_ai.output.messages",
            st.just(
                '[{"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "lookup"}]}]'
            ),
        )
        rarely("llm.output_messages.0.message.tool_calls.0.tool_call.function.name", _NAMES)
    else:
        maybe("http.method", st.just("GET"))
    return attrs


_PLAIN_EVENTS = [("exception", {"exception.type": "ValueError"}), ("exception", {}), ("log", {})]
_EVENTS = {
    False: st.lists(st.sampled_from(_PLAIN_EVENTS), max_size=2),
    True: st.lists(
        st.sampled_from(
            [
                *_PLAIN_EVENTS,
                ("exception", {"exception.type": ""}),
                ("gen_ai.tool.message", {"id": "call_9", "content": "{}"}),
            ]
        ),
        max_size=2,
    ),
}


@st.composite
def traces(draw: st.DrawFn) -> list[SpanRecord]:
    """Plain traces (one agent root, direct children), or traces bent in random ways."""
    odd = draw(st.booleans())
    root_id = new_span_id()
    child_roles = ["tool", "tool", "model", "other", "agent"] if odd else ["tool", "tool", "model", "other"]
    roles = draw(st.lists(st.sampled_from(child_roles), max_size=6))
    spans: list[SpanRecord] = []
    ids = [root_id]
    root_parent = new_span_id() if odd and draw(st.booleans()) else ""
    for index, role in enumerate(["agent", *roles]):
        span_id = root_id if index == 0 else new_span_id()
        if index == 0:
            parent = root_parent
        else:
            bent = odd and draw(st.booleans())
            parent = draw(st.sampled_from([*ids, new_span_id()])) if bent else root_id
        start = BASE_NS + draw(st.integers(0, 5)) * 1_000_000 + index
        events = tuple(SpanEvent(name, start, attrs) for name, attrs in draw(_EVENTS[odd]))
        spans.append(
            SpanRecord(
                trace_id="",
                span_id=span_id,
                parent_span_id=parent,
                name=draw(
                    st.sampled_from(
                        [
                            "invoke_agent support",
                            "execute_tool lookup",
                            "chat gpt",
                            "refund_agent.run",
                            "GET /",
                        ]
                    )
                ),
                service_name=draw(st.sampled_from(["svc", "other-svc"])),
                start_ns=start,
                duration_ns=draw(st.sampled_from([0, 700_000, 9_000_000, 1_000_000_000, 123_456_789])),
                status_code=draw(st.sampled_from(["Ok", "Unset", "Error"])),
                status_message="",
                attributes=draw(attributes(role, odd)),
                events=events,
            )
        )
        ids.append(span_id)
    if odd and draw(st.booleans()):
        spans.append(draw(st.sampled_from(spans)))  # a replayed copy
    return spans


@pytest.mark.timeout(900)  # a few dozen assemblies on a shared machine; checked, not timed
@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(batch=st.lists(traces(), min_size=1, max_size=6))
def test_sql_path_stores_what_build_runs_stores(store: Any, batch: list[list[SpanRecord]]) -> None:
    pairs, plain_runs = assemble_both(store, batch)
    event(f"{plain_runs} of {len(batch)} traces assembled by ClickHouse")
    for by_sql, by_python in pairs:
        assert by_sql == by_python


def plain_trace() -> list[SpanRecord]:
    """agenttrail's own shape: a named agent span with a chat span and tool spans under it."""
    root = new_span_id()

    def child(name: str, start: int, attrs: dict[str, str], status: str = "Ok") -> SpanRecord:
        return SpanRecord("", new_span_id(), root, name, "svc", BASE_NS + start, 500_000, status, "", attrs)

    return [
        SpanRecord(
            "",
            root,
            "",
            "invoke_agent support",
            "svc",
            BASE_NS,
            9_000_000,
            "Unset",
            "",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "support",
                "agenttrail.task": "refund",
                "input.value": '{"question": "refund 7"}',
                "output.value": '"done"',
            },
        ),
        child("chat gpt", 1, {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": "812"}),
        child(
            "execute_tool lookup",
            2,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup",
                "gen_ai.tool.call.id": "call_1",
                "gen_ai.tool.description": "Find an order",
                "gen_ai.tool.call.arguments": '{"order_id": 7}',
                "gen_ai.tool.call.result": '{"status": "shipped"}',
            },
        ),
        child(
            "execute_tool refund",
            3,
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund", "input.value": "7"},
            status="Error",
        ),
    ]


def test_plain_traces_are_assembled_by_clickhouse(store: Any) -> None:
    """The common shape does take the SQL path (else the comparison above proves little), and
    a shape it must not take (a nested tool span) is left to build_runs, with the same result."""
    nested = plain_trace()
    tool = nested[2]
    nested[2] = SpanRecord(
        "", tool.span_id, nested[3].span_id, tool.name, "svc", tool.start_ns, 1, "Ok", "", tool.attributes
    )
    pairs, plain_runs = assemble_both(store, [plain_trace(), plain_trace(), nested])
    assert plain_runs == 2
    for by_sql, by_python in pairs:
        assert by_sql == by_python
    [run], _ = pairs[0]
    assert [call["name"] for call in run["ToolCalls"]] == ["lookup", "refund"]
    assert run["ToolCalls"][1]["status"] == "error"
    assert run["ToolCalls"][1]["output"] is None
    assert run["AvailableTools"] == [{"name": "lookup", "description": "Find an order", "parameters": None}]
    assert run["InputTokens"] == 812
    assert run["Input"] == {"question": "refund 7"}


def test_spans_at_the_edges_of_the_milliseconds_the_lookup_keeps_are_assembled(store: Any) -> None:
    """The trace-id lookup keeps milliseconds (the first span's start cut down, the last's cut
    down plus one) and assembly reads only the spans within them: a trace whose first span
    starts a nanosecond before a second ends, and whose last starts a nanosecond before the
    next ends (999,999 ns past its millisecond), is read whole by both paths (a plain trace by
    ClickHouse, one with a nested tool span by build_runs)."""
    shift = 999_999_999  # the root starts at BASE + 0.999999999 s
    plain = [replace(span, start_ns=span.start_ns + shift) for span in plain_trace()]
    plain[-1] = replace(plain[-1], start_ns=BASE_NS + 1_999_999_999)  # the next second's last ns
    nested = list(plain)
    nested[2] = replace(nested[2], parent_span_id=nested[3].span_id)
    pairs, plain_runs = assemble_both(store, [plain, nested])
    assert plain_runs == 1
    for (by_sql, by_python), spans in zip(pairs, [plain, nested], strict=True):
        assert by_sql == by_python
        [run] = by_sql
        assert run["SpanCount"] == len(spans)
    assert pairs[0][0][0]["ToolCount"] == sum(1 for span in plain if span.name.startswith("execute_tool"))


def lookup(store: Any, trace_id: str) -> tuple[Any, ...]:
    return tuple(
        store.query(
            "SELECT toUnixTimestamp64Milli(min(SpansFrom)), toUnixTimestamp64Milli(max(SpansUntil)) "
            "FROM otel_traces_trace_id_ts WHERE TraceId = {t:String}",
            {"t": trace_id},
        )[0]
    )


def test_a_store_of_the_previous_schema_keeps_assembling_after_migration_7(
    chdb_dir: Any, database: str
) -> None:
    """Migration 7 on a store with spans: the lookup rows stored before it keep their whole
    seconds (read as [Start, End + 1 s)), rows after it get milliseconds, and assembly reads
    every span of a trace stored before it, then again with a late span stored after it (a
    new revision), and of a trace stored after it whose last span starts 999,999 ns past its
    millisecond; by ClickHouse and by build_runs alike."""
    store = Store(parse_store(str(chdb_dir), database))
    try:
        migrate(store, [m for m in MIGRATIONS if m.version < 7])
        assert store.query("SELECT max(Version) FROM schema_migrations")[0][0] == 6
        old = [replace(span, start_ns=span.start_ns + 250_000_000) for span in plain_trace()]
        old[-1] = replace(old[-1], start_ns=BASE_NS + 1_999_999_999)
        old_ids = new_trace_id(), new_trace_id()
        for trace_id in old_ids:
            store_spans(store, trace_id, old[:3] + old[4:])
        assert migrate(store, MIGRATIONS) == [m.version for m in MIGRATIONS if m.version >= 7]
        whole_second = BASE_NS // 1_000_000
        assert lookup(store, old_ids[0]) == (whole_second, whole_second + 1_000)
        by_sql = Assembler(store.clone(), quiet_period_s=0.0, sql_min_traces=1)
        by_python = Assembler(store.clone(), quiet_period_s=0.0, sql_assembly=False)
        for assembler, trace_id in zip((by_sql, by_python), old_ids, strict=True):
            assembler.notify({trace_id: True}, time.time())
            assembler.assemble_due()
            [run] = stored_runs(store, trace_id)
            assert (run["Revision"], run["SpanCount"]) == (1, 3)
            store_spans(store, trace_id, [old[3]])  # late, after the migration
            assembler.notify({trace_id: True}, time.time())
            assembler.assemble_due()
            [run] = stored_runs(store, trace_id)
            assert (run["Revision"], run["SpanCount"], run["ToolCount"]) == (2, 4, 2)

        new = [replace(span, start_ns=span.start_ns + 7_000_000) for span in plain_trace()]
        new[-1] = replace(new[-1], start_ns=BASE_NS + 7_999_999)  # 999,999 ns past 7 ms
        new_ids = new_trace_id(), new_trace_id()
        for assembler, trace_id in zip((by_sql, by_python), new_ids, strict=True):
            store_spans(store, trace_id, new)
            assert lookup(store, trace_id) == (whole_second + 7, whole_second + 8)
            assembler.notify({trace_id: True}, time.time())
            assembler.assemble_due()
            [run] = stored_runs(store, trace_id)
            assert (run["SpanCount"], run["ToolCount"]) == (4, 2)
        assert by_sql.plain_runs == 3
        assert by_sql.failures == by_python.failures == 0
    finally:
        store.close()


def started(store: Any, **options: Any) -> Assembler:
    """An assembler as the sidecar starts one: recovered before the writer stores anything. Its
    arrival window starts a millisecond before a round's first batch (a sidecar's: 2 s, which
    would hide a window that starts too late from tests this quick; they wait 0.3 s instead)."""
    assembler = Assembler(store.clone(), quiet_period_s=0.0, clock_margin_s=0.001, **options)
    assembler.recover()
    return assembler


def notify_others(store: Any, assembler: Assembler, batches: int) -> None:
    """Batches of other traces stored and notified in between (the window moves on)."""
    for _ in range(batches):
        other = new_trace_id()
        store_spans(store, other, plain_trace())
        assembler.notify({other: True}, time.time())


@pytest.mark.parametrize("sql", [True, False])
def test_a_late_span_after_a_long_gap_reads_the_spans_assembled_before(store: Any, sql: bool) -> None:
    """A trace's late span, stored after many other batches and an hour of span time later,
    is the only span of the new round in the arrival window: the spans assembled before are
    read through the range assembled_traces keeps, and the run is whole, a new revision,
    without looking the trace up by id."""
    spans = plain_trace()
    trace_id = new_trace_id()
    assembler = started(store, sql_min_traces=1, sql_assembly=sql)
    store_spans(store, trace_id, spans[:3])
    assembler.notify({trace_id: True}, time.time())
    assembler.assemble_due()
    notify_others(store, assembler, 3)
    assembler.assemble_due()
    time.sleep(0.3)  # the first spans lie well before the window of the late span's round
    late = replace(spans[3], start_ns=BASE_NS + 3_600_000_000_000)
    store_spans(store, trace_id, [late])
    assembler.notify({trace_id: True}, time.time())
    assembler.assemble_due()
    [run] = stored_runs(store, trace_id)
    assert (run["Revision"], run["SpanCount"], run["ToolCount"]) == (2, 4, 2)
    assert assembler.looked_up_by_id == 0
    assert assembler.failures == 0


@pytest.mark.parametrize("sql", [True, False])
def test_a_trace_stored_in_several_batches_among_others_is_read_whole(store: Any, sql: bool) -> None:
    """A round's spans stored in three batches with other traces' batches in between: the
    window starts before the first (its agent span, the earliest of the trace, a second before
    the rest), so every span is read, by the window alone."""
    spans = plain_trace()
    spans[3] = replace(spans[3], start_ns=BASE_NS + 5_000_000_000)
    trace_id = new_trace_id()
    assembler = started(store, sql_min_traces=1, sql_assembly=sql)
    for part in (spans[:1], spans[1:3], spans[3:]):
        notify_others(store, assembler, 2)
        store_spans(store, trace_id, part)
        time.sleep(0.3)  # a slow insert: its batch is notified well after its spans were stored
        assembler.notify({trace_id: True}, time.time())
    assert assembler.assemble_due() == 7
    [run] = stored_runs(store, trace_id)
    assert (run["Revision"], run["SpanCount"], run["ToolCount"], run["Agent"]) == (1, 4, 2, "support")
    assert assembler.looked_up_by_id == 0


def test_after_a_restart_rounds_begun_before_it_are_looked_up_by_id(store: Any) -> None:
    """After a restart, a trace stored but not assembled before it (recovered from its
    arrivals), and one whose batches are replayed before recover() (the first stored by the run
    before, so the replay feeds no view, the second stored now, five seconds of span time
    later), are looked up by id and read whole; a late span of a trace assembled before the
    restart is read with the range its state keeps."""
    spans = plain_trace()
    assembled, recovered, replayed = new_trace_id(), new_trace_id(), new_trace_id()
    first = started(store, sql_min_traces=1)
    store_spans(store, assembled, spans[:3])
    arrived = time.time()
    first.notify({assembled: True}, arrived)
    first.assemble_due()
    store_spans(store, recovered, spans)
    store_spans(store, replayed, spans[:1])
    # Both arrived (as the writer records every batch); only the one not assembled is resumed.
    store.insert("trace_arrivals", [ArrivalRow(assembled, f"{arrived:.6f}", 1)])
    store.insert("trace_arrivals", [ArrivalRow(recovered, f"{time.time():.6f}", 1)])
    # -- restart --
    second = Assembler(store.clone(), quiet_period_s=0.0, sql_min_traces=1, clock_margin_s=0.001)
    # The spool's replay comes before recover(): another trace's segment, then the two of this one.
    notify_others(store, second, 1)
    second.notify({replayed: True}, time.time())
    time.sleep(0.3)
    later = [replace(span, start_ns=span.start_ns + 5_000_000_000) for span in spans[1:]]
    store_spans(store, replayed, later)
    second.notify({replayed: True}, time.time())
    assert second.recover() == 1
    time.sleep(0.3)
    store_spans(store, assembled, spans[3:])
    second.notify({assembled: True}, time.time())
    assert second.assemble_due() == 4
    assert second.looked_up_by_id == 3
    for trace_id, revision in ((assembled, 2), (recovered, 1), (replayed, 1)):
        [run] = stored_runs(store, trace_id)
        assert (run["Revision"], run["SpanCount"], run["ToolCount"]) == (revision, 4, 2)


def test_a_store_assembled_before_migration_8_reassembles_late_spans(chdb_dir: Any, database: str) -> None:
    """Migration 8 on a store assembled at migration 7: assembly_state's rows are copied into
    assembled_traces (without a range), so a late span after it makes a new revision of the
    whole run (its earlier spans found by id) and deletes no run; the next late span then
    reads the range that revision stored, without a look-up by id."""
    store = Store(parse_store(str(chdb_dir), database))
    try:
        migrate(store, [m for m in MIGRATIONS if m.version < 8])
        spans = plain_trace()
        trace_id = new_trace_id()
        store_spans(store, trace_id, spans[:2])
        [run] = build_runs([replace(span, trace_id=trace_id) for span in spans[:2]])
        store.insert("trajectories", [trajectory_row(run, revision=1, assembled_at=time.time(), version=1)])
        store.insert_rows(
            "assembly_state",
            ["TraceId", "AssembledThrough", "RunKeys", "Revision", "Version"],
            [(trace_id, f"{time.time():.6f}", [run.root_span_id], 1, 1)],
        )
        assert migrate(store, MIGRATIONS) == [m.version for m in MIGRATIONS if m.version >= 8]
        copied = store.query(
            "SELECT RunKeys, Revision, toUnixTimestamp64Milli(SpansFrom) FROM assembled_traces "
            "WHERE TraceId = {t:String}",
            {"t": trace_id},
        )
        assert copied == [([run.root_span_id], 1, 0)]
        assembler = started(store, sql_min_traces=1)
        for late, (revision, span_count, by_id) in zip(spans[2:], ((2, 3, 1), (3, 4, 1)), strict=True):
            store_spans(store, trace_id, [late])
            assembler.notify({trace_id: True}, time.time())
            assembler.assemble_due()
            [stored] = stored_runs(store, trace_id)
            assert (stored["Revision"], stored["SpanCount"], stored["RootSpanId"]) == (
                revision,
                span_count,
                run.root_span_id,
            )
            assert assembler.looked_up_by_id == by_id
    finally:
        store.close()


def test_late_span_reassembles_a_plain_run_as_a_new_revision(store: Any) -> None:
    """A span arriving after assembly makes a new revision; a late agent span that turns the
    run into another (here: a new root above it) deletes the old run key."""
    spans = plain_trace()
    trace_id = new_trace_id()
    assembler = Assembler(store.clone(), quiet_period_s=0.0, sql_min_traces=1)
    store_spans(store, trace_id, spans[:3])
    assembler.notify({trace_id: True}, time.time())
    assembler.assemble_due()
    store_spans(store, trace_id, spans[3:])
    assembler.notify({trace_id: True}, time.time())
    assembler.assemble_due()
    [run] = stored_runs(store, trace_id)
    assert (run["Revision"], run["ToolCount"], run["SpanCount"]) == (2, 2, 4)
    assert assembler.plain_runs == 2


def test_a_store_closed_under_a_stopping_assembler_ends_it_quietly(
    store: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """serve closes its stores once its wait for the assembler ends; under load a cycle can
    outlive that wait. The cycle's next statement then fails on a closed client: that is the
    stop, not an assembly failure to log and retry, and the trace stays pending (recovered from
    `trace_arrivals` after the next start)."""
    assembly_store = store.clone()
    assembler = Assembler(assembly_store, quiet_period_s=0.0, sql_min_traces=1)
    trace_id = new_trace_id()
    store_spans(store, trace_id, plain_trace())
    reached, release = threading.Event(), threading.Event()
    query = assembly_store.query

    def held_query(sql: str, parameters: Any = None, **settings: Any) -> list[tuple[Any, ...]]:
        reached.set()  # the cycle is under way: let the test stop and close around it
        assert release.wait(60)
        return query(sql, parameters, **settings)

    monkeypatch.setattr(assembly_store, "query", held_query)
    assembler.notify({trace_id: True}, time.time())
    with caplog.at_level(logging.INFO):
        assembler.start()
        assert reached.wait(60)
        assembler.stop(timeout_s=0)  # serve's wait ran out
        assembly_store.close()
        release.set()
        assembler.stop(timeout_s=60)
    assert not assembler.alive()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert assembler.failures == 0
    assert assembler.pending_count == 1


def big_plain_trace(size: int) -> list[SpanRecord]:
    """A plain trace whose agent input is `size` characters: its chunk's memory grows with it."""
    spans = plain_trace()
    root = spans[0]
    attributes = {**root.attributes, "input.value": json.dumps({"question": "x" * size})}
    spans[0] = SpanRecord(
        "", root.span_id, "", root.name, "svc", root.start_ns, root.duration_ns, "Unset", "", attributes
    )
    return spans


def test_a_chunk_refused_for_memory_is_assembled_in_halves(
    store: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """With assembly_max_memory_bytes below what a chunk needs, ClickHouse refuses the chunk;
    the assembler splits it until the pieces fit (one trace alone runs without the limit), so
    every run is assembled, the same as build_runs makes it, and nothing is skipped."""
    traces = [big_plain_trace(200_000) for _ in range(16)]
    ids = [new_trace_id() for _ in traces]
    for trace_id, spans in zip(ids, traces, strict=True):
        store_spans(store, trace_id, spans)
    limited = Assembler(store.clone(), quiet_period_s=0.0, sql_min_traces=1, max_query_memory=4 * 1024 * 1024)
    limited.notify(dict.fromkeys(ids, True), time.time())
    with caplog.at_level(logging.WARNING):
        written = limited.assemble_due()
    assert written == len(ids)
    assert limited.failures == 0
    assert limited.pending_count == 0
    assert limited.memory_refusals > 0
    assert limited.chunk_size < 1000
    assert "assembly_max_memory_bytes" in caplog.text
    reference = Assembler(store.clone(), quiet_period_s=0.0, sql_assembly=False)
    python_ids = [new_trace_id() for _ in traces]
    for trace_id, spans in zip(python_ids, traces, strict=True):
        store_spans(store, trace_id, spans)
    reference.notify(dict.fromkeys(python_ids, True), time.time())
    reference.assemble_due()
    for limited_id, python_id in zip(ids, python_ids, strict=True):
        assert stored_runs(store, limited_id) == stored_runs(store, python_id)


def test_a_backlog_is_assembled_in_even_chunks(store: Any) -> None:
    """More traces due than one chunk takes are split evenly, so no small tail chunk falls
    below sql_min_traces to build_runs: 4 due at 3 a chunk are 2 + 2, all by ClickHouse (not
    3 + 1, the last by build_runs); the runs are build_runs' either way."""
    traces = [plain_trace() for _ in range(4)]
    ids = [new_trace_id() for _ in traces]
    for trace_id, spans in zip(ids, traces, strict=True):
        store_spans(store, trace_id, spans)
    assembler = Assembler(store.clone(), quiet_period_s=0.0, sql_min_traces=2, max_traces_per_query=3)
    assembler.notify(dict.fromkeys(ids, True), time.time())
    assert assembler.assemble_due() == 4
    assert assembler.plain_runs == 4
    reference = Assembler(store.clone(), quiet_period_s=0.0, sql_assembly=False)
    python_ids = [new_trace_id() for _ in traces]
    for trace_id, spans in zip(python_ids, traces, strict=True):
        store_spans(store, trace_id, spans)
    reference.notify(dict.fromkeys(python_ids, True), time.time())
    reference.assemble_due()
    for sql_id, python_id in zip(ids, python_ids, strict=True):
        assert stored_runs(store, sql_id) == stored_runs(store, python_id)


@given(st.integers(0, 20_000), st.integers(1, 5_000))
def test_even_chunks_cover_what_is_due_in_as_few_chunks_as_the_size_allows(due: int, most: int) -> None:
    sizes = []
    remaining = due
    while remaining:
        sizes.append(even_chunk(remaining, most))
        remaining -= sizes[-1]
    assert sum(sizes) == due
    assert all(0 < size <= most for size in sizes)
    assert len(sizes) == -(-due // most)
    assert max(sizes, default=0) - min(sizes, default=0) <= 1


@pytest.mark.parametrize("where", [(0, "input.value"), (0, "output.value"), (2, "gen_ai.tool.call.result")])
def test_texts_read_differently_by_python_and_clickhouse_send_the_trace_to_build_runs(
    store: Any, where: tuple[int, str]
) -> None:
    """Each of the `unsafe` JSON checks holds on its own: an odd text in any one of the run's
    input, output or a tool's result leaves the trace to build_runs (the random traces above
    rarely put one in exactly one place)."""
    index, key = where
    traces = []
    for text in _ODD_TEXTS:
        spans = plain_trace()
        spans[index] = replace(spans[index], attributes={**spans[index].attributes, key: text})
        traces.append(spans)
    pairs, plain_runs = assemble_both(store, traces)
    assert plain_runs == 0
    for by_sql, by_python in pairs:
        assert by_sql == by_python
