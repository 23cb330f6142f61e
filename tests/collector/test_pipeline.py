"""Ingest to trajectory: real OTel SDK exporters, split and out-of-order spans, late spans, restarts."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from otlp_builders import SpanSpec, agent_span, new_span_id, new_trace_id, request, tool_span

from agenttrail.collector.queries import TrajectoryFilter, query_trajectories


def sdk_provider(sidecar: Any, protocol: str) -> TracerProvider:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        exporter: Any = GrpcExporter(endpoint=f"http://{sidecar.grpc_address}", insecure=True)
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        exporter = HttpExporter(endpoint=f"http://{sidecar.http.address}/v1/traces")
    provider = TracerProvider(resource=Resource.create({"service.name": f"sdk-{protocol}"}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def runs_of(sidecar: Any, trace_id: str) -> list[dict[str, Any]]:
    return query_trajectories(sidecar.store, TrajectoryFilter(trace_id=trace_id))


def trajectory_versions(sidecar: Any, trace_id: str) -> list[tuple[str, int, int]]:
    """Stored rows after merges: (root, revision, deleted), one per run if nothing duplicated."""
    return sidecar.store.query(
        "SELECT RootSpanId, Revision, IsDeleted FROM trajectories FINAL WHERE TraceId = {t:String}",
        {"t": trace_id},
    )


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_sdk_exports_become_trajectories(start_sidecar: Any, protocol: str) -> None:
    """Spans from the real SDK exporter (gRPC or HTTP) are stored and assembled into runs."""
    sidecar = start_sidecar()
    provider = sdk_provider(sidecar, protocol)
    tracer = provider.get_tracer("test")
    trace_ids = []
    for index in range(5):
        with tracer.start_as_current_span(
            "invoke_agent bot",
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "bot",
                "agenttrail.task": "t",
            },
        ) as root:
            trace_ids.append(format(root.get_span_context().trace_id, "032x"))
            for tool in ("search", "answer"):
                with tracer.start_as_current_span(
                    f"execute_tool {tool}",
                    attributes={
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": tool,
                        "gen_ai.tool.call.arguments": f'{{"i": {index}}}',
                    },
                ):
                    pass
    assert provider.force_flush(10_000)
    provider.shutdown()
    assert sidecar.wait_until_assembled(30)
    for index, trace_id in enumerate(trace_ids):
        [run] = runs_of(sidecar, trace_id)
        assert run["agent"] == "bot"
        assert run["task"] == "t"
        assert [(c["name"], c["input"]) for c in run["tool_calls"]] == [
            ("search", {"i": index}),
            ("answer", {"i": index}),
        ]


def test_split_and_out_of_order_spans_make_one_trajectory(start_sidecar: Any) -> None:
    """Spans of one trace sent in reverse order over three requests give one ordered trajectory."""
    sidecar = start_sidecar()
    trace, root = new_trace_id(), new_span_id()
    spans = [
        agent_span(trace, root, 0, 100),
        tool_span(trace, new_span_id(), root, "first", 10, 20),
        tool_span(trace, new_span_id(), root, "second", 30, 40),
        tool_span(trace, new_span_id(), root, "third", 50, 60),
    ]
    for chunk in ([spans[3]], [spans[0]], [spans[2], spans[1]]):
        sidecar.pipeline.accept(request(*chunk).SerializeToString())
        time.sleep(0.1)
    assert sidecar.wait_until_assembled(30)
    [run] = runs_of(sidecar, trace)
    assert [c["name"] for c in run["tool_calls"]] == ["first", "second", "third"]
    assert len(trajectory_versions(sidecar, trace)) == 1


def test_late_span_reassembles_as_new_revision_without_duplicates(start_sidecar: Any) -> None:
    """A span arriving after assembly produces revision 2 of the same run, not a second run."""
    sidecar = start_sidecar()
    trace, root = new_trace_id(), new_span_id()
    sidecar.pipeline.accept(
        request(
            agent_span(trace, root, 0, 100), tool_span(trace, new_span_id(), root, "a", 1, 2)
        ).SerializeToString()
    )
    assert sidecar.wait_until_assembled(30)
    assert [c["name"] for c in runs_of(sidecar, trace)[0]["tool_calls"]] == ["a"]
    sidecar.pipeline.accept(request(tool_span(trace, new_span_id(), root, "late", 5, 6)).SerializeToString())
    assert sidecar.wait_until_assembled(30)
    [run] = runs_of(sidecar, trace)
    assert [c["name"] for c in run["tool_calls"]] == ["a", "late"]
    assert run["revision"] == 2
    assert trajectory_versions(sidecar, trace) == [(root, 2, 0)]


def test_late_agent_span_replaces_fallback_run(start_sidecar: Any) -> None:
    """Tools assembled without their agent (idle timeout) are re-rooted when the agent span arrives."""
    sidecar = start_sidecar(idle_timeout_s=0.2)
    trace, root, parent = new_trace_id(), new_span_id(), new_span_id()
    sidecar.pipeline.accept(
        request(
            tool_span(trace, new_span_id(), root, "a", 1, 2), tool_span(trace, new_span_id(), root, "b", 3, 4)
        ).SerializeToString()
    )
    assert sidecar.wait_until_assembled(30)
    [first] = runs_of(sidecar, trace)
    assert first["agent"] == "test-svc"
    sidecar.pipeline.accept(request(agent_span(trace, root, 0, 10, parent=parent)).SerializeToString())
    assert sidecar.wait_until_assembled(30)
    [run] = runs_of(sidecar, trace)
    assert run["agent"] == "bot"
    assert run["root_span_id"] == root
    assert [c["name"] for c in run["tool_calls"]] == ["a", "b"]


def test_restart_in_the_middle_resumes_assembly(start_sidecar: Any) -> None:
    """Spans stored before a restart but not yet assembled are assembled by the next sidecar."""
    first = start_sidecar(quiet_period_s=60)
    trace, root = new_trace_id(), new_span_id()
    first.pipeline.accept(
        request(
            agent_span(trace, root, 0, 10), tool_span(trace, new_span_id(), root, "before", 1, 2)
        ).SerializeToString()
    )
    assert first.flush(30)
    assert runs_of(first, trace) == []  # still inside its quiet period
    first.stop()
    second = start_sidecar(quiet_period_s=0.2)
    second.pipeline.accept(request(tool_span(trace, new_span_id(), root, "after", 3, 4)).SerializeToString())
    assert second.wait_until_assembled(30)
    [run] = runs_of(second, trace)
    assert [c["name"] for c in run["tool_calls"]] == ["before", "after"]


def test_runs_stored_before_a_crash_are_replaced_after_the_restart(start_sidecar: Any) -> None:
    """A crash between storing a trace's runs and its assembly state leaves the runs stored but
    the state missing. After the restart the trace is assembled again as a re-assembly of what
    is stored: a run that moved (its agent span arrived in between) replaces the first one, in
    `trajectories` and in the monitoring rollup alike, instead of being a second first run."""
    first = start_sidecar(idle_timeout_s=0.2, quiet_period_s=60)
    trace, root, parent = new_trace_id(), new_span_id(), new_span_id()
    first.pipeline.accept(
        request(
            tool_span(trace, new_span_id(), root, "a", 1, 2), tool_span(trace, new_span_id(), root, "b", 3, 4)
        ).SerializeToString()
    )
    assert first.wait_until_assembled(30)
    [fallback] = runs_of(first, trace)
    assert fallback["agent"] == "test-svc"
    # The agent span is stored (its trace then waits out the quiet period), then the crash: the
    # runs stored above lose their assembly state.
    first.pipeline.accept(request(agent_span(trace, root, 0, 10, parent=parent)).SerializeToString())
    assert first.flush(30)
    first.store.command("DELETE FROM assembled_traces WHERE TraceId = {t:String}", {"t": trace})
    first.stop()
    second = start_sidecar(quiet_period_s=0.2)
    assert second.wait_until_assembled(30)
    [run] = runs_of(second, trace)
    assert (run["agent"], run["root_span_id"]) == ("bot", root)
    live = second.store.query(
        "SELECT Agent, RootSpanId FROM runs_by_start FINAL WHERE TraceId = {t:String} AND IsDeleted = 0",
        {"t": trace},
    )
    assert live == [("bot", root)]  # not also the fallback run, under its agent and start
    assert trajectory_versions(second, trace) == [(root, 2, 0)]


def test_trajectory_filters(start_sidecar: Any) -> None:
    """Filters by agent, task and time select the matching runs only."""
    sidecar = start_sidecar()
    a, b = new_trace_id(), new_trace_id()
    ra, rb = new_span_id(), new_span_id()
    sidecar.pipeline.accept(
        request(
            agent_span(a, ra, 0, 1, agent="alpha", attributes={"agenttrail.task": "x"}),
            agent_span(b, rb, 0, 1, agent="beta", attributes={"agenttrail.task": "y"}),
            tool_span(a, new_span_id(), ra, "t", 0.1, 0.2),
            tool_span(b, new_span_id(), rb, "t", 0.1, 0.2),
        ).SerializeToString()
    )
    assert sidecar.wait_until_assembled(30)
    assert [r["trace_id"] for r in query_trajectories(sidecar.store, TrajectoryFilter(agent="alpha"))] == [a]
    assert [r["trace_id"] for r in query_trajectories(sidecar.store, TrajectoryFilter(task="y"))] == [b]
    from datetime import UTC, datetime

    future = datetime(2100, 1, 1, tzinfo=UTC)
    assert query_trajectories(sidecar.store, TrajectoryFilter(since=future)) == []
    assert len(query_trajectories(sidecar.store, TrajectoryFilter(until=future))) == 2


def test_model_is_stored_with_the_run(start_sidecar: Any) -> None:
    """Assembly stores the model of the run's chat span in trajectories.Model (migration 2)."""
    sidecar = start_sidecar()
    trace, root = new_trace_id(), new_span_id()
    chat = SpanSpec(
        trace,
        new_span_id(),
        "chat",
        1,
        5,
        parent=root,
        attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "small-model"},
    )
    sidecar.pipeline.accept(request(agent_span(trace, root, 0, 10), chat).SerializeToString())
    assert sidecar.wait_until_assembled(30)
    assert sidecar.store.query(
        "SELECT Model FROM trajectories FINAL WHERE TraceId = {t:String}", {"t": trace}
    ) == [("small-model",)]


