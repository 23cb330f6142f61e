"""The model side of the framework tests: a responder for tests/llm_server.py that scripts each
run's tool calls, and the facts the trajectory must then show (tokens per run).

A run is found by the `[run:NAME]` marker its prompt carries. Each new request of a run is its
next step; a request identical to the previous one (a client's retry) gets the same step again.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from llm_server import Reply

_MARKER = re.compile(r"\[run:([a-z_]+)\]")


@dataclass(frozen=True)
class Step:
    """One model answer: tool calls (call id, tool, arguments), a final text, or an HTTP error."""

    calls: tuple[tuple[str, str, dict[str, Any]], ...] = ()
    text: str = ""
    error: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


SCRIPTS: dict[str, list[Step]] = {
    "lookup": [
        Step(calls=(("call_a1", "search_books", {"query": "books"}),), prompt_tokens=11, completion_tokens=3),
        Step(
            calls=(("call_a2", "refund", {"order_id": "A1", "amount": 12.5}),),
            prompt_tokens=13,
            completion_tokens=5,
        ),
        Step(text="Refunded 12.5 on A1.", prompt_tokens=17, completion_tokens=7),
    ],
    "tool_fails": [
        Step(calls=(("call_b1", "charge_card", {"card": "4242"}),), prompt_tokens=19, completion_tokens=2),
        Step(text="The card was declined.", prompt_tokens=23, completion_tokens=4),
    ],
    "model_fails": [
        Step(calls=(("call_c1", "search_books", {"query": "lamps"}),), prompt_tokens=29, completion_tokens=6),
        Step(error=500),
    ],
}


@dataclass
class ScriptedModel:
    """Serves SCRIPTS; `tokens[marker]` adds up the usage it reported for that run."""

    final_answer_tool: bool = False  # smolagents ends a run by calling its `final_answer` tool
    tokens: dict[str, list[int]] = field(default_factory=dict)
    _steps: dict[str, tuple[int, str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: dict[str, Any]) -> Reply:
        body = {k: v for k, v in request.items() if not k.startswith("_")}
        text = json.dumps(body.get("messages", body.get("input", "")))
        found = _MARKER.search(text)
        if found is None:
            return Reply.error(400, "no [run:NAME] marker in the request")
        marker = found.group(1)
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        with self._lock:
            index, last = self._steps.get(marker, (-1, ""))
            if digest != last:
                index += 1
            self._steps[marker] = (index, digest)
            script = SCRIPTS[marker]
            step = script[min(index, len(script) - 1)]
            if not step.error and digest != last:
                counted = self.tokens.setdefault(marker, [0, 0])
                counted[0] += step.prompt_tokens
                counted[1] += step.completion_tokens
        if step.error:
            return Reply.error(step.error, "the model is down")
        usage = {"prompt_tokens": step.prompt_tokens, "completion_tokens": step.completion_tokens}
        if step.calls:
            return Reply.tool_calls(list(step.calls), **usage)
        if self.final_answer_tool:
            return Reply.tool_calls([(f"final_{marker}", "final_answer", {"answer": step.text})], **usage)
        return Reply.chat(step.text, model="agent-model", **usage)
