"""Judges configured in the sidecar's config file: judged online, budget in /healthz, audit and
scores read through the running sidecar, backfill run by the sidecar while it holds the store."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import yaml
from click.testing import CliRunner
from otlp_builders import agent_span, new_span_id, new_trace_id, request, tool_span
from serve_processes import AGENTTRAIL, StartServe, call_json

from agenttrail.evaluators.cli.main import cli


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
    paused and until when; audit and scores read through the sidecar; backfill, run by the sidecar,
    shares the online judge's budget and stops on it."""
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
    # The deterministic evaluator is a worker of its own, woken by the same assembly: on a busy
    # machine it may decide after the judge did, so wait for it rather than race it.
    assert wait_decided(sidecar, "trajectory", [done]) == {done: "scored"}
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

    # backfill runs in the sidecar, on the online judge's client: the budget spent online stops it
    stopped = invoke("backfill", "--judge", "helpful", "--since", "2020-01-01", *where)
    assert stopped.exit_code == 1, stopped.output
    assert "backfill runs in the sidecar at http://" in stopped.output
    assert "stopped: judge budget spent: 300 of 300 tokens per day" in stopped.output
    assert "2 run(s) stay pending" in stopped.output


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


def write_judges(path: Path, llm: Any, *judges: dict[str, Any], lookback_s: int = 86_400) -> None:
    """The config file with these judges (trajectory_accuracy on the local model unless given)."""
    items = [
        {"type": "trajectory_accuracy", "options": {"continuous": True}, "concurrency": 1, **j}
        for j in judges
    ]
    document = {
        "evaluators": {"poll_interval_s": 0.1, "lookback_s": lookback_s},
        "judge_defaults": {"base_url": llm.base_url, "model": "judge-model", "api_key": "test"},
        "judges": items,
    }
    path.write_text(yaml.safe_dump(document))


def judges_in_force(*where: str) -> dict[str, dict[str, Any]]:
    listed = invoke("judges", "list", *where, "--format", "json")
    assert listed.exit_code == 0, listed.output
    return {row["name"]: row for row in map(json.loads, listed.output.splitlines())}


def test_judges_reload_and_backfill_go_through_serve(
    start_sidecar: Any,
    llm: Any,
    add_runs: Any,
    decisions_of: Any,
    tmp_path: Path,
    chdb_dir: Path,
    database: str,
) -> None:
    """While serve holds the store: a judge added to the config file is unknown to backfill until
    `judges reload`; then serve judges new runs with it and `backfill` judges the old ones through
    serve. A bad edit is refused (exit 3, naming the key) and the judge in force keeps judging; an
    edit not yet reloaded makes backfill refuse rather than use the old judge."""
    old = add_runs(3, age_s=2 * 86400) + add_runs(1, age_s=2 * 86400, agent="other")
    config = tmp_path / "agenttrail.yaml"
    write_judges(config, llm)  # no judges yet
    sidecar = start_sidecar(config_file=str(config))
    where = ["--store", str(chdb_dir), "--database", database, "--config", str(config)]
    assert judges_in_force(*where) == {}

    write_judges(config, llm, {"name": "helpful", "agents": ["bot"]})
    unknown = invoke("backfill", "--judge", "helpful", "--since", "7d", *where)
    assert unknown.exit_code == 1, unknown.output
    assert "no judge named 'helpful'" in unknown.output
    assert "run `agenttrail judges reload` first" in unknown.output

    reloaded = invoke("judges", "reload", *where)
    assert reloaded.exit_code == 0, reloaded.output
    assert "1 added (helpful), 0 changed, 0 removed, 0 unchanged" in reloaded.output
    first = judges_in_force(*where)["helpful"]
    assert (first["enabled"], first["agents"], first["sample_rate"]) == (True, ["bot"], 1.0)
    live = send_run(sidecar)
    assert wait_decided(sidecar, "helpful", [live]) == {live: "done"}, "serve judges with the reloaded judge"

    dry = invoke("backfill", "--judge", "helpful", "--since", "7d", "--dry-run", *where)
    assert dry.exit_code == 0, dry.output
    assert (
        f"4 run(s) not yet decided by helpful@{first['version']}: 3 would be judged, 1 filtered" in dry.output
    )
    done = invoke("backfill", "--judge", "helpful", "--since", "7d", *where)
    assert done.exit_code == 0, done.output
    assert "backfill runs in the sidecar" in done.output
    assert "4 run(s) decided: 3 judged, 0 error(s), 1 filtered" in done.output
    decided = decisions_of(sidecar.store, "helpful")
    assert sorted(decided[trace][0] for trace in old) == ["done", "done", "done", "filtered"]
    again = invoke("backfill", "--judge", "helpful", "--since", "7d", *where)
    assert "0 run(s) decided" in again.output

    for bad, key in (({"sample_rate": 2}, "sample_rate"), ({"type": "nonsense"}, "nonsense")):
        write_judges(config, llm, {"name": "helpful", "agents": ["bot"], **bad})
        refused = invoke("judges", "reload", *where)
        assert refused.exit_code == 3, refused.output
        assert key in refused.output
        assert "the judges in force are unchanged" in refused.output
        assert judges_in_force(*where)["helpful"] == first
    later = send_run(sidecar)
    assert wait_decided(sidecar, "helpful", [later]) == {later: "done"}, "the judge in force still judges"

    write_judges(config, llm, {"name": "helpful", "agents": ["bot"], "model": "judge-model-2"})
    stale = invoke("backfill", "--judge", "helpful", "--since", "7d", *where)
    assert stale.exit_code == 1, stale.output
    assert "differs from the one the running sidecar has in force" in stale.output
    changed = invoke("judges", "reload", *where)
    assert "0 added, 1 changed (helpful)" in changed.output, changed.output
    second = judges_in_force(*where)["helpful"]
    assert (second["model"], second["version"] != first["version"]) == ("judge-model-2", True)
    rejudged = invoke("backfill", "--judge", "helpful", "--since", "7d", *where)
    # the old runs again, under the new version (the live ones started long before 7d: OTLP builders' clock)
    assert f"backfill helpful@{second['version']}: 4 run(s) decided: 3 judged" in rejudged.output, (
        rejudged.output
    )


