"""The CLI's round trips, with a real sidecar on loopback holding the embedded store: what one
command prints is accepted by the next (ids as tables print them, JSON output as input), every
error has its documented exit code, and read commands through the sidecar load no heavy library."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from otlp_builders import agent_span, new_span_id, request, tool_span

from agenttrail.evaluators.cli.main import cli
from agenttrail.evaluators.scoring.reference_store import latest_references

from ..scoring.test_online_scoring import wait_scored
from .test_cli_start import HEAVY, PROBE


def send(sidecar: Any, trace: str, task: str, tools: list[tuple[str, dict[str, Any]]], ms: float) -> None:
    root = new_span_id()
    spans = [agent_span(trace, root, 0, ms, attributes={"agenttrail.task": task})]
    spans += [
        tool_span(trace, new_span_id(), root, name, 2 * i + 1, 2 * i + 2, arguments=args)
        for i, (name, args) in enumerate(tools)
    ]
    sidecar.pipeline.accept(request(*spans).SerializeToString())


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def two_runs(start_sidecar: Any, chdb_dir: Path, database: str) -> tuple[list[str], list[str]]:
    """A sidecar holding the store with two scored runs whose trace ids share 8 characters;
    the CLI's store options and the two trace ids."""
    sidecar = start_sidecar()
    shared = "deadbeef"
    traces = [shared + os.urandom(12).hex() for _ in range(2)]
    send(sidecar, traces[0], "refund", [("lookup", {"id": 1}), ("refund", {"amount": 5})], 12.5)
    send(sidecar, traces[1], "faq", [("search", {"q": "x"})], 1500)
    wait_scored(sidecar, traces)
    return ["--store", str(chdb_dir), "--database", database], traces


def test_ids_as_tables_print_them_are_accepted_everywhere(two_runs: tuple[list[str], list[str]]) -> None:
    """The 12-character ids `trajectories` prints select that run in --trace, `scores --trace`
    and `audit`; a prefix two runs share is a usage error (exit 2) listing both full ids."""
    where, traces = two_runs
    table = run("trajectories", *where)
    assert table.exit_code == 0, table.output
    printed = [line.split()[1] for line in table.output.splitlines()[2:]]  # start, trace, agent, ...
    assert sorted(printed) == sorted(trace[:12] for trace in traces)
    for short in printed:
        [full] = [trace for trace in traces if trace.startswith(short)]
        one = run("trajectories", *where, "--trace", short, "--format", "json")
        assert one.exit_code == 0, one.output
        assert [json.loads(line)["trace_id"] for line in one.output.splitlines()] == [full]
        scores = run("scores", *where, "--trace", short, "--format", "json")
        assert scores.exit_code == 0, scores.output
        rows = [json.loads(line) for line in scores.output.splitlines()]
        assert rows
        assert {row["trace_id"] for row in rows} == {full}
        audit = run("audit", short, *where, "--format", "json")
        assert audit.exit_code == 0, audit.output
        decisions = [json.loads(line) for line in audit.output.splitlines()]
        assert decisions
        assert {d["trace_id"] for d in decisions} == {full}
        # The table's first column is the run's agent span, headed as such (not "run", which
        # read as the trace id just given and printed something else).
        audit_table = run("audit", short, *where).output.splitlines()
        assert audit_table[0].split()[:3] == ["root", "span", "rev"]
        assert {line.split()[0] for line in audit_table[2:]} == {d["root_span_id"] for d in decisions}
    ambiguous = run("trajectories", *where, "--trace", "deadbeef")
    assert ambiguous.exit_code == 2
    assert "is the start of 2 trace ids" in ambiguous.output
    assert all(trace in ambiguous.output for trace in traces)
    assert run("audit", "DEADBEEF", *where).exit_code == 2  # case does not matter; still ambiguous
    too_short = run("trajectories", *where, "--trace", "deadbee")
    assert too_short.exit_code == 2
    assert "prefix of 8 or more" in too_short.output


