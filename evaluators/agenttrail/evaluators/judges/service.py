"""What `agenttrail audit` and `agenttrail judges list|reload` do, as functions tests and other
callers use without click: a run's decisions on a store, the configured judges (built as serve
builds them at start), and a reload of the running sidecar's judges.

The sections come parsed (the CLI reads them env over file, as serve does, with
`config_sections`, which this wing may not import); the file's path only where the sidecar must
be told or named.

Errors are the project's: ConfigError for a config file that cannot be used (the CLI's exit 3),
`JudgesUsageError` for options that cannot work (exit 2). Where the answer comes from (the
sidecar holding the store or the store itself) is the caller's choice: it passes the sidecar's
API or None.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agenttrail.collector.errors import AgentTrailError

if TYPE_CHECKING:
    from agenttrail.collector.cli import SidecarApi
    from agenttrail.collector.store import Store
    from agenttrail.evaluators.judges.config import JudgesConfig, JudgeSpec
    from agenttrail.evaluators.reloads import NamedChanges
    from agenttrail.evaluators.scoring.worker import EvaluatorConfig


class JudgesUsageError(AgentTrailError, ValueError):
    """A judges command given options that cannot work (no config file where one is needed)."""


def audit_decisions(
    store: Store, trace_id: str, evaluator: EvaluatorConfig, judges: JudgesConfig
) -> list[dict[str, Any]]:
    """Every evaluator's decision on the run `trace_id` in `store`: the deterministic evaluator
    and each configured judge (a saved criteria set's version read from `store`)."""
    from agenttrail.evaluators.judges.registry import ClientPool
    from agenttrail.evaluators.judges.setup import audit_subjects, build_online_judges
    from agenttrail.evaluators.scoring.audit import audit_run

    pool = ClientPool(store_factory=lambda: store)
    subjects = audit_subjects(evaluator, judges, build_online_judges(judges, pool))
    return audit_run(store, trace_id, subjects, lookback_s=evaluator.lookback_s)


def configured_judges(config: JudgesConfig) -> list[dict[str, Any]]:
    """The configured judges in file order, each built as serve builds them at start (so a
    judge serve would refuse is a ConfigError here too), as `judges list --format json` rows."""
    from agenttrail.evaluators.judges.setup import build_online_judges, judge_rows

    return judge_rows(config, build_online_judges(config))


def list_judges(api: SidecarApi | None, read_judges: Callable[[], JudgesConfig]) -> list[dict[str, Any]]:
    """The judges in force in the running sidecar (`api`), else those `read_judges` gives (read
    only then: the sidecar has its own environment)."""
    from agenttrail.evaluators.routes import JUDGES_ROUTE

    return api.get_lines(JUDGES_ROUTE, {}) if api is not None else configured_judges(read_judges())


@dataclass(frozen=True, slots=True)
class JudgesChecked:
    """No sidecar to reload: the config file's judges, checked as serve checks them at start."""

    config_file: str
    judges: list[dict[str, Any]]

    @property
    def enabled(self) -> list[str]:
        return [row["name"] for row in self.judges if row["enabled"]]


@dataclass(frozen=True, slots=True)
class JudgesReloaded:
    """What the running sidecar's reload changed, by judge name; `other_file` when the sidecar
    reads another config file than the one the caller gave."""

    config_file: str
    changes: NamedChanges
    other_file: bool


def reload_judges(
    api: SidecarApi | None, config_file: str | None, read_judges: Callable[[], JudgesConfig]
) -> JudgesReloaded | JudgesChecked:
    """Make the running sidecar take its config file's judges section again (as SIGHUP does;
    it reads its own file and environment); with no sidecar (`api` None), check the section
    `read_judges` reads from `config_file` as serve does when it starts."""
    if api is None:
        if not config_file:
            raise JudgesUsageError(
                "no sidecar is running to reload; pass --config FILE to check a judges section"
            )
        return JudgesChecked(config_file, configured_judges(read_judges()))
    from agenttrail.evaluators.reloads import NamedChanges, reads_other_file
    from agenttrail.evaluators.routes import ADMIN_PREFIX

    answer = api.post_json(f"{ADMIN_PREFIX}/judges/reload", {})
    other = reads_other_file(config_file, answer)
    return JudgesReloaded(answer["config_file"], NamedChanges.from_json(answer), other_file=other)


def judge_spec(config_file: str | None, judges: JudgesConfig, name: str) -> JudgeSpec:
    """The judge `name` as `judges` (read from `config_file`) defines it: what backfill runs;
    ConfigError if none has that name, `JudgesUsageError` without a file."""
    if not config_file:
        raise JudgesUsageError("backfill needs the config file that defines the judge: pass --config")
    return judges.get(name)
