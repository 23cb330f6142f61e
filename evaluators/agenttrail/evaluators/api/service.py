"""`agenttrail.api.v1.EvaluationService` on the sidecar's gRPC port, over the existing parts.

Evaluate scores with the metric catalogue (`compute_metrics`), exactly as the online worker
does (same predicted-call rules, labels, option merging, evaluator version for the same
metrics); GetRun and ListScores read the store. The handler takes raw bytes (like the OTLP
receiver), so a body that does not parse is INVALID_ARGUMENT, not INTERNAL; the same bearer
token as OTLP is required; our errors become their gRPC status here and nowhere else.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, TypeAlias, TypeVar

import grpc
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from agenttrail.api.v1 import evaluation_pb2 as pb
from agenttrail.collector.errors import AgentTrailError, StoreError, StoreUnavailable
from agenttrail.collector.queries import QueryError, TrajectoryFilter, query_trajectories
from agenttrail.collector.runs import predicted_calls
from agenttrail.collector.store import Store
from agenttrail.evaluators.api.convert import (
    json_field,
    reference_entry,
    reference_message,
    set_json,
    stored_calls,
    timestamp_us,
    trajectory_message,
)
from agenttrail.evaluators.api.errors import ApiError, Busy, InvalidArgument, NotFound
from agenttrail.evaluators.api.score_pages import MAX_PAGE_SIZE, ScoreQuery, query_page
from agenttrail.evaluators.judges.base import Judge, JudgeInput, JudgeResult
from agenttrail.evaluators.judges.combined import TOOL_CORRECTNESS, response_judges, selection_judges
from agenttrail.evaluators.metrics import ConfiguredMetric, compute_metrics, parse_metric
from agenttrail.evaluators.offline.evaluate import (
    Combine,
    InstanceResult,
    call_mapping,
    judge_outputs,
    metric_names,
    parse_metric_specs,
    run_judges,
)
from agenttrail.evaluators.scoring.reference_store import latest_references
from agenttrail.evaluators.scoring.references import ReferenceEntry
from agenttrail.evaluators.scoring.worker import EVALUATOR, EvaluatorConfig, metric_label

log = logging.getLogger(__name__)

SERVICE = pb.DESCRIPTOR.services_by_name["EvaluationService"].full_name

# name, inline definition (None: look the name up in the config's `judges:` section) -> a judge.
# Raises ValueError or ConfigError naming what is wrong.
JudgeResolver: TypeAlias = Callable[[str, Mapping[str, Any] | None], Judge]
Authorize: TypeAlias = Callable[[grpc.ServicerContext], bool]
_Request = TypeVar("_Request", bound=Message)

_STATUS: tuple[tuple[type[Exception], grpc.StatusCode], ...] = (
    (InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (Busy, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (StoreUnavailable, grpc.StatusCode.UNAVAILABLE),
)


class EvaluationApi:
    """The three RPCs as plain methods (message in, message out), plus their gRPC handler."""

    def __init__(
        self,
        store_factory: Callable[[], Store],
        *,
        authorize: Authorize,
        default_metrics: Sequence[str] = EvaluatorConfig().metrics,
        judges: JudgeResolver | None = None,
        max_judge_evaluations: int = 2,
    ) -> None:
        self._store_factory = store_factory
        self._store: Store | None = None
        self._store_lock = threading.Lock()
        self._authorize = authorize
        self._default_metrics = tuple(default_metrics)
        self._judges = judges
        # Judge calls take seconds and share the gRPC threads with OTLP export: keep most free.
        self._judge_slots = threading.BoundedSemaphore(max_judge_evaluations)

    @property
    def store(self) -> Store:
        """One client for the API's reads, opened on first use (and again after a failed open)."""
        with self._store_lock:
            if self._store is None:
                self._store = self._store_factory()
            return self._store

    def handler(self) -> grpc.GenericRpcHandler[Any, Any]:
        methods: dict[str, tuple[type[Message], Callable[[Any], Message]]] = {
            "Evaluate": (pb.EvaluateRequest, self.evaluate),
            "GetRun": (pb.GetRunRequest, self.get_run),
            "ListScores": (pb.ListScoresRequest, self.list_scores),
        }
        return grpc.method_handlers_generic_handler(
            SERVICE,
            {
                name: grpc.unary_unary_rpc_method_handler(self._unary(request_type, method))
                for name, (request_type, method) in methods.items()
            },
        )

    def _unary(
        self, request_type: type[_Request], method: Callable[[_Request], Message]
    ) -> Callable[[bytes, grpc.ServicerContext], bytes]:
        def handle(body: bytes, context: grpc.ServicerContext) -> bytes:
            if not self._authorize(context):
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
            try:
                request = request_type.FromString(body)
            except DecodeError as exc:
                name = request_type.DESCRIPTOR.full_name
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"the body is not a {name}: {exc}")
            try:
                return method(request).SerializeToString()
            except (ApiError, StoreError) as exc:
                _abort(context, exc)

        return handle

    # --- Evaluate -------------------------------------------------------------------------

    def evaluate(self, request: pb.EvaluateRequest) -> pb.EvaluateResponse:
        if not request.HasField("trajectory"):
            raise InvalidArgument("trajectory: required: the run to evaluate (its tool calls at least)")
        trajectory = request.trajectory
        calls = stored_calls(trajectory.tool_calls, "trajectory.tool_calls")
        run_input = json_field(trajectory, "input_json", "trajectory")
        run_output = json_field(trajectory, "output_json", "trajectory")
        entry, version, missing_reason = self._reference(request)
        texts = list(request.metrics) or list(entry.metrics if entry else ())
        if not texts and entry is not None:
            texts = list(self._default_metrics)
        metrics = _configured(texts, entry, from_request=bool(request.metrics))
        judges = self._resolve_judges(request.judges, metrics)
        run = _judge_input(request, calls, run_input, run_output, entry) if judges else None
        values = compute_metrics(
            predicted_calls(calls),
            None if entry is None else list(entry.reference),
            metrics,
            latency_s=trajectory.latency_s if trajectory.HasField("latency_s") else None,
            failure=trajectory.failure if trajectory.HasField("failure") else None,
        )
        verdicts: list[JudgeResult] = []
        if run is not None:
            verdicts = self._run_judges(judges, run)
            # the spec's combinations, as offline: tool_correctness min, multiply_score, avg_score
            correctness = next((m.params for m in metrics if m.spec.name == TOOL_CORRECTNESS[0]), None)
            combine = Combine(selection_judges(judges), response_judges(judges))
            combined = combine(InstanceResult(0, dict(values)), run, verdicts, correctness)
            values, verdicts = combined.metrics, list(combined.judges.values())
        response = pb.EvaluateResponse(results=_metric_results(values, metrics, texts, missing_reason))
        response.results.extend(_judge_result(result) for result in verdicts)
        if entry is not None:
            response.reference.CopyFrom(reference_message(entry, version))
        return response

    def _reference(self, request: pb.EvaluateRequest) -> tuple[ReferenceEntry | None, int, str]:
        """The inline reference, else the stored one of the run's task; with why there is none."""
        task = request.trajectory.task
        if request.HasField("reference"):
            return reference_entry(request.reference, task), 0, ""
        if not task:
            return (
                None,
                0,
                "no reference: give one in the request, or a trajectory.task with a stored reference",
            )
        stored = latest_references(self.store).get(task)
        if stored is None:
            reason = f"no reference: none is stored for task {task!r} (agenttrail references load)"
            return None, 0, reason
        return stored.entry, stored.version, ""

    def _resolve_judges(
        self, specs: Sequence[pb.JudgeSpec], metrics: Sequence[ConfiguredMetric]
    ) -> list[Judge]:
        if not specs:
            return []
        if self._judges is None:
            raise InvalidArgument("judges: this sidecar serves no judges; ask for metrics only")
        judges = []
        for i, spec in enumerate(specs):
            if not spec.name:
                raise InvalidArgument(f"judges[{i}].name: required")
            definition = json_format.MessageToDict(spec.definition) if spec.HasField("definition") else None
            try:
                judges.append(self._judges(spec.name, definition))
            except (ValueError, AgentTrailError) as exc:
                raise InvalidArgument(f"judges[{i}] ({spec.name}): {exc}") from exc
        try:
            asked = any(metric.spec.name == TOOL_CORRECTNESS[0] for metric in metrics)
            merged = TOOL_CORRECTNESS if asked and selection_judges(judges) else ()
            # refuses a judge reporting a metric's name, or twice (a selection judge's min is folded in)
            judge_outputs(judges, metric_names(metrics), merged)
        except ValueError as exc:
            raise InvalidArgument(f"judges: {exc}") from exc
        return judges

    def _run_judges(self, judges: Sequence[Judge], run: JudgeInput) -> list[JudgeResult]:
        """Every judge on the run; a spent budget or a failed call is an error result, never dropped."""
        if not self._judge_slots.acquire(blocking=False):
            raise Busy("other evaluations with judges are running; retry in a few seconds")
        try:
            (results,) = run_judges(judges, [run])
        finally:
            self._judge_slots.release()
        return list(results)

    # --- GetRun, ListScores ---------------------------------------------------------------

    def get_run(self, request: pb.GetRunRequest) -> pb.GetRunResponse:
        if not request.trace_id:
            raise InvalidArgument("trace_id: required (32 lowercase hex characters)")
        try:
            where = TrajectoryFilter(trace_id=request.trace_id, limit=MAX_PAGE_SIZE)
        except QueryError as exc:
            raise InvalidArgument(f"trace_id: {exc}") from exc
        runs = query_trajectories(self.store, where)
        if request.root_span_id:
            runs = [run for run in runs if run["root_span_id"] == request.root_span_id]
        if not runs:
            which = f" and root_span_id {request.root_span_id}" if request.root_span_id else ""
            raise NotFound(
                f"no run with trace_id {request.trace_id}{which} is stored; a run is assembled a few "
                "seconds after its agent span ends"
            )
        if len(runs) > 1:
            roots = ", ".join(run["root_span_id"] for run in runs)
            raise InvalidArgument(
                f"root_span_id: trace {request.trace_id} holds {len(runs)} runs; give one of {roots}"
            )
        run = runs[0]
        scores, _ = query_page(self.store, ScoreQuery(where, root_span_id=run["root_span_id"]))
        return pb.GetRunResponse(trajectory=trajectory_message(run), scores=scores)

    def list_scores(self, request: pb.ListScoresRequest) -> pb.ListScoresResponse:
        scores, next_token = query_page(self.store, ScoreQuery.from_request(request), request.page_token)
        return pb.ListScoresResponse(scores=scores, next_page_token=next_token)


