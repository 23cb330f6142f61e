"""The Runs list (`list_runs`, `/runs`, `/api/v1/runs`, the MCP `search_runs`) pages newest first
through exactly the live runs a FINAL read of `trajectories` gives, on a store migrated from one
that kept the `by_start` projection (collector migration 6 dropped it; the pages now read the
run-level rollup `runs_by_start` a window of time at a time, then their rows by key).

The history has ties on start time, two runs in one trace, re-assembled revisions (in place and
with a moved start), deleted runs and runs from minutes to years back, so the search for a
page crosses every window.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from trajectory_rows import agent_run, deleted_row, insert_trajectories, run_row

from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store, parse_store
from agenttrail.collector.trajectory import AgentRun
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.console.runs import RunsFilter, cursor_of, filter_choices, list_runs

NOW = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC
ROOT = "00000000000000aa"
# Seconds back from NOW: ties (same start, other traces), minutes, hours, days, a year and more.
# 3,600 and 86,400 fall on the edges of the windows the search reads (console.runs.WINDOWS_S).
AGES = (0, 0, 0, 5, 60, 60, 1_800, 3_599, 3_600, 3_601, 7_200, 86_399, 86_400, 86_401, 3 * 86_400,
        10 * 86_400, 40 * 86_400, 400 * 86_400, 400 * 86_400, 800 * 86_400)  # fmt: skip

# The oracle: the latest live version of each run, read from the base table with FINAL.
ORACLE = """
SELECT TraceId, RootSpanId, Agent, Task, toUnixTimestamp64Micro(Start), Failure,
    substring(Input, 1, 160), substring(Output, 1, 160), Revision
FROM trajectories FINAL WHERE IsDeleted = 0 {extra}
ORDER BY Start DESC, TraceId DESC, RootSpanId DESC
"""


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat()


def shown(run: dict[str, Any]) -> tuple[Any, ...]:
    return (
        run["trace_id"],
        run["root_span_id"],
        run["agent"],
        run["task"],
        run["start_us"],
        run["failure"],
        run["input"],
        run["output"],
        run["revision"],
    )


def pages(store: Store, limit: int, **filters: str) -> list[tuple[Any, ...]]:
    """Every run the list shows, following `next_cursor` from the newest page to the last."""
    seen: list[tuple[Any, ...]] = []
    cursor = ""
    for _ in range(100):
        page = list_runs(store, RunsFilter(limit=limit, before=cursor, **filters))
        assert len(page.runs) <= limit
        seen += [shown(run) for run in page.runs]
        if page.next_cursor is None:
            return seen
        assert page.next_cursor == cursor_of(page.runs[-1])
        cursor = page.next_cursor
    raise AssertionError("the list never ended")


def history(store: Store) -> None:
    """Runs over two years, first revisions, then re-assemblies and deletions in later inserts."""
    runs: list[AgentRun] = []
    for i, age in enumerate(AGES):
        runs.append(
            agent_run(
                start=NOW - age,
                trace_id=f"{(i * 7919) % 97:02x}".rjust(32, "0"),  # trace ids not in start order
                root_span_id=ROOT,
                agent=("support", "billing")[i % 2],
                task=f"task-{i % 3}",
                failure=i % 4 == 1,
                input={"question": f"q{i}", "pad": "x" * 300},  # longer than the page's 160 chars
                output=f"answer {i}",
            )
        )
    # A second run in the first run's trace, at the same start (a tie inside one trace).
    runs.append(replace(runs[0], root_span_id="00000000000000bb", task="task-inner"))
    insert_trajectories(store, [run_row(run) for run in runs])
    insert_trajectories(
        store,
        [
            # re-assembled in place: the task, status and output changed
            run_row(replace(runs[4], task="task-new", failure=True, output="late answer"), revision=2),
            # re-assembled with a later start (its root span arrived): moves in the list
            run_row(replace(runs[12], start_ns=int((NOW - 90) * 1e9)), revision=2),
            # moved from a year back to the newest hour, and re-assembled again there
            run_row(replace(runs[17], start_ns=int((NOW - 30) * 1e9)), revision=2),
            deleted_row(runs[7], version=2),
            deleted_row(runs[14], version=2),
        ],
    )
    insert_trajectories(store, [run_row(replace(runs[17], start_ns=int((NOW - 30) * 1e9), output="third"),
                                        revision=3)])  # fmt: skip


@pytest.fixture
def migrated(chdb_dir: Path, database: str) -> Iterator[Store]:
    """A store the code before migration 6 made (the `by_start` projection on trajectories),
    with its runs stored then, migrated to today's schema afterwards."""
    store = Store(parse_store(str(chdb_dir), database))
    before = [m for m in ALL_MIGRATIONS if m.version != 6]
    migrate(store, before)
    create = store.query("SELECT create_table_query FROM system.tables WHERE database = currentDatabase() "
                         "AND name = 'trajectories'")[0][0]  # fmt: skip
    assert "PROJECTION by_start" in create
    history(store)
    assert migrate(store, ALL_MIGRATIONS) == [6]
    yield store
    store.close()


