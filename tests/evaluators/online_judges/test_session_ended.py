"""A run that calls end_conversation() has its conversation judged at once, live over OTLP, while a
conversation left open waits for its idle time."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from agenttrail.instrumentation import agent, configure, end_conversation, set_conversation_id


@agent(name="chat")
def chat_round(conversation: str, text: str, last: bool = False) -> str:
    set_conversation_id(conversation)
    if last:
        end_conversation()
    return f"reply to {text}"


def test_an_ended_conversation_is_judged_without_waiting(
    start_sidecar: Any, llm: Any, tmp_path: Path
) -> None:
    """With an idle time of an hour, the conversation whose last run ended it is judged once over
    both rounds; the open one is not judged."""
    config = tmp_path / "agenttrail.yaml"
    judge = {
        "name": "sessions",
        "type": "task_completion",
        "session_idle_s": 3600,
        "options": {"scope": "session"},
    }
    defaults = {"base_url": llm.base_url, "model": "judge-model", "api_key": "test", "max_retries": 0}
    config.write_text(
        yaml.safe_dump(
            {"evaluators": {"poll_interval_s": 0.1}, "judge_defaults": defaults, "judges": [judge]}
        )
    )
    sidecar = start_sidecar(config_file=str(config))
    provider = TracerProvider(resource=Resource.create({"service.name": "chat"}))
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"http://{sidecar.http.address}/v1/traces"))
    )
    configure(tracer_provider=provider)
    chat_round("open", "hello")
    chat_round("done", "first question")
    chat_round("done", "second question", last=True)
    provider.shutdown()
    assert sidecar.wait_until_assembled(30)
    deadline = time.monotonic() + 30
    rows: list[Any] = []
    while time.monotonic() < deadline and not rows:
        rows = sidecar.store.query("SELECT Details FROM scores FINAL WHERE Metric = 'sessions'")
        time.sleep(0.1)
    time.sleep(0.5)  # a few more cycles: the open conversation must still wait
    rows = sidecar.store.query("SELECT Details FROM scores FINAL WHERE Metric = 'sessions'")
    assert [(json.loads(d)["conversation_id"], json.loads(d)["runs"]) for (d,) in rows] == [("done", 2)]
    [prompt] = [request["messages"][1]["content"] for request in llm.chat_requests()]
    assert "first question" in prompt
    assert "second question" in prompt
