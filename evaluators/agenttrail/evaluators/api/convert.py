"""Between the API's messages and agenttrail's own shapes: stored runs, references, score rows.

JSON travels as text in `*_json` fields (see evaluation.proto for why); an unset field is
absent. Request fields are checked here, and a bad one raises `InvalidArgument` naming it by
its path in the request (`trajectory.tool_calls[2].input_json`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from agenttrail.api.v1 import evaluation_pb2 as pb
from agenttrail.evaluators.api.errors import InvalidArgument
from agenttrail.evaluators.metrics import ABSENT, ToolCall
from agenttrail.evaluators.scoring.references import ReferenceEntry, ReferenceSetError

_STATUS = {"ok": pb.TOOL_CALL_STATUS_OK, "error": pb.TOOL_CALL_STATUS_ERROR}
# Where a reference entry's field lives in the API's Reference message.
_REFERENCE_FIELDS = {"reference_trajectory": "tool_calls", "expected_response": "expected_response_json"}


def to_json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def json_field(message: Message, name: str, where: str) -> Any:
    """The JSON value of an optional `*_json` field; None when unset (absent)."""
    if not message.HasField(name):
        return None
    text = getattr(message, name)
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(
            f"{where}.{name}: not valid JSON ({exc}); send JSON text, e.g. {{}} or null"
        ) from exc


def set_json(message: Message, name: str, value: Any) -> None:
    """Set an optional `*_json` field, leaving it unset (absent) for None."""
    if value is not None:
        setattr(message, name, to_json_text(value))


def timestamp_us(micros: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMicroseconds(micros)
    return stamp


def timestamp_iso(text: str) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(datetime.fromisoformat(text))
    return stamp


def stored_calls(calls: Sequence[pb.ToolCall], where: str) -> list[dict[str, Any]]:
    """Predicted calls in the store's shape (`trajectories --format json`), checked."""
    result = []
    for i, call in enumerate(calls):
        at = f"{where}[{i}]"
        if not call.name:
            raise InvalidArgument(f"{at}.name: a tool call needs a name")
        result.append(
            {
                "name": call.name,
                "input": json_field(call, "input_json", at),
                "output": json_field(call, "output_json", at),
                "status": "error" if call.status == pb.TOOL_CALL_STATUS_ERROR else "ok",
                "error_type": call.error_type,
                "latency_ms": call.latency_ms,
                "span_id": call.span_id,
                "agent": call.agent,
            }
        )
    return result


def reference_entry(reference: pb.Reference, task: str) -> ReferenceEntry:
    """An inline reference, validated as a reference file entry would be."""
    calls = []
    for i, call in enumerate(reference.tool_calls):
        at = f"reference.tool_calls[{i}]"
        if not call.name:
            raise InvalidArgument(f"{at}.name: a tool call needs a name")
        item: dict[str, Any] = {"name": call.name}
        if call.HasField("input_json"):
            item["args"] = json_field(call, "input_json", at)
        if call.HasField("output_json"):
            item["output"] = json_field(call, "output_json", at)
        calls.append(item)
    document = {
        "task": reference.task or task or "inline",
        "reference_trajectory": calls,
        "expected_response": json_field(reference, "expected_response_json", "reference"),
        "metrics": list(reference.metrics),
        "options": dict(reference.options),
    }
    try:
        return ReferenceEntry.from_json(document)
    except ReferenceSetError as exc:
        problems = "; ".join(
            f"reference.{_REFERENCE_FIELDS.get(p.field, p.field) if p.field else 'task'}: {p.message}"
            for p in exc.problems
        )
        raise InvalidArgument(problems) from exc


def reference_message(entry: ReferenceEntry, version: int) -> pb.Reference:
    message = pb.Reference(
        task=entry.task,
        metrics=entry.metrics,
        options=dict(entry.options),
        version=version,
        tool_calls=[_reference_call(call) for call in entry.reference],
    )
    set_json(message, "expected_response_json", entry.expected_response)
    return message


def _reference_call(call: ToolCall) -> pb.ToolCall:
    message = pb.ToolCall(name=call.name)
    if call.input is not ABSENT:
        message.input_json = to_json_text(call.input)
    if call.output is not ABSENT:
        message.output_json = to_json_text(call.output)
    return message


def trajectory_message(run: Mapping[str, Any]) -> pb.Trajectory:
    """A stored run (`query_trajectories` shape) as a message."""
    message = pb.Trajectory(
        trace_id=run["trace_id"],
        root_span_id=run["root_span_id"],
        agent=run["agent"],
        task=run["task"],
        conversation_id=run["conversation_id"],
        start=timestamp_iso(run["start"]),
        latency_s=run["latency_s"],
        failure=bool(run["failure"]),
        error_type=run["error_type"],
        input_tokens=run["input_tokens"],
        output_tokens=run["output_tokens"],
        revision=run["revision"],
        agent_version=run.get("agent_version", ""),
    )
    set_json(message, "input_json", run["input"])
    set_json(message, "output_json", run["output"])
    for call in run["tool_calls"]:
        item = message.tool_calls.add(
            name=call["name"],
            status=_STATUS.get(call.get("status", ""), pb.TOOL_CALL_STATUS_UNSPECIFIED),
            error_type=call.get("error_type", ""),
            latency_ms=call.get("latency_ms", 0.0),
            span_id=call.get("span_id", ""),
            agent=call.get("agent", ""),
        )
        set_json(item, "input_json", call.get("input"))
        set_json(item, "output_json", call.get("output"))
    return message
