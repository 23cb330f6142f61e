"""The audit, backfill and judges commands' service functions, called without click, on a real
chDB store and (for the paths through serve) a real sidecar on loopback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agenttrail.collector.cli import SidecarApi
from agenttrail.collector.errors import ConfigError
from agenttrail.collector.queries import TrajectoryFilter, parse_time
from agenttrail.evaluators import config_sections
from agenttrail.evaluators.admin.service import BackfillFailed, backfill_judge
from agenttrail.evaluators.judges.config import JudgesConfig
from agenttrail.evaluators.judges.service import (
    JudgesChecked,
    JudgesReloaded,
    JudgesUsageError,
    audit_decisions,
    configured_judges,
    judge_spec,
    list_judges,
    reload_judges,
)

WEEK = 7 * 86400


def judges_of(config_file: str | None) -> JudgesConfig:
    """The judges section parsed as the CLI hands it over (no environment values here)."""
    return config_sections.load_judges(config_file, {}).judges


def write_judges(path: Path, llm: Any, *judges: dict[str, Any]) -> str:
    items = [
        {"type": "trajectory_accuracy", "options": {"continuous": True}, "concurrency": 1, **j}
        for j in judges
    ]
    document = {
        "evaluators": {"poll_interval_s": 0.1},
        "judge_defaults": {"base_url": llm.base_url, "model": "judge-model", "api_key": "test"},
        "judges": items,
    }
    path.write_text(yaml.safe_dump(document))
    return str(path)


def test_backfill_on_the_store_then_audit_shows_the_decisions(
    judges_store: Any, add_runs: Any, llm: Any, tmp_path: Path
) -> None:
    """backfill_judge on a store: a dry run counts and calls no model; the real one judges the
    runs the judge takes, filters the others, and a second finds nothing; the audit reads them."""
    bots = add_runs(2, age_s=WEEK, agent="bot")
    [other] = add_runs(1, age_s=WEEK, agent="other")
    config = write_judges(tmp_path / "agenttrail.yaml", llm, {"name": "helpful", "agents": ["bot"]})
    spec = judge_spec(config, judges_of(config), "helpful")
    runs = TrajectoryFilter(since=parse_time("8d"), limit=100)

    dry = backfill_judge(judges_store, spec, runs, dry_run=True)
    assert (dry.dry_run, dry.would) == (True, {"judge": 2, "filtered": 1})
    assert llm.chat_requests() == []

    seen: list[int] = []
    done = backfill_judge(judges_store, spec, runs, progress=lambda report: seen.append(report["decided"]))
    assert (done.judge, done.decided, done.paused) == ("helpful", 3, None)
    assert (done.decisions["done"], done.decisions["filtered"]) == (2, 1)
    assert (done.prompt_tokens, done.completion_tokens) == (240, 60)
    assert seen[-1] == 3
    assert backfill_judge(judges_store, spec, runs).decided == 0
    assert len(llm.chat_requests()) == 2

    evaluator, judges = config_sections.load_evaluators(config, {}), judges_of(config)
    decisions = {
        row["evaluator"]: row["decision"] for row in audit_decisions(judges_store, bots[0], evaluator, judges)
    }
    assert decisions["helpful"] == "done"
    [filtered] = [
        row
        for row in audit_decisions(judges_store, other, evaluator, judges)
        if row["evaluator"] == "helpful"
    ]
    assert (filtered["decision"], filtered["detail"]) == ("filtered", "agent 'other' not in agents ['bot']")
    assert audit_decisions(judges_store, "0" * 32, evaluator, judges) == []


def test_a_failing_backfill_is_a_backfill_error(
    judges_store: Any, add_runs: Any, llm: Any, tmp_path: Path
) -> None:
    """An error inside the backfill (here: the store is gone) is BackfillFailed, not a crash."""
    add_runs(1, age_s=WEEK)
    config = write_judges(tmp_path / "agenttrail.yaml", llm, {"name": "helpful"})
    judges_store.command("DROP TABLE evaluation_decisions")
    with pytest.raises(BackfillFailed):
        backfill_judge(
            judges_store, judge_spec(config, judges_of(config), "helpful"), TrajectoryFilter(limit=10)
        )


def test_the_config_files_judges_are_checked_as_serve_checks_them(llm: Any, tmp_path: Path) -> None:
    """Without a sidecar: list and reload read the section they are given (only then); no file,
    a bad judge or an unknown name is the project's error saying what to do."""
    config = write_judges(
        tmp_path / "agenttrail.yaml", llm, {"name": "helpful"}, {"name": "later", "enabled": False}
    )
    rows = configured_judges(judges_of(config))
    assert [(row["name"], row["enabled"]) for row in rows] == [("helpful", True), ("later", False)]
    assert list_judges(None, lambda: judges_of(config)) == rows
    checked = reload_judges(None, config, lambda: judges_of(config))
    assert isinstance(checked, JudgesChecked)
    assert (checked.config_file, checked.enabled) == (config, ["helpful"])
    with pytest.raises(JudgesUsageError, match="pass --config FILE"):
        reload_judges(None, None, lambda: judges_of(None))
    with pytest.raises(JudgesUsageError, match="backfill needs the config file"):
        judge_spec(None, judges_of(None), "helpful")
    with pytest.raises(ConfigError, match="no judge named 'nobody'"):
        judge_spec(config, judges_of(config), "nobody")
    write_judges(tmp_path / "agenttrail.yaml", llm, {"name": "helpful", "sample_rate": 2})
    with pytest.raises(ConfigError, match="sample_rate"):
        configured_judges(judges_of(config))


def test_through_serve_reload_then_backfill_as_a_job(
    start_sidecar: Any, add_runs: Any, llm: Any, tmp_path: Path
) -> None:
    """With a sidecar holding the store: reload_judges reports what changed, list_judges reads the
    judges in force, and backfill_judge runs as a job there (its id given to `started`)."""
    add_runs(2, age_s=2 * 86400)
    config = write_judges(tmp_path / "agenttrail.yaml", llm)
    sidecar = start_sidecar(config_file=config)
    api = SidecarApi(f"http://{sidecar.http.address}")
    write_judges(tmp_path / "agenttrail.yaml", llm, {"name": "helpful"})

    def unread() -> JudgesConfig:
        raise AssertionError("the sidecar answers: the CLI's section is not read")

    assert list_judges(api, unread) == [], "the judges in force, not the edited file's"
    reloaded = reload_judges(api, config, unread)
    assert isinstance(reloaded, JudgesReloaded)
    assert (reloaded.changes.added, reloaded.changes.changed, reloaded.other_file) == (["helpful"], [], False)
    assert [row["name"] for row in list_judges(api, unread)] == ["helpful"]

    jobs: list[str] = []
    report = backfill_judge(
        api,
        judge_spec(config, judges_of(config), "helpful"),
        TrajectoryFilter(since=parse_time("7d"), limit=100),
        started=jobs.append,
        poll_s=0.05,
    )
    assert len(jobs) == 1
    assert (report.decided, report.decisions["done"]) == (2, 2)