_GIVEN_BY = {
    "latency": "latency_s",
    "failure": "failure",
    "multiply_score": "tool correctness and response score together",
    "avg_score": "tool correctness and response score together",
}


def _metric_results(
    values: Mapping[str, float | None],
    metrics: Sequence[ConfiguredMetric],
    texts: Sequence[str],
    missing_reason: str,
) -> list[pb.EvaluationResult]:
    """The metrics' values as results: labelled as online, a missing one saying why."""
    created = timestamp_us(int(time.time() * 1e6))
    version = EvaluatorConfig(metrics=tuple(texts)).version  # what the online worker would call it
    needs_reference = {
        output for metric in metrics if metric.spec.needs_reference for output in metric.spec.outputs
    }
    results = []
    for name, value in values.items():
        result = pb.EvaluationResult(
            metric=name, evaluator=EVALUATOR, evaluator_version=version, created_at=created
        )
        if value is not None:
            result.score = value
            result.label = metric_label(name, value)
        elif name in needs_reference:
            result.error = missing_reason
        else:
            result.explanation = f"not known: the trajectory gives no {_GIVEN_BY.get(name, name)}"
        results.append(result)
    return results


def _configured(
    texts: Sequence[str], entry: ReferenceEntry | None, *, from_request: bool
) -> list[ConfiguredMetric]:
    """Parsed metric specs, with the reference's options merged in as the worker does."""
    where = "metrics" if from_request else "the reference's metrics"
    parsed = []
    for i, text in enumerate(texts):
        try:
            parsed.append(parse_metric(text))
        except ValueError as exc:
            raise InvalidArgument(f"{where}[{i}]: {exc}") from exc
    try:
        parse_metric_specs(parsed)  # refuses a metric asked for twice
    except ValueError as exc:
        raise InvalidArgument(f"{where}: {exc}") from exc
    return parsed if entry is None else dataclasses.replace(entry, metrics=tuple(texts)).configured_metrics()


