"""The collector's commands' service functions, called without click: the trajectories read on
a real chDB store, the quarantine decoded and re-queued, the schema's DDL, the settings rows."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from otlp_builders import agent_span, new_span_id, new_trace_id, request
from trajectory_rows import agent_run, store_runs

from agenttrail.collector.config import load_settings
from agenttrail.collector.queries import QueryError
from agenttrail.collector.schema import MIGRATIONS, MIGRATIONS_TABLE, Migration, Retention, migrate
from agenttrail.collector.service import (
    CommandUsageError,
    NoSuchEntry,
    describe_entry,
    open_quarantine,
    requeue_entries,
    schema_statements,
    settings_rows,
    trajectories_read,
)


def test_trajectories_read_filters_the_stored_runs(store: Any) -> None:
    migrate(store, MIGRATIONS)
    now = time.time()
    store_runs(store, [agent_run(start=now - i, agent=agent) for i, agent in enumerate(["a", "a", "b"])])
    read = trajectories_read(since="1h", agent="a", limit=10)
    assert (read.route, read.params["agent"], read.params["limit"]) == ("/api/v1/trajectories", "a", "10")
    rows = read.local(store)
    assert [row["agent"] for row in rows] == ["a", "a"]
    assert rows[0]["start"] > rows[1]["start"], "newest first"
    assert len(trajectories_read(limit=2).local(store)) == 2
    with pytest.raises(QueryError, match="tomorrow"):
        trajectories_read(until="tomorrow")


def test_quarantined_records_are_decoded_and_requeued(tmp_path: Path) -> None:
    quarantine = open_quarantine(str(tmp_path / "spool"))
    trace, root = new_trace_id(), new_span_id()
    good = request(agent_span(trace, root, 0, 1, agent="bot")).SerializeToString()
    segment = tmp_path / "spool" / "000001.spool"
    first = quarantine.add_record(good, segment=segment, index=0, reason="refused by the store")
    second = quarantine.add_record(b"\xff not protobuf", segment=segment, index=1, reason="undecodable")

    detail = describe_entry(quarantine, first)
    assert detail.entry.reason == "refused by the store"
    [record] = detail.records
    [span] = record.spans
    assert (record.undecodable, span.trace_id, span.span_id) == (None, trace, root)
    [broken] = describe_entry(quarantine, second).records
    assert broken.undecodable
    assert broken.spans == []
    with pytest.raises(NoSuchEntry, match=f"entries: {first}, {second}"):
        describe_entry(quarantine, "nope")

    with pytest.raises(CommandUsageError, match="--all"):
        requeue_entries(quarantine)
    heard: list[str] = []
    with pytest.raises(NoSuchEntry):
        requeue_entries(quarantine, [first, "nope"], done=lambda entry_id, segment: heard.append(entry_id))
    assert heard == [first], "the entries before the unknown one are re-queued"
    [segment_back] = requeue_entries(quarantine, every=True)
    assert segment_back.parent == tmp_path / "spool"
    assert quarantine.entries() == []


def test_schema_statements_plain_and_for_a_cluster() -> None:
    retention = Retention(7, 30, 90)
    plain = schema_statements(MIGRATIONS, "agenttrail", retention)
    assert plain[0] == MIGRATIONS_TABLE
    assert len(plain) == len(set(plain)), "each statement once"
    repeated = [Migration(2, "b", ("CREATE Y", "CREATE X")), Migration(1, "a", ("CREATE X",))]
    assert schema_statements(repeated, "agenttrail", retention) == [MIGRATIONS_TABLE, "CREATE X", "CREATE Y"]
    clustered = schema_statements(MIGRATIONS, "agenttrail", retention, cluster="prod")
    assert any("ON CLUSTER prod" in statement for statement in clustered)
    assert any("Distributed" in statement for statement in clustered)
    replicas = schema_statements(MIGRATIONS, "agenttrail", retention, cluster="prod", replicas_only=True)
    assert not any("Distributed" in statement for statement in replicas)
    with pytest.raises(CommandUsageError, match="--replicas-only needs --cluster"):
        schema_statements(MIGRATIONS, "agenttrail", retention, replicas_only=True)


def test_settings_rows_say_each_value_and_its_source(tmp_path: Path) -> None:
    config = tmp_path / "agenttrail.yaml"
    config.write_text("collector:\n  database: fromfile\n")
    rows = settings_rows(load_settings({"quiet_period_s": 5.0}, config_file=config, environ={}))
    by_key = {row["key"]: row for row in rows if row["section"] == "collector"}
    assert (by_key["quiet_period_s"]["value"], by_key["quiet_period_s"]["source"]) == (
        5.0,
        "flag --quiet-period-s",
    )
    assert (by_key["database"]["value"], by_key["database"]["source"]) == ("fromfile", f"file {config}")
    assert by_key["spool_dir"]["source"] == "default"
