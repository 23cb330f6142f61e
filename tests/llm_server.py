"""A local OpenAI-compatible HTTP server for judge tests, driven through the real `openai` client.

The only stand-in the project allows: it plays the remote LLM service on loopback. A test gives it
a `responder` (request JSON -> Reply) and reads back every request it received.

    with LlmServer(lambda request: Reply.chat('{"score": 1, "reason": "ok"}')) as llm:
        client = openai.OpenAI(base_url=llm.base_url, api_key="test")
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """What the server answers to one request."""

    status: int = 200
    body: Any = None  # a JSON-able object, or bytes sent as they are
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # sleep before answering (slow answers, client timeouts)

    @classmethod
    def chat(
        cls,
        content: str,
        *,
        prompt_tokens: int = 100,
        completion_tokens: int = 20,
        model: str = "judge-model",
        delay_s: float = 0.0,
    ) -> Reply:
        """A chat completion whose single choice says `content`."""
        return cls(
            body={
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            },
            delay_s=delay_s,
        )

    @classmethod
    def tool_calls(
        cls,
        calls: list[tuple[str, str, dict[str, Any]]],
        *,
        prompt_tokens: int = 100,
        completion_tokens: int = 20,
        model: str = "agent-model",
    ) -> Reply:
        """A chat completion asking for tool calls, each given as (call id, tool name, arguments)."""
        reply = cls.chat("", prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, model=model)
        message = reply.body["choices"][0]
        message["finish_reason"] = "tool_calls"
        message["message"] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                for call_id, name, args in calls
            ],
        }
        return reply

    @classmethod
    def chat_json(cls, value: Any, **kwargs: Any) -> Reply:
        return cls.chat(json.dumps(value), **kwargs)

    @classmethod
    def embeddings(cls, vectors: list[list[float]], model: str = "embed-model") -> Reply:
        return cls(
            body={
                "object": "list",
                "model": model,
                "data": [
                    {"object": "embedding", "index": i, "embedding": vector}
                    for i, vector in enumerate(vectors)
                ],
                "usage": {"prompt_tokens": len(vectors), "total_tokens": len(vectors)},
            }
        )

    @classmethod
    def error(cls, status: int, message: str = "error", headers: dict[str, str] | None = None) -> Reply:
        return cls(
            status=status,
            body={"error": {"message": message, "type": "server_error", "code": None}},
            headers=headers or {},
        )


Responder = Callable[[dict[str, Any]], Reply]


class LlmServer:
    """`POST /v1/chat/completions` and `POST /v1/embeddings` on 127.0.0.1, port chosen by the OS.

    `requests` holds every request body received (with `_path` added), in arrival order.
    """

    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        server.owner = self  # type: ignore[attr-defined]
        self._server = server
        self.port = server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> LlmServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def record(self, request: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(request)

    def chat_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if r["_path"].endswith("/chat/completions")]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        owner: LlmServer = self.server.owner  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            request = json.loads(raw) if raw else {}
        except ValueError:
            request = {"_raw": raw.decode(errors="replace")}
        request["_path"] = self.path
        request["_headers"] = dict(self.headers.items())
        owner.record(request)
        reply = owner.responder(request)
        if reply.delay_s:
            time.sleep(reply.delay_s)
        body = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
        content_type = "application/json"
        if request.get("stream") and reply.status == 200 and isinstance(reply.body, dict):
            body, content_type = _sse(reply.body), "text/event-stream"
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout tests)


def _sse(completion: dict[str, Any]) -> bytes:
    """A chat completion as the server-sent events of a streamed one (`stream: true` requests):
    the role, the content, each tool call whole, the finish reason, then the usage chunk."""
    choice = completion["choices"][0]
    message = choice["message"]
    base = {key: completion[key] for key in ("id", "created", "model")}
    base["object"] = "chat.completion.chunk"
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if message.get("content"):
        deltas.append({"content": message["content"]})
    for index, call in enumerate(message.get("tool_calls") or []):
        deltas.append({"tool_calls": [{"index": index, **call}]})
    chunks = [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]} for delta in deltas]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]})
    chunks.append({**base, "choices": [], "usage": completion["usage"]})
    events = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks]
    return ("".join(events) + "data: [DONE]\n\n").encode()
