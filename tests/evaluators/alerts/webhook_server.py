"""A real HTTP server on loopback that receives alert notifications, for the alert tests.

Every POST is recorded (path, headers, parsed JSON). A path can be told to answer with an
error status (e.g. 500) to play a failing webhook, or to hold its answer to play a slow one.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: Any


class WebhookServer:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self.failing: dict[str, int] = {}  # path -> status to answer instead of 200
        self.attempts: dict[str, int] = {}
        self.held: dict[str, threading.Event] = {}  # path -> answer only once the event is set
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                hold = owner.held.get(self.path)
                if hold is not None:
                    hold.wait(30)
                with owner._lock:
                    owner.attempts[self.path] = owner.attempts.get(self.path, 0) + 1
                    status = owner.failing.get(self.path, 200)
                    if status == 200:
                        owner.received.append(Received(self.path, dict(self.headers), json.loads(body)))
                reply = b"ok" if status == 200 else b"boom"
                self.send_response(status)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def url(self, path: str) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{path}"

    def bodies(self, path: str) -> list[Any]:
        with self._lock:
            return [item.body for item in self.received if item.path == path]

    def wait_for(self, path: str, count: int, timeout: float = 20.0) -> list[Any]:
        """The first `count` bodies posted to `path`, waiting for them to arrive."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            bodies = self.bodies(path)
            if len(bodies) >= count:
                return bodies
            time.sleep(0.02)
        raise AssertionError(f"{path}: expected {count} notification(s), got {self.bodies(path)}")

    def start(self) -> WebhookServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        for event in self.held.values():
            event.set()
        self._server.shutdown()
        self._server.server_close()
