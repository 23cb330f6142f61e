"""What `agenttrail references load|list`, `scores` and `worker` do, as functions tests and other
callers use without click: load a reference set into the store (or through the sidecar holding
it), describe the references and scores reads (`ReadRequest`), and start the evaluator alone.

Errors are the project's: ReferenceSetError for a reference file that cannot be used (the CLI's
exit 3), QueryError for a filter value (exit 2), ConfigError for a config file, WorkerStoreError for a store
the worker does not run on. Where the data is (the sidecar or the store) is the caller's choice; a
store given here is migrated with the `migrations` the caller passes (the composition root's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.queries import TrajectoryFilter, parse_time
from agenttrail.collector.reads import ReadRequest
from agenttrail.collector.schema import Migration, migrate
from agenttrail.evaluators.routes import ADMIN_PREFIX, REFERENCES_ROUTE
from agenttrail.evaluators.scoring.rescore import Rescore

if TYPE_CHECKING:
    from agenttrail.collector.cli import SidecarApi
    from agenttrail.collector.config import SidecarConfig
    from agenttrail.collector.store import Store
    from agenttrail.evaluators.scoring.worker import EvaluatorConfig, EvaluatorWorker

SCORES_ROUTE = "/api/v1/scores"


class WorkerStoreError(AgentTrailError, ValueError):
    """`agenttrail worker` pointed at a store it does not run on (the embedded one: serve's)."""


@dataclass(frozen=True, slots=True)
class ReferencesLoaded:
    """Tasks by what loading did to them: new, a new version, or the same reference again; with
    `rescore`, each task's runs put back in the evaluator's queue and whether a running sidecar
    (`by_sidecar`) scores them now or the next evaluator to run on the store will."""

    added: list[str]
    updated: list[str]
    unchanged: list[str]
    rescored: list[Rescore] = field(default_factory=list)
    by_sidecar: bool = False


def load_references(
    file: str,
    open_target: Callable[[], SidecarApi | Store],
    migrations: Sequence[Migration] = (),
    *,
    rescore: EvaluatorConfig | None = None,
) -> ReferencesLoaded:
    """Validate the reference set in `file` (JSON, JSONL or YAML; ReferenceSetError says what is
    wrong, before any store is opened) and store a new version of each changed task where
    `open_target` leads: a store (migrated first, closed after), or the admin API of the sidecar
    holding it. With `rescore` (the evaluator's section, for its version and lookback; a sidecar
    uses its own), every task of the file has its stored runs re-scored (`scoring.rescore`):
    references loaded after the runs arrived score them too."""
    from agenttrail.collector.store import Store
    from agenttrail.evaluators.scoring.reference_store import store_reference_set
    from agenttrail.evaluators.scoring.references import load_reference_set
    from agenttrail.evaluators.scoring.rescore import rescore_tasks

    reference_set = load_reference_set(file)
    target = open_target()
    if isinstance(target, Store):
        try:
            migrate(target, tuple(migrations))
            result = store_reference_set(target, reference_set, source=file)
            rescored = (
                rescore_tasks(
                    target,
                    reference_set.entries,
                    evaluator_version=rescore.version,
                    lookback_s=rescore.lookback_s,
                )
                if rescore is not None
                else []
            )
        finally:
            target.close()
        return ReferencesLoaded(result.added, result.updated, result.unchanged, rescored)
    entries = [reference_set.entries[task].to_json() for task in sorted(reference_set.entries)]
    body = {"source": file, "entries": entries, **({"rescore": True} if rescore is not None else {})}
    answer = target.post_json(f"{ADMIN_PREFIX}/references", body)
    return ReferencesLoaded(
        list(answer.get("added", [])),
        list(answer.get("updated", [])),
        list(answer.get("unchanged", [])),
        rescored=[Rescore(**item) for item in answer.get("rescored", [])],
        by_sidecar=True,
    )


def references_read() -> ReadRequest:
    """The current reference of every task, with its version and source."""

    def local(store: Store) -> list[dict[str, object]]:
        from agenttrail.evaluators.scoring.reference_store import reference_rows

        return reference_rows(store)

    return ReadRequest(REFERENCES_ROUTE, {}, local)


def scores_read(
    *,
    since: str | None = None,
    until: str | None = None,
    agent: str | None = None,
    task: str | None = None,
    trace_id: str | None = None,
    metric: str | None = None,
    limit: int = 200,
) -> ReadRequest:
    """Evaluation scores per run and metric, newest runs first (`trace_id` a full id: the caller
    resolves a prefix)."""
    from agenttrail.evaluators.scoring.scores import ScoreFilter, query_scores

    runs = TrajectoryFilter(
        parse_time(since) if since else None,
        parse_time(until) if until else None,
        agent,
        task,
        trace_id,
        limit,
    )
    where = ScoreFilter(runs, metric)
    return ReadRequest(SCORES_ROUTE, where.to_params(), lambda store: query_scores(store, where))


def start_worker(
    config: SidecarConfig, evaluator_config: EvaluatorConfig, migrations: Sequence[Migration] = ()
) -> EvaluatorWorker:
    """The evaluator alone, started on the ClickHouse server `config` names (beside collectors
    writing to it), scoring with `evaluator_config` (the evaluators section as serve reads
    it). The embedded store is refused: `serve` runs the evaluator there."""
    from agenttrail.collector.store import Store, parse_store
    from agenttrail.evaluators.scoring.worker import EvaluatorWorker

    location = parse_store(config.store, config.database)
    if location.embedded:
        raise WorkerStoreError(
            "`agenttrail worker` runs beside collectors on a ClickHouse server (--store http(s)://...); "
            "with the embedded store, `agenttrail serve` already runs the evaluator"
        )
    first = Store(location)
    migrate(first, tuple(migrations))
    evaluator = EvaluatorWorker(first.clone, evaluator_config)
    evaluator.start()
    return evaluator
