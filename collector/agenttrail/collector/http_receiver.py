"""OTLP/HTTP receiver (`POST /v1/traces`) and the sidecar's small read API, on one port.

Request bodies are protobuf or JSON, optionally gzip; the response uses the request's content
type. Limits are checked before reading (Content-Length) and while decompressing, so a gzip
bomb costs at most `max_body_bytes` of memory. Read endpoints (`GET /api/v1/...`) answer JSON
lines so that CLI commands work while `serve` holds the embedded store.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import zlib
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from google.protobuf import json_format
from google.rpc import status_pb2  # type: ignore[import-untyped]

from agenttrail.collector.auth import bearer_ok
from agenttrail.collector.errors import AgentTrailError, ConfigError, OverloadedError
from agenttrail.collector.ingest import IngestPipeline
from agenttrail.collector.otlp_decode import FORMAT_JSON, FORMAT_PROTOBUF, OtlpDecodeError

log = logging.getLogger(__name__)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
NDJSON = "application/x-ndjson"

# GET path -> handler(query params) -> JSON-able objects, one per output line.
ReadRoute = Callable[[dict[str, str]], Iterable[dict[str, Any]]]
# GET path -> handler(query params) -> (content type, body), for non-JSON pages such as /metrics.
PageRoute = Callable[[dict[str, str]], tuple[str, bytes]]
HealthCheck = Callable[[], tuple[bool, dict[str, Any]]]


class BodyTooLarge(Exception):
    pass


def gunzip_limited(body: bytes, limit: int) -> bytes:
    """Decompress gzip, refusing output past `limit` bytes (gzip bombs)."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise OtlpDecodeError(f"body is not valid gzip: {exc}") from exc
    if len(out) > limit or inflater.unconsumed_tail:
        raise BodyTooLarge(f"decompressed body exceeds the {limit} byte limit")
    if not inflater.eof:
        raise OtlpDecodeError("gzip body is truncated")
    return out


