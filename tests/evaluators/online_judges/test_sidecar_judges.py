"""Judges configured in the sidecar's config file: judged online, budget in /healthz, audit and
scores read through the running sidecar, backfill refused while serve holds the store."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner
from otlp_builders import agent_span, new_span_id, new_trace_id, request, tool_span

from agenttrail.evaluators.cli import cli


def send_run(sidecar: Any, agent: str = "bot") -> str:
    trace, root = new_trace_id(), new_span_id()
    spans = [
        agent_span(trace, root, 0, 100, agent=agent, attributes={"agenttrail.task": "refund"}),
        tool_span(trace, new_span_id(), root, "lookup", 1, 5, arguments={"id": 1}),
    ]
    sidecar.pipeline.accept(request(*spans).SerializeToString())
    return trace


def write_config(tmp_path: Path, llm: Any, **judge: Any) -> str:
    path = tmp_path / "agenttrail.yaml"
    item = {
        "name": "helpful",
        "type": "trajectory_accuracy",
        "options": {"continuous": True},
        "concurrency": 1,
        **judge,
    }
    document = {
        "evaluators": {"poll_interval_s": 0.1},
        "judge_defaults": {"base_url": llm.base_url, "model": "judge-model", "api_key": "test"},
        "judges": [item, {"name": "later", "type": "task_completion", "enabled": False}],
    }
    path.write_text(yaml.safe_dump(document))
    return str(path)


def wait_decided(sidecar: Any, judge: str, traces: list[str], timeout: float = 30) -> dict[str, str]:
    assert sidecar.wait_until_assembled(timeout)
    deadline = time.monotonic() + timeout
    found: dict[str, str] = {}
    while time.monotonic() < deadline:
        found = dict(
            sidecar.store.query(
                "SELECT TraceId, Decision FROM evaluation_decisions FINAL "
                "WHERE Evaluator = {j:String} AND TraceId IN {ids:Array(String)}",
                {"j": judge, "ids": traces},
            )
        )
        if set(found) >= set(traces):
            return found
        time.sleep(0.05)
    raise AssertionError(f"undecided: {set(traces) - set(found)}")


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_sidecar_judges_runs_and_says_when_the_budget_is_spent(
    start_sidecar: Any, llm: Any, tmp_path: Path, chdb_dir: Path, database: str, budget_clock: float
) -> None:
    """The sidecar judges live runs until the budget is spent, then /healthz says the judge is
    paused and until when; audit and scores read through the sidecar; backfill refuses politely."""
    config = write_config(tmp_path, llm, budget={"tokens_per_day": 300})  # two calls of 150 tokens
    sidecar = start_sidecar(config_file=config)
    traces = [send_run(sidecar) for _ in range(4)]
    decided = wait_decided(sidecar, "helpful", traces)
    assert sorted(decided.values()) == ["budget_paused", "budget_paused", "done", "done"]

    # The worker records its pause just after it writes the decisions: wait for the pause.
    deadline = time.monotonic() + 30
    while True:
        with urllib.request.urlopen(f"http://{sidecar.http.address}/healthz", timeout=10) as response:
            health = json.loads(response.read())
        if health["judges"]["helpful"] != "ok" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert health["status"] == "ok"
    assert health["judges"]["helpful"].startswith("paused: judge budget spent: 300 of 300 tokens per day")
    assert health["judges"]["helpful"].endswith("judging resumes at 2026-01-01T00:00:00Z")  # budget_clock

    where = ["--store", str(chdb_dir), "--database", database, "--config", config]
    done = next(t for t, d in decided.items() if d == "done")
    audit = invoke("audit", done, *where, "--format", "json")
    assert audit.exit_code == 0, audit.output
    rows = {row["evaluator"]: row for row in map(json.loads, audit.output.splitlines())}
    assert {name: row["decision"] for name, row in rows.items()} == {
        "trajectory": "scored",
        "helpful": "done",
        "later": "disabled",
    }
    paused = next(t for t, d in decided.items() if d == "budget_paused")
    table = invoke("audit", paused, *where)
    assert "budget_paused" in table.output
    assert "resumes at" in table.output

    scores = invoke("scores", "--trace", done, "--metric", "helpful", "--format", "json", *where)
    [row] = map(json.loads, scores.output.splitlines())
    assert (row["score"], row["model"], row["prompt_tokens"], row["completion_tokens"]) == (
        0.75,
        "judge-model",
        120,
        30,
    )

    refused = invoke("backfill", "--judge", "helpful", "--since", "1d", *where)
    assert refused.exit_code != 0
    assert "held by a running sidecar" in refused.output


def test_backfill_command_judges_past_runs(
    start_sidecar: Any, llm: Any, tmp_path: Path, chdb_dir: Path, database: str
) -> None:
    """With serve stopped, `agenttrail backfill` judges a newly added judge's past runs once,
    with a dry run first; a second backfill finds nothing to do."""
    sidecar = start_sidecar()  # no judges yet
    traces = [send_run(sidecar, agent=agent) for agent in ("bot", "bot", "other")]
    assert sidecar.wait_until_assembled(30)
    sidecar.stop()
    config = write_config(tmp_path, llm, agents=["bot"])
    where = ["--store", str(chdb_dir), "--database", database, "--config", config]

    dry = invoke("backfill", "--judge", "helpful", "--since", "2020-01-01", "--dry-run", *where)
    assert dry.exit_code == 0, dry.output
    assert "3 run(s) not yet decided" in dry.output
    assert "2 would be judged, 1 filtered" in dry.output
    assert llm.chat_requests() == []

    first = invoke("backfill", "--judge", "helpful", "--since", "2020-01-01", *where)
    assert first.exit_code == 0, first.output
    assert "3 run(s) decided: 2 judged, 0 error(s), 1 filtered" in first.output
    assert "240 prompt + 60 completion tokens" in first.output
    second = invoke("backfill", "--judge", "helpful", "--since", "2020-01-01", *where)
    assert "0 run(s) decided" in second.output
    assert len(llm.chat_requests()) == 2
    audit = invoke("audit", traces[2], *where, "--format", "json")
    helpful = [json.loads(line) for line in audit.output.splitlines() if '"helpful"' in line]
    assert [(row["decision"], row["detail"]) for row in helpful] == [
        ("filtered", "agent 'other' not in agents ['bot']")
    ]
    unknown = invoke("backfill", "--judge", "nobody", "--since", "2020-01-01", *where)
    assert unknown.exit_code != 0
    assert "no judge named 'nobody'" in unknown.output