def test_migration_drops_the_projection_and_keeps_every_run(migrated: Store) -> None:
    """The store's trajectories lose the projection and the settings it needed; no row is lost,
    and the table still merges and takes a lightweight DELETE."""
    create = migrated.query("SELECT create_table_query FROM system.tables WHERE database = currentDatabase() "
                            "AND name = 'trajectories'")[0][0]  # fmt: skip
    assert "PROJECTION" not in create
    assert "projection_mode" not in create
    assert "vertical_merge_algorithm_min_rows_to_activate = 1" in create
    expected = migrated.query(ORACLE.format(extra=""))
    assert len(expected) == len(AGES) + 1 - 2
    migrated.command("OPTIMIZE TABLE trajectories FINAL")
    assert migrated.query(ORACLE.format(extra="")) == expected
    migrated.command("DELETE FROM trajectories WHERE Task = 'task-inner'")
    assert len(migrated.query(ORACLE.format(extra=""))) == len(expected) - 1


@pytest.mark.parametrize("limit", [1, 2, 3, 50])
def test_pages_go_newest_first_through_exactly_the_live_runs(migrated: Store, limit: int) -> None:
    """Pages of any size, one after another, show each live run once, as its latest revision,
    in (start, trace, root) order newest first: ties, moved and deleted runs included."""
    expected = migrated.query(ORACLE.format(extra=""))
    assert pages(migrated, limit) == expected
    migrated.command("OPTIMIZE TABLE trajectories FINAL")
    migrated.command("OPTIMIZE TABLE runs_by_start FINAL")
    assert pages(migrated, limit) == expected


def test_filters_and_time_bounds_page_like_the_base_table(migrated: Store) -> None:
    """Agent, status, task and since/until give the base table's runs, in its order."""
    until = NOW - 3_600
    since = NOW - 41 * 86_400
    cases: list[tuple[dict[str, str], str, dict[str, Any]]] = [
        ({"agent": "billing"}, "AND Agent = 'billing'", {}),
        ({"status": "failed"}, "AND Failure = 1", {}),
        ({"task": "task-new"}, "AND Task = 'task-new'", {}),
        (
            {"since": iso(since), "until": iso(until)},
            "AND Start >= fromUnixTimestamp64Micro({s:Int64}) "
            "AND Start < fromUnixTimestamp64Micro({u:Int64})",
            {"s": int(since * 1e6), "u": int(until * 1e6)},
        ),
    ]
    for filters, extra, params in cases:
        expected = migrated.query(ORACLE.format(extra=extra), params)
        assert expected, filters
        assert pages(migrated, 2, **filters) == expected, filters


def test_live_updates_show_the_runs_newer_than_the_newest_shown(migrated: Store) -> None:
    """`after` a run: the runs newer than it, up to the limit, the ones right after it first
    taken, shown newest first."""
    everything = migrated.query(ORACLE.format(extra=""))
    older = everything[6]
    cursor = f"{older[4]}:{older[0]}:{older[1]}"
    page = list_runs(migrated, RunsFilter(limit=4, after=cursor))
    assert [shown(run) for run in page.runs] == everything[2:6]
    assert page.next_cursor is None


def test_filter_suggestions_name_the_live_runs(migrated: Store) -> None:
    choices = filter_choices(migrated)
    assert choices["agent"] == ["billing", "support"]
    assert {"task-0", "task-1", "task-2", "task-new", "task-inner"} <= set(choices["task"])


def test_a_run_the_rollup_still_counts_leaves_no_hole_in_the_page(migrated: Store) -> None:
    """Revisions stored in one insert: ClickHouse keeps only the newest in `trajectories` as it
    writes the block, the rollup's view saw both, so `runs_by_start` still holds the deleted
    run. The page leaves it out and still fills up from the runs after it."""
    runs = [agent_run(start=NOW + 10 + i, trace_id=f"f{i:031x}", root_span_id=ROOT) for i in range(1, 5)]
    insert_trajectories(migrated, [*(run_row(run) for run in runs), deleted_row(runs[2], version=2)])
    page = list_runs(migrated, RunsFilter(limit=3))
    assert [run["trace_id"] for run in page.runs] == [f"f{i:031x}" for i in (4, 2, 1)]
    assert page.next_cursor == cursor_of(page.runs[-1])