def test_an_id_no_run_has_is_an_error_that_says_where_to_look(two_runs: tuple[list[str], list[str]]) -> None:
    """`audit`, `trajectories --trace` and `scores --trace` with a trace id (or prefix) no run has
    say so and how to list runs, with exit 2 (an argument naming nothing), not an empty success."""
    where, _ = two_runs
    for unknown in ("0123456789abcdef0123456789abcdef", "01234567"):
        for command in (
            ["audit", unknown],
            ["trajectories", "--trace", unknown],
            ["scores", "--trace", unknown],
        ):
            result = run(*command, *where)
            assert result.exit_code == 2, (command, result.output)
            assert "no run with" in result.output
            assert unknown in result.output
            assert "agenttrail trajectories" in result.output


def test_the_scores_table_prints_latency_as_a_duration(two_runs: tuple[list[str], list[str]]) -> None:
    """The latency score reads in the unit that fits, as every other duration the CLI prints
    ("12.5 ms", "1.5 s"), not as seconds to three places ("0.013"); JSON keeps the seconds."""
    where, traces = two_runs
    table = run("scores", *where, "--metric", "latency")
    assert table.exit_code == 0, table.output
    shown = {line.split()[1]: " ".join(line.split()[4:]) for line in table.output.splitlines()[2:]}
    assert shown == {traces[0][:12]: "latency 12.5 ms", traces[1][:12]: "latency 1.5 s"}
    rows = [
        json.loads(line)
        for line in run("scores", *where, "--metric", "latency", "--format", "json").output.splitlines()
    ]
    assert sorted(row["score"] for row in rows) == [0.0125, 1.5]


def test_trajectories_json_is_evaluate_input(two_runs: tuple[list[str], list[str]], tmp_path: Path) -> None:
    """`trajectories --format json` saved to a file (.json or .jsonl) is what `evaluate` reads:
    exit 0, one instance per run, its latency and failure; the tables show ms and s."""
    where, _ = two_runs
    listed = run("trajectories", *where, "--format", "json")
    assert listed.exit_code == 0, listed.output
    runs = [json.loads(line) for line in listed.output.splitlines()]
    table = run("trajectories", *where).output
    assert "12.5 ms" in table
    assert "1.5 s" in table
    for name in ("runs.json", "runs.jsonl"):
        path = tmp_path / name
        path.write_text(listed.output, encoding="utf-8")
        evaluated = run("evaluate", str(path), "--format", "json")
        assert evaluated.exit_code == 0, evaluated.output
        instances = json.loads(evaluated.stdout)["instances"]
        assert [i["metrics"]["latency"] for i in instances] == [r["latency_s"] for r in runs]
        assert [i["metrics"]["failure"] for i in instances] == [0.0, 0.0]
        assert all(i["error"] is None for i in instances)
    as_table = run("evaluate", str(tmp_path / "runs.json"))
    assert "12.5 ms" in as_table.output
    assert "1.5 s" in as_table.output


def test_reference_listing_loads_back(store: Any, chdb_dir: Path, database: str, tmp_path: Path) -> None:
    """`references list --format json` is a reference file: loading it back changes nothing."""
    where = ["--store", str(chdb_dir), "--database", database]
    first = tmp_path / "refs.yaml"
    first.write_text(
        "refund:\n  reference_trajectory: [{tool_name: lookup, tool_input: {id: 1}}, {name: refund}]\n"
        "  metrics: [trajectory_exact_match]\n"
        "faq: [{tool_name: search}]\n"
    )
    assert run("references", "load", str(first), *where).output.startswith("2 added")
    listing = run("references", "list", *where, "--format", "json")
    assert listing.exit_code == 0, listing.output
    again = tmp_path / "listed.jsonl"
    again.write_text(listing.output, encoding="utf-8")
    loaded = run("references", "load", str(again), *where)
    assert loaded.exit_code == 0, loaded.output
    assert loaded.output.strip() == "0 added, 0 updated (new version), 2 unchanged"


