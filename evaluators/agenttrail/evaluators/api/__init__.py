"""The evaluation API (`proto/agenttrail/api/v1/evaluation.proto`) served by the sidecar over gRPC.

Clients use the generated stub: `agenttrail.api.v1.evaluation_pb2_grpc.EvaluationServiceStub`.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from agenttrail.collector.sidecar import Sidecar
from agenttrail.evaluators.api.judges import ApiJudges
from agenttrail.evaluators.api.service import EvaluationApi, JudgeResolver
from agenttrail.evaluators.judges import ClientPool
from agenttrail.evaluators.judges.config import JudgeConfigs


def install_api(
    sidecar: Sidecar,
    default_metrics: Sequence[str],
    judge_configs: JudgeConfigs,
    judge_clients: ClientPool | None = None,
) -> ApiJudges:
    """Serve the evaluation API on the sidecar's gRPC port, behind the same bearer token as OTLP.

    Evaluate's default metrics are the online evaluator's; its judges are the configured ones
    (`judge_configs`, as the online worker has them), on `judge_clients` (pass the online
    judges' pool so both share each model's budget).
    """
    judges = ApiJudges.from_configs(judge_configs, judge_clients)

    def authorize(context: grpc.ServicerContext) -> bool:
        receiver = sidecar.grpc
        return receiver is not None and receiver.authorized(context)

    api = EvaluationApi(
        sidecar.new_store, authorize=authorize, default_metrics=default_metrics, judges=judges
    )
    sidecar.add_grpc_handler(api.handler())
    return judges


__all__ = ["ApiJudges", "EvaluationApi", "JudgeResolver", "install_api"]