class HttpReceiver:
    def __init__(
        self,
        pipeline: IngestPipeline,
        address: str,
        *,
        max_body_bytes: int = 64 * 1024 * 1024,
        bearer_token: str | None = None,
        tls_cert_file: str | None = None,
        tls_key_file: str | None = None,
        read_routes: dict[str, ReadRoute] | None = None,
        page_routes: dict[str, PageRoute] | None = None,
        health: HealthCheck | None = None,
    ) -> None:
        host, _, port = address.rpartition(":")
        try:
            self._server = _Server((host.strip("[]") or "127.0.0.1", int(port)), _Handler)
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"cannot listen for OTLP/HTTP on {address}: {exc}; is the port in use?"
            ) from exc
        if tls_cert_file and tls_key_file:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls_cert_file, tls_key_file)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._server.pipeline = pipeline
        self._server.max_body_bytes = max_body_bytes
        self._server.bearer_token = bearer_token
        self._server.read_routes = dict(read_routes or {})
        self._server.page_routes = dict(page_routes or {})
        self._server.health = health
        self.port = self._server.server_address[1]
        self.address = f"{host or '127.0.0.1'}:{self.port}"
        self._thread: threading.Thread | None = None

    def add_read_route(self, path: str, route: ReadRoute) -> None:
        self._server.read_routes[path] = route

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="agenttrail-http",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    pipeline: IngestPipeline
    max_body_bytes: int
    bearer_token: str | None
    read_routes: dict[str, ReadRoute]
    page_routes: dict[str, PageRoute]
    health: HealthCheck | None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    # -- helpers -------------------------------------------------------------------------

    def _send(self, code: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _send_status(
        self, code: int, message: str, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        """An OTLP error response: a google.rpc.Status in the request's encoding."""
        status = status_pb2.Status(code=_GRPC_CODE_FOR_HTTP.get(code, 2), message=message)
        if content_type == PROTOBUF:
            self._send(code, status.SerializeToString(), PROTOBUF, headers)
        else:
            body = json.dumps({"code": status.code, "message": message}).encode()
            self._send(code, body, JSON, headers)

    def _authorized(self) -> bool:
        return bearer_ok(self.headers.get("Authorization"), self.server.bearer_token)

    def _discard_body(self) -> None:
        """Read and drop a body we refuse, so the connection stays usable (up to a bound)."""
        length = int(self.headers.get("Content-Length") or 0)
        if length > self.server.max_body_bytes:
            self.close_connection = True
            return
        while length > 0:
            chunk = self.rfile.read(min(length, 1 << 16))
            if not chunk:
                break
            length -= len(chunk)

    # -- routes --------------------------------------------------------------------------

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        content_type = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        reply_type = JSON if content_type == JSON else PROTOBUF
        if path != "/v1/traces":
            self._discard_body()
            self._send_status(404, f"no such endpoint {path}; OTLP traces go to POST /v1/traces", reply_type)
            return
        if not self._authorized():
            self._discard_body()
            self._send_status(401, "missing or wrong bearer token", reply_type)
            return
        if content_type not in (PROTOBUF, JSON):
            self._discard_body()
            self._send_status(
                415, f"unsupported content type {content_type or '(none)'}; use {PROTOBUF} or {JSON}", JSON
            )
            return
        try:
            body = self._read_body()
        except BodyTooLarge as exc:
            self.close_connection = True
            self._send_status(413, str(exc), reply_type)
            return
        except OtlpDecodeError as exc:
            self._send_status(400, str(exc), reply_type)
            return
        except ValueError as exc:
            self.close_connection = True
            self._send_status(400, str(exc), reply_type)
            return
        body_format = FORMAT_JSON if content_type == JSON else FORMAT_PROTOBUF
        try:
            batch = self.server.pipeline.accept(body, body_format)
        except OtlpDecodeError as exc:
            self._send_status(400, str(exc), reply_type)
            return
        except OverloadedError as exc:
            code = 503 if exc.store_down else 429
            self._send_status(code, str(exc), reply_type, {"Retry-After": str(exc.retry_after_s)})
            return
        response = batch.export_response()
        if reply_type == JSON:
            payload = json.dumps(json_format.MessageToDict(response)).encode()
        else:
            payload = response.SerializeToString()
        self._send(200, payload, reply_type)

    def _read_body(self) -> bytes:
        limit = self.server.max_body_bytes
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            raise ValueError("chunked request bodies are not supported; send Content-Length")
        try:
            length = int(self.headers.get("Content-Length") or "")
        except ValueError as exc:
            raise ValueError("Content-Length header is missing or not a number") from exc
        if length > limit:
            raise BodyTooLarge(f"body of {length} bytes exceeds the {limit} byte limit")
        body = self.rfile.read(length)
        if len(body) != length:
            raise ValueError("body is shorter than its Content-Length")
        encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        if encoding == "gzip":
            return gunzip_limited(body, limit)
        if encoding not in ("identity", ""):
            raise OtlpDecodeError(f"unsupported Content-Encoding {encoding!r}; use gzip or none")
        return body

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        if parts.path in ("/healthz", "/readyz"):
            healthy, detail = self.server.health() if self.server.health else (True, {})
            body = json.dumps({"status": "ok" if healthy else "unavailable", **detail}).encode()
            self._send(200 if healthy else 503, body, JSON)
            return
        page = self.server.page_routes.get(parts.path)
        route = self.server.read_routes.get(parts.path)
        if page is None and route is None:
            self._send_status(404, f"no such endpoint {parts.path}", JSON)
            return
        if not self._authorized():
            self._send_status(401, "missing or wrong bearer token", JSON)
            return
        params = dict(parse_qsl(parts.query))
        if page is not None:
            try:
                content_type, page_body = page(params)
            except (AgentTrailError, ValueError) as exc:
                self._send_status(400, str(exc), JSON)
                return
            self._send(200, page_body, content_type)
            return
        assert route is not None
        try:
            lines = [json.dumps(item, ensure_ascii=False) for item in route(params)]
        except (AgentTrailError, ValueError) as exc:
            self._send_status(400, str(exc), JSON)
            return
        body = ("\n".join(lines) + "\n").encode() if lines else b""
        self._send(200, body, NDJSON)


_GRPC_CODE_FOR_HTTP = {400: 3, 401: 16, 404: 5, 413: 8, 415: 3, 429: 8, 503: 14}