def _judge_input(
    request: pb.EvaluateRequest,
    calls: Sequence[Mapping[str, Any]],
    run_input: Any,
    run_output: Any,
    entry: ReferenceEntry | None,
) -> JudgeInput:
    trajectory = request.trajectory
    tools = []
    for i, tool in enumerate(request.available_tools):
        where = f"available_tools[{i}]"
        if not tool.name:
            raise InvalidArgument(f"{where}.name: required")
        parameters = json_field(tool, "parameters_json", where)
        tools.append({"name": tool.name, "description": tool.description, "parameters": parameters or {}})
    return JudgeInput.from_trajectory(
        {
            "trace_id": trajectory.trace_id,
            "agent": trajectory.agent,
            "task": trajectory.task,
            "conversation_id": trajectory.conversation_id,
            "input": run_input,
            "output": run_output,
            "tool_calls": calls,
            "failure": trajectory.failure,
            "reference_trajectory": None if entry is None else [call_mapping(c) for c in entry.reference],
            "expected_response": None if entry is None else entry.expected_response,
            "available_tools": tools,
            "screenshots": list(request.screenshots),
        }
    )


def _judge_result(result: JudgeResult) -> pb.EvaluationResult:
    message = pb.EvaluationResult(
        metric=result.metric,
        label=result.label,
        explanation=result.explanation,
        evaluator=result.judge,
        evaluator_version=result.version,
        error=result.error,
        created_at=timestamp_us(int(time.time() * 1e6)),
        model=result.model,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        cost=result.cost,
        latency_ms=round(result.latency_s * 1000),
    )
    if result.score is not None:
        message.score = result.score
    if result.details:
        set_json(message, "details_json", dict(result.details))
    return message


def _abort(context: grpc.ServicerContext, exc: Exception) -> NoReturn:
    code = next((code for kind, code in _STATUS if isinstance(exc, kind)), grpc.StatusCode.INTERNAL)
    if code is grpc.StatusCode.INTERNAL:
        log.warning("evaluation API: %s", exc)
    context.abort(code, str(exc))
