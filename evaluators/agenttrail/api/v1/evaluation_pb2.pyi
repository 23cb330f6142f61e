import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ToolCallStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOOL_CALL_STATUS_UNSPECIFIED: _ClassVar[ToolCallStatus]
    TOOL_CALL_STATUS_OK: _ClassVar[ToolCallStatus]
    TOOL_CALL_STATUS_ERROR: _ClassVar[ToolCallStatus]
TOOL_CALL_STATUS_UNSPECIFIED: ToolCallStatus
TOOL_CALL_STATUS_OK: ToolCallStatus
TOOL_CALL_STATUS_ERROR: ToolCallStatus

class ToolCall(_message.Message):
    __slots__ = ("name", "input_json", "output_json", "status", "error_type", "latency_ms", "span_id", "agent")
    NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    name: str
    input_json: str
    output_json: str
    status: ToolCallStatus
    error_type: str
    latency_ms: float
    span_id: str
    agent: str
    def __init__(self, name: _Optional[str] = ..., input_json: _Optional[str] = ..., output_json: _Optional[str] = ..., status: _Optional[_Union[ToolCallStatus, str]] = ..., error_type: _Optional[str] = ..., latency_ms: _Optional[float] = ..., span_id: _Optional[str] = ..., agent: _Optional[str] = ...) -> None: ...

class Trajectory(_message.Message):
    __slots__ = ("trace_id", "root_span_id", "agent", "task", "conversation_id", "start", "latency_s", "failure", "error_type", "input_json", "output_json", "tool_calls", "input_tokens", "output_tokens", "revision", "agent_version")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    ROOT_SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    LATENCY_S_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    AGENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    root_span_id: str
    agent: str
    task: str
    conversation_id: str
    start: _timestamp_pb2.Timestamp
    latency_s: float
    failure: bool
    error_type: str
    input_json: str
    output_json: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCall]
    input_tokens: int
    output_tokens: int
    revision: int
    agent_version: str
    def __init__(self, trace_id: _Optional[str] = ..., root_span_id: _Optional[str] = ..., agent: _Optional[str] = ..., task: _Optional[str] = ..., conversation_id: _Optional[str] = ..., start: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., latency_s: _Optional[float] = ..., failure: _Optional[bool] = ..., error_type: _Optional[str] = ..., input_json: _Optional[str] = ..., output_json: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCall, _Mapping]]] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., revision: _Optional[int] = ..., agent_version: _Optional[str] = ...) -> None: ...

class Reference(_message.Message):
    __slots__ = ("task", "tool_calls", "expected_response_json", "metrics", "options", "version")
    class OptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TASK_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_RESPONSE_JSON_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    task: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCall]
    expected_response_json: str
    metrics: _containers.RepeatedScalarFieldContainer[str]
    options: _containers.ScalarMap[str, str]
    version: int
    def __init__(self, task: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCall, _Mapping]]] = ..., expected_response_json: _Optional[str] = ..., metrics: _Optional[_Iterable[str]] = ..., options: _Optional[_Mapping[str, str]] = ..., version: _Optional[int] = ...) -> None: ...

class EvaluationResult(_message.Message):
    __slots__ = ("metric", "score", "label", "explanation", "evaluator", "evaluator_version", "error", "created_at", "model", "prompt_tokens", "completion_tokens", "cost", "details_json", "latency_ms")
    METRIC_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    EVALUATOR_FIELD_NUMBER: _ClassVar[int]
    EVALUATOR_VERSION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    DETAILS_JSON_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    metric: str
    score: float
    label: str
    explanation: str
    evaluator: str
    evaluator_version: str
    error: str
    created_at: _timestamp_pb2.Timestamp
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost: float
    details_json: str
    latency_ms: int
    def __init__(self, metric: _Optional[str] = ..., score: _Optional[float] = ..., label: _Optional[str] = ..., explanation: _Optional[str] = ..., evaluator: _Optional[str] = ..., evaluator_version: _Optional[str] = ..., error: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., model: _Optional[str] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., cost: _Optional[float] = ..., details_json: _Optional[str] = ..., latency_ms: _Optional[int] = ...) -> None: ...