def test_judges_reload_without_serve_checks_the_file(
    llm: Any, tmp_path: Path, chdb_dir: Path, database: str
) -> None:
    """With no sidecar running, `judges reload` checks the section as serve would at start: valid
    (exit 0, says nothing was reloaded) or refused (exit 3, naming the judge and key)."""
    config = tmp_path / "agenttrail.yaml"
    write_judges(config, llm, {"name": "helpful"}, {"name": "off", "enabled": False})
    where = ["--store", str(chdb_dir), "--database", database, "--config", str(config)]
    checked = invoke("judges", "reload", *where)
    assert checked.exit_code == 0, checked.output
    assert "nothing to reload" in checked.output
    assert "2 judge(s) valid, 1 enabled (helpful)" in checked.output
    write_judges(config, llm, {"name": "helpful", "failure": "sometimes"})
    refused = invoke("judges", "reload", *where)
    assert refused.exit_code == 3
    assert "judge 'helpful': key 'failure' must be one of" in refused.output


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AGENTTRAIL, *args], capture_output=True, text=True, timeout=120, check=False)


def wait_for(condition: Any, what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_sighup_reloads_the_judges_of_a_serve_process(
    llm: Any, tmp_path: Path, serve_process: StartServe
) -> None:
    """A real `agenttrail serve` process: SIGHUP takes an edited judges section, and the CLI
    backfills through it with the new judge; a bad edit on SIGHUP is logged and
    refused while serve keeps running with the judges in force, and `judges reload` (a process of its
    own, for its exit code) exits 3 on it."""
    config, store = tmp_path / "agenttrail.yaml", tmp_path / "store"
    write_judges(config, llm, lookback_s=1)  # runs older than 1 s are the backfill's, not the worker's
    serve = serve_process("--config", str(config), "--store", str(store), "--quiet-period-s", "0.3")
    where = ["--store", str(store), "--config", str(config)]
    traces = [new_trace_id() for _ in range(2)]
    for trace in traces:
        root = new_span_id()
        body = request(
            agent_span(trace, root, 0, 100, attributes={"agenttrail.task": "refund"}),
            tool_span(trace, new_span_id(), root, "lookup", 1, 5),
        ).SerializeToString()
        with grpc.insecure_channel(serve.grpc) as channel:
            channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")(
                body, timeout=30
            )
    wait_for(
        lambda: len(invoke("trajectories", *where, "--format", "json").output.splitlines()) == 2,
        "assembly",
    )
    time.sleep(1.5)  # out of the online worker's 1 s window

    write_judges(config, llm, {"name": "helpful"}, lookback_s=1)
    serve.process.send_signal(signal.SIGHUP)
    wait_for(lambda: "helpful" in judges_in_force(*where), "SIGHUP to add the judge")
    dry = invoke("backfill", "--judge", "helpful", "--since", "2020-01-01", "--dry-run", *where)
    assert dry.exit_code == 0, dry.output
    assert "2 run(s) not yet decided by helpful@" in dry.output
    done = invoke("backfill", "--judge", "helpful", "--since", "2020-01-01", *where)
    assert done.exit_code == 0, done.output
    assert "2 run(s) decided: 2 judged" in done.output
    assert len(llm.chat_requests()) == 2

    in_force = judges_in_force(*where)
    write_judges(config, llm, {"name": "helpful", "sample_rate": 2}, lookback_s=1)
    serve.process.send_signal(signal.SIGHUP)
    wait_for(lambda: "reload refused" in serve.output(), "the refusal in serve's log")
    assert serve.process.poll() is None, "serve keeps running"
    assert judges_in_force(*where) == in_force
    refused = run_cli("judges", "reload", *where)
    assert refused.returncode == 3, refused.stderr
    assert "key 'sample_rate' must be a number from 0 to 1, got 2" in refused.stderr
    assert serve.stop() == 0
    logged = serve.output()
    assert "judges reloaded from" in logged
    assert "reload refused, the settings in force stay as they were" in logged
    assert "key 'sample_rate' must be a number from 0 to 1" in logged