def test_stored_run_keeps_available_tools_and_says_what_was_not_captured(start_sidecar: Any) -> None:
    """Through OTLP and storage: tool definitions and descriptions become `available_tools`, an
    OpenInference request (flattened `llm.output_messages.*` keys) fills a lossy tool input, and a
    tool span without arguments is `input_captured: false` in the JSON form."""
    sidecar = start_sidecar()
    trace, root = new_trace_id(), new_span_id()
    definitions = [
        {"type": "function", "name": "search", "description": "Find.", "parameters": {"type": "object"}}
    ]
    prefix = "llm.output_messages.0.message.tool_calls.0.tool_call."
    llm = SpanSpec(
        trace,
        new_span_id(),
        "llm",
        1,
        2,
        parent=root,
        attributes={
            "openinference.span.kind": "LLM",
            "llm.token_count.prompt": 7,
            prefix + "id": "c1",
            prefix + "function.name": "search",
            prefix + "function.arguments": '{"query": "books"}',
        },
    )
    lossy = SpanSpec(
        trace,
        new_span_id(),
        "search",
        3,
        4,
        parent=root,
        attributes={"openinference.span.kind": "TOOL", "tool.name": "search", "input.value": "books"},
    )
    blind = SpanSpec(
        trace,
        new_span_id(),
        "execute_tool notify",
        5,
        6,
        parent=root,
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "notify",
            "gen_ai.tool.description": "Tell the user.",
        },
    )
    agent = agent_span(trace, root, 0, 10, attributes={"gen_ai.tool.definitions": json.dumps(definitions)})
    sidecar.pipeline.accept(request(agent, llm, lossy, blind).SerializeToString())
    assert sidecar.wait_until_assembled(30)
    [run] = runs_of(sidecar, trace)
    assert run["available_tools"] == [
        {"name": "search", "description": "Find.", "parameters": {"type": "object"}},
        {"name": "notify", "description": "Tell the user.", "parameters": None},
    ]
    assert (run["input_tokens"], run["incomplete"]) == (7, False)
    calls = [(c["name"], c["input"], c["input_captured"]) for c in run["tool_calls"]]
    assert calls == [("search", {"query": "books"}, True), ("notify", None, False)]