class Score(_message.Message):
    __slots__ = ("trace_id", "root_span_id", "agent", "task", "run_start", "revision", "reference_version", "result")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    ROOT_SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    RUN_START_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    root_span_id: str
    agent: str
    task: str
    run_start: _timestamp_pb2.Timestamp
    revision: int
    reference_version: int
    result: EvaluationResult
    def __init__(self, trace_id: _Optional[str] = ..., root_span_id: _Optional[str] = ..., agent: _Optional[str] = ..., task: _Optional[str] = ..., run_start: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revision: _Optional[int] = ..., reference_version: _Optional[int] = ..., result: _Optional[_Union[EvaluationResult, _Mapping]] = ...) -> None: ...

class JudgeSpec(_message.Message):
    __slots__ = ("name", "definition")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_FIELD_NUMBER: _ClassVar[int]
    name: str
    definition: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., definition: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class AvailableTool(_message.Message):
    __slots__ = ("name", "description", "parameters_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    parameters_json: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters_json: _Optional[str] = ...) -> None: ...

class EvaluateRequest(_message.Message):
    __slots__ = ("trajectory", "reference", "metrics", "judges", "available_tools", "screenshots")
    TRAJECTORY_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    JUDGES_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_TOOLS_FIELD_NUMBER: _ClassVar[int]
    SCREENSHOTS_FIELD_NUMBER: _ClassVar[int]
    trajectory: Trajectory
    reference: Reference
    metrics: _containers.RepeatedScalarFieldContainer[str]
    judges: _containers.RepeatedCompositeFieldContainer[JudgeSpec]
    available_tools: _containers.RepeatedCompositeFieldContainer[AvailableTool]
    screenshots: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, trajectory: _Optional[_Union[Trajectory, _Mapping]] = ..., reference: _Optional[_Union[Reference, _Mapping]] = ..., metrics: _Optional[_Iterable[str]] = ..., judges: _Optional[_Iterable[_Union[JudgeSpec, _Mapping]]] = ..., available_tools: _Optional[_Iterable[_Union[AvailableTool, _Mapping]]] = ..., screenshots: _Optional[_Iterable[str]] = ...) -> None: ...

class EvaluateResponse(_message.Message):
    __slots__ = ("results", "reference")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[EvaluationResult]
    reference: Reference
    def __init__(self, results: _Optional[_Iterable[_Union[EvaluationResult, _Mapping]]] = ..., reference: _Optional[_Union[Reference, _Mapping]] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ("trace_id", "root_span_id")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    ROOT_SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    root_span_id: str
    def __init__(self, trace_id: _Optional[str] = ..., root_span_id: _Optional[str] = ...) -> None: ...

class GetRunResponse(_message.Message):
    __slots__ = ("trajectory", "scores")
    TRAJECTORY_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    trajectory: Trajectory
    scores: _containers.RepeatedCompositeFieldContainer[Score]
    def __init__(self, trajectory: _Optional[_Union[Trajectory, _Mapping]] = ..., scores: _Optional[_Iterable[_Union[Score, _Mapping]]] = ...) -> None: ...

class ListScoresRequest(_message.Message):
    __slots__ = ("since", "until", "agent", "task", "metric", "trace_id", "page_size", "page_token")
    SINCE_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    METRIC_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    since: _timestamp_pb2.Timestamp
    until: _timestamp_pb2.Timestamp
    agent: str
    task: str
    metric: str
    trace_id: str
    page_size: int
    page_token: str
    def __init__(self, since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., agent: _Optional[str] = ..., task: _Optional[str] = ..., metric: _Optional[str] = ..., trace_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListScoresResponse(_message.Message):
    __slots__ = ("scores", "next_page_token")
    SCORES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    scores: _containers.RepeatedCompositeFieldContainer[Score]
    next_page_token: str
    def __init__(self, scores: _Optional[_Iterable[_Union[Score, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...
