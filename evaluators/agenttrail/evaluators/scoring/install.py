"""The online evaluator's part of `agenttrail serve`: its worker and the scores route (its
tables are in composition.MIGRATIONS)."""

from __future__ import annotations

from typing import Any

from agenttrail.collector.sidecar import Sidecar
from agenttrail.collector.store import Store
from agenttrail.evaluators.scoring.scores import ScoreFilter, query_scores
from agenttrail.evaluators.scoring.worker import EvaluatorConfig, EvaluatorWorker


def install_scoring(sidecar: Sidecar, config: EvaluatorConfig) -> EvaluatorWorker:
    """Add the scoring worker (woken by each assembly) and /api/v1/scores."""
    worker = EvaluatorWorker(sidecar.new_store, config)
    sidecar.add_worker(worker)
    read_store: list[Store] = []

    def scores_route(params: dict[str, str]) -> list[dict[str, Any]]:
        if not read_store:
            read_store.append(sidecar.new_store())
        return query_scores(read_store[0], ScoreFilter.from_params(params))

    sidecar.add_read_route("/api/v1/scores", scores_route)
    sidecar.on_assembled.append(worker.wake)
    return worker