def test_store_that_cannot_decode_protobuf_gets_python_rendered_spans(
    start_sidecar: Any, monkeypatch: Any
) -> None:
    """A ClickHouse too old to decode the spool itself (its probe fails) still stores every span,
    rendered in Python, and the runs assemble the same."""
    from agenttrail.collector.ingest import IngestPipeline

    monkeypatch.setattr(IngestPipeline, "_store_can_decode", lambda self: False)
    sidecar = start_sidecar()
    assert sidecar.pipeline.clickhouse_decoding is False
    trace, root = new_trace_id(), new_span_id()
    sidecar.pipeline.accept(
        request(
            agent_span(trace, root, 0, 100), tool_span(trace, new_span_id(), root, "lookup", 10, 20)
        ).SerializeToString()
    )
    assert sidecar.wait_until_assembled(30)
    [run] = runs_of(sidecar, trace)
    assert [c["name"] for c in run["tool_calls"]] == ["lookup"]
    assert sidecar.store.query(
        "SELECT count() FROM otel_traces WHERE TraceId = {t:String}", {"t": trace}
    ) == [(2,)]


def test_corrupt_record_left_in_the_spool_is_quarantined_at_replay(
    start_sidecar: Any, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A spool segment left by an earlier run with a record that is not protobuf: replay sets that
    record aside in the quarantine (with the reason and a log line) and stores the others."""
    from agenttrail.collector.spool import Spool

    trace, root = new_trace_id(), new_span_id()
    spool = Spool(tmp_path / "spool")
    spool.append(request(agent_span(trace, root, 0, 100)).SerializeToString())
    spool.append(b"\xff\xff\xff\xff not protobuf")
    spool.append(request(tool_span(trace, new_span_id(), root, "kept", 10, 20)).SerializeToString())
    assert spool.seal() is not None
    sidecar = start_sidecar()
    assert sidecar.pipeline.clickhouse_decoding is True
    assert sidecar.pipeline.counters.replayed_segments == 1
    assert "quarantined record 1 of spool segment" in caplog.text
    [entry] = sidecar.pipeline.quarantine.entries()
    assert entry.record == 1
    assert "undecodable" in entry.reason
    assert sidecar.pipeline.counters.quarantined_records == 1
    assert sidecar.wait_until_assembled(30)
    [run] = runs_of(sidecar, trace)
    assert [c["name"] for c in run["tool_calls"]] == ["kept"]
    assert not list((tmp_path / "spool").glob("segment-*.spool"))


def test_stopping_assembly_keeps_what_it_did_not_reach_pending(store: Any) -> None:
    """stop() during a long assembly ends it between chunks: the traces not reached stay pending
    (a restart's recover() finds them), instead of running on against a store being closed and
    logging each trace as one that cannot be stored."""
    from agenttrail.collector.assembler import Assembler

    assembler = Assembler(store, quiet_period_s=0.0, max_traces_per_query=1)
    traces = {new_trace_id(): True for _ in range(3)}
    assembler.notify(traces, time.time())
    assert assembler.pending_count == 3
    assembler.stop()  # never started: only the stop flag is set, as mid-cycle
    assert assembler.assemble_due() == 0
    assert assembler.pending_count == 3