def test_exit_codes(tmp_path: Path, chdb_dir: Path, database: str, store: Any) -> None:
    """2 usage error, 3 bad input, 4 store unavailable, each with a message saying what to do."""
    where = ["--store", str(chdb_dir), "--database", database]
    assert run("trajectories", *where, "--limit", "0").exit_code == 2
    assert run("trajectories", *where, "--since", "yesterday-ish").exit_code == 2
    assert run("stats", *where, "--bucket", "2d").exit_code == 2
    bad = tmp_path / "bad.json"
    bad.write_text('{"refund": {"metric": "x"}}')
    refused = run("references", "load", str(bad), *where)
    assert (refused.exit_code, "unknown field" in refused.output) == (3, True)
    assert run("evaluate", str(bad)).exit_code == 3
    missing = run("trajectories", "--store", str(tmp_path / "none"))
    assert missing.exit_code == 4
    assert "agenttrail serve" in missing.output
    assert "--config" not in missing.output  # the store was named: no config to point at
    # Without --store or --config the default store is read; serve may run from a config that
    # names another, and the error says to give this command that config.
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        default = run("trajectories")
    finally:
        os.chdir(cwd)
    assert default.exit_code == 4
    assert f"no store at {tmp_path / 'agenttrail-data'}" in default.output
    assert "(--config FILE or AGENTTRAIL_CONFIG)" in default.output
    down = run("trajectories", "--server", "http://127.0.0.1:9")
    assert down.exit_code == 4
    assert "is `agenttrail serve` running?" in down.output
    config = tmp_path / "bad.yaml"
    config.write_text("collector:\n  quiet_period_s: soon\n")
    assert run("trajectories", "--config", str(config)).exit_code == 3


@pytest.mark.parametrize(
    "command",
    [("trajectories",), ("stats", "--since", "2h"), ("alerts",), ("judges", "list"), ("references", "list")],
)
def test_reads_through_the_sidecar_load_no_heavy_library(
    two_runs: tuple[list[str], list[str]], command: tuple[str, ...]
) -> None:
    """A read while serve holds the store asks its HTTP API: the process never loads the ClickHouse
    engine, scipy, matplotlib, openai or gRPC (sys.modules of a fresh interpreter)."""
    where, traces = two_runs
    args = [*command, *where, "--format", "json"]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    output, modules = done.stdout.rsplit("@@", 1)
    if command[0] == "trajectories":
        assert {json.loads(line)["trace_id"] for line in output.splitlines() if line.strip()} == set(traces)
    assert set(json.loads(modules)) & set(HEAVY) == set()


def test_references_load_while_serve_holds_the_store(
    start_sidecar: Any, chdb_dir: Path, database: str, tmp_path: Path
) -> None:
    """With the sidecar holding the store, `references load` goes through its write API (under its
    bearer token) and `references list` through its read API: the same commands as without it."""
    sidecar = start_sidecar(bearer_token="s3cret")
    where = ["--store", str(chdb_dir), "--database", database]
    token = {"AGENTTRAIL_BEARER_TOKEN": "s3cret"}
    refs = tmp_path / "refs.yaml"
    refs.write_text("refund: [{tool_name: lookup}, {tool_name: refund}]\nfaq: [{tool_name: search}]\n")
    loaded = CliRunner().invoke(cli, ["references", "load", str(refs), *where], env=token)
    assert loaded.exit_code == 0, loaded.output
    assert loaded.output.strip() == "2 added, 0 updated (new version), 0 unchanged"
    stored = {
        task: [call.name for call in ref.entry.reference]
        for task, ref in latest_references(sidecar.store).items()
    }
    assert stored == {"refund": ["lookup", "refund"], "faq": ["search"]}
    listing = CliRunner().invoke(cli, ["references", "list", *where, "--format", "json"], env=token)
    assert listing.exit_code == 0, listing.output
    assert sorted(json.loads(line)["task"] for line in listing.output.splitlines()) == ["faq", "refund"]
    again = CliRunner().invoke(cli, ["references", "load", str(refs), *where], env=token)
    assert again.output.strip() == "0 added, 0 updated (new version), 2 unchanged"
    refused = CliRunner().invoke(
        cli, ["references", "load", str(refs), *where], env={"AGENTTRAIL_BEARER_TOKEN": ""}
    )
    assert refused.exit_code == 1
    assert "401" in refused.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("refund: {metric: x}\n")
    assert CliRunner().invoke(cli, ["references", "load", str(bad), *where], env=token).exit_code == 3