def admin(sidecar: Any, path: str, body: dict[str, Any] | None = None, token: str = "s3cret") -> Any:
    """(status, JSON answer) of the sidecar's admin API."""
    return call_json(sidecar.http.address, f"/api/v1/admin{path}", body, token)


def test_a_backfill_job_in_serve_is_one_per_judge_cancellable_and_behind_the_token(
    start_sidecar: Any, llm: Any, add_runs: Any, tmp_path: Path
) -> None:
    """The admin API runs one backfill per judge (a second is 409 naming the first), cancels it
    between batches on request (what the CLI sends on Ctrl-C), and refuses everything without the
    bearer token."""
    import dataclasses

    add_runs(20, age_s=2 * 86400)
    config = tmp_path / "agenttrail.yaml"
    write_judges(config, llm, {"name": "helpful"})
    answer = llm.responder
    llm.responder = lambda request: dataclasses.replace(answer(request), delay_s=0.1)
    sidecar = start_sidecar(config_file=str(config), bearer_token="s3cret")
    body = {"judge": "helpful", "runs": {"since": "2020-01-01T00:00:00+00:00", "limit": "100"}}
    assert admin(sidecar, "/judges/reload", {}, token="wrong")[0] == 401
    assert admin(sidecar, "/backfill", body, token="wrong")[0] == 401
    status, job = admin(sidecar, "/backfill", body)
    assert (status, job["state"]) == (202, "running")
    busy, refused = admin(sidecar, "/backfill", body)
    assert busy == 409
    assert job["id"] in refused["message"]
    wait_for(lambda: admin(sidecar, f"/backfill/{job['id']}")[1]["report"]["decided"] > 0, "a first batch")
    assert admin(sidecar, f"/backfill/{job['id']}/cancel", {})[0] == 200
    ended = wait_for(
        lambda: (j := admin(sidecar, f"/backfill/{job['id']}")[1])["state"] != "running" and j, "cancellation"
    )
    assert ended["state"] == "cancelled"
    assert 0 < ended["report"]["decided"] < 20, "stopped between batches, what was decided kept"
    assert admin(sidecar, "/backfill/nope")[0] == 404


def test_judges_commands_read_their_sections_env_over_the_file(
    llm: Any, add_runs: Any, tmp_path: Path, chdb_dir: Path, database: str
) -> None:
    """With no sidecar, `judges list`, `judges reload` and `audit` build the judges as serve
    would: AGENTTRAIL_JUDGE_DEFAULTS_MODEL beats the file's model (and changes the judge's
    version, the one audit shows), and a bad value is exit 3 naming the variable."""
    [run] = add_runs(1, age_s=60)
    config = tmp_path / "agenttrail.yaml"
    write_judges(config, llm, {"name": "helpful"})
    where = ["--store", str(chdb_dir), "--database", database, "--config", str(config)]
    runner = CliRunner()

    def listed(env: dict[str, str]) -> dict[str, Any]:
        result = runner.invoke(cli, ["judges", "list", *where, "--format", "json"], env=env)
        assert result.exit_code == 0, result.output
        [row] = map(json.loads, result.output.splitlines())
        return dict(row)

    from_file = listed({})
    from_env = listed({"AGENTTRAIL_JUDGE_DEFAULTS_MODEL": "env-model"})
    assert (from_file["model"], from_env["model"]) == ("judge-model", "env-model")
    assert from_env["version"] != from_file["version"]
    audit = runner.invoke(
        cli, ["audit", run, *where, "--format", "json"], env={"AGENTTRAIL_JUDGE_DEFAULTS_MODEL": "env-model"}
    )
    assert audit.exit_code == 0, audit.output
    [decision] = [row for row in map(json.loads, audit.output.splitlines()) if row["evaluator"] == "helpful"]
    assert decision["version"] == from_env["version"]
    for command in (["judges", "list"], ["judges", "reload"], ["audit", run]):
        bad = runner.invoke(cli, [*command, *where], env={"AGENTTRAIL_JUDGE_DEFAULTS_TIMEOUT_S": "soon"})
        assert bad.exit_code == 3, bad.output
        assert "AGENTTRAIL_JUDGE_DEFAULTS_TIMEOUT_S" in bad.output
