"""The HTTP port's ASGI app (Starlette): OTLP/HTTP `POST /v1/traces`, health, the read API,
pages such as `/metrics`, and ASGI sub-apps mounted at a prefix (the console, write endpoints).

OTLP bodies are protobuf or JSON, optionally gzip; the answer uses the request's content type.
The body is read as a stream (Content-Length or chunked) under a deadline, and refused with 413
as soon as its raw or decompressed size passes `max_body_bytes`, so a gzip bomb costs at most
the limit. Its bytes count against the in-flight budget shared with the gRPC receiver (429 when
spent, before the body is read where Content-Length tells its size). `IngestPipeline.accept`
blocks on the spool write, so it runs on a small thread pool, never on the event loop; the 200
goes out only after it returned, i.e. after the spool write.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from google.rpc import status_pb2  # type: ignore[import-untyped]
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp

from agenttrail.collector.auth import bearer_ok
from agenttrail.collector.errors import AgentTrailError, OverloadedError, StoreUnavailable
from agenttrail.collector.inflight import RETRY_AFTER_S, InFlightBytes
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
# () -> (healthy, details): readiness (store, backlog...) or liveness (workers alive).
HealthCheck = Callable[[], tuple[bool, dict[str, Any]]]

# The Prometheus page, which `metrics_auth: false` serves without the bearer token.
METRICS_PATH = "/metrics"

_GRPC_CODE_FOR_HTTP = {400: 3, 401: 16, 404: 5, 408: 4, 413: 8, 415: 3, 429: 8, 500: 13, 503: 14}


@dataclass(frozen=True, slots=True)
class HttpOptions:
    """What the app enforces per request."""

    max_body_bytes: int = 64 * 1024 * 1024
    bearer_token: str | None = None
    health_auth: bool = False  # whether /livez, /readyz, /healthz need the bearer token too
    metrics_auth: bool = True  # whether /metrics (METRICS_PATH) needs it: scrapers by annotation send none
    body_timeout_s: float = 30.0  # the whole body must arrive within this
    ingest_threads: int = 8  # threads running IngestPipeline.accept (it blocks on the spool)


class _BodyTooLarge(AgentTrailError):
    """The body grew past the size limit while being read (answered 413)."""


class _BudgetSpent(AgentTrailError):
    """The shared in-flight byte budget cannot cover this body (answered 429)."""


class _Reservation:
    """The in-flight bytes one request holds; grows as its (decompressed) body grows."""

    def __init__(self, limiter: InFlightBytes) -> None:
        self._limiter = limiter
        self.size = 0

    def cover(self, total: int) -> None:
        """Hold at least `total` bytes, or raise _BudgetSpent."""
        if total <= self.size:
            return
        more = total - self.size
        if not self._limiter.try_acquire(more, holding=self.size):
            raise _BudgetSpent
        self.size = total

    def release(self) -> None:
        self._limiter.release(self.size)
        self.size = 0


def status_response(
    code: int, message: str, content_type: str, headers: dict[str, str] | None = None
) -> Response:
    """An OTLP error answer: a google.rpc.Status in the request's encoding."""
    status = status_pb2.Status(code=_GRPC_CODE_FOR_HTTP.get(code, 2), message=message)
    if content_type == PROTOBUF:
        return Response(status.SerializeToString(), code, headers, PROTOBUF)
    body = json.dumps({"code": status.code, "message": message}).encode()
    return Response(body, code, headers, JSON)


class HttpApp:
    """The routes; `app` is the ASGI callable uvicorn serves."""

    def __init__(
        self,
        pipeline: IngestPipeline,
        limiter: InFlightBytes,
        options: HttpOptions,
        *,
        read_routes: dict[str, ReadRoute] | None = None,
        page_routes: dict[str, PageRoute] | None = None,
        readiness: HealthCheck | None = None,
        liveness: HealthCheck | None = None,
    ) -> None:
        self._pipeline = pipeline
        self._limiter = limiter
        self.options = options
        self.read_routes: dict[str, ReadRoute] = dict(read_routes or {})
        self.page_routes: dict[str, PageRoute] = dict(page_routes or {})
        self._readiness = readiness
        self._liveness = liveness
        self._ingest = ThreadPoolExecutor(options.ingest_threads, thread_name_prefix="agenttrail-http-ingest")
        self.app = Starlette(
            routes=[
                Route("/v1/traces", self._traces, methods=["POST"]),
                Route("/livez", self._livez, methods=["GET"]),
                Route("/readyz", self._readyz, methods=["GET"]),
                Route("/healthz", self._readyz, methods=["GET"]),  # kept: readiness, as before
                Route("/{path:path}", self._get, methods=["GET"]),
                Route("/{path:path}", self._not_found, methods=["POST", "PUT", "DELETE", "PATCH"]),
            ]
        )

    def mount(self, prefix: str, app: ASGIApp) -> None:
        """Serve an ASGI app under `prefix` (e.g. "/console"); it sees `root_path` = prefix.
        Mounts are tried before the built-in routes; the app does its own auth."""
        if not prefix.startswith("/") or prefix.endswith("/"):
            raise ValueError(f"mount prefix {prefix!r} must start with '/' and not end with one")
        self.app.router.routes.insert(0, Mount(prefix, app=app))

        async def with_slash(request: Request) -> Response:
            # "/console" or "/mcp" as typed: the mount serves "/console/..."; 307 keeps a POST a POST
            target = prefix + "/" + (f"?{request.url.query}" if request.url.query else "")
            return Response(status_code=307, headers={"location": target})

        methods = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]
        self.app.router.routes.insert(0, Route(prefix, with_slash, methods=methods))

    def close(self) -> None:
        self._ingest.shutdown(wait=True)

    # -- helpers -------------------------------------------------------------------------

    def authorized(self, request: Request) -> bool:
        return bearer_ok(request.headers.get("authorization"), self.options.bearer_token)

    async def _read_body(self, request: Request, reservation: _Reservation) -> bytes:
        """The whole body, decompressed, within the size limit, the deadline and the budget."""
        limit = self.options.max_body_bytes
        encoding = (request.headers.get("content-encoding") or "identity").strip().lower()
        if encoding not in ("identity", "", "gzip"):
            raise OtlpDecodeError(f"unsupported Content-Encoding {encoding!r}; use gzip or none")
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS) if encoding == "gzip" else None
        parts: list[bytes] = []
        received = kept = 0
        async with asyncio.timeout(self.options.body_timeout_s):
            async for chunk in request.stream():
                received += len(chunk)
                if received > limit:
                    raise _BodyTooLarge(f"body exceeds the {limit} byte limit")
                if inflater is not None:
                    try:
                        chunk = inflater.decompress(chunk, limit - kept + 1)
                    except zlib.error as exc:
                        raise OtlpDecodeError(f"body is not valid gzip: {exc}") from exc
                    if inflater.unconsumed_tail or kept + len(chunk) > limit:
                        raise _BodyTooLarge(f"decompressed body exceeds the {limit} byte limit")
                kept += len(chunk)
                reservation.cover(kept)
                if chunk:
                    parts.append(chunk)
        if inflater is not None and not inflater.eof:
            raise OtlpDecodeError("gzip body is truncated")
        return b"".join(parts)

    # -- routes --------------------------------------------------------------------------

    async def _traces(self, request: Request) -> Response:
        content_type = (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
        reply_type = JSON if content_type == JSON else PROTOBUF
        if not self.authorized(request):
            return status_response(401, "missing or wrong bearer token", reply_type)
        if content_type not in (PROTOBUF, JSON):
            return status_response(
                415, f"unsupported content type {content_type or '(none)'}; use {PROTOBUF} or {JSON}", JSON
            )
        limit = self.options.max_body_bytes
        length_header = request.headers.get("content-length")
        declared = 0
        if length_header is not None:
            try:
                declared = int(length_header)
            except ValueError:
                return status_response(400, "Content-Length is not a number", reply_type, _CLOSE)
            if declared > limit:
                return status_response(
                    413, f"body of {declared} bytes exceeds the {limit} byte limit", reply_type, _CLOSE
                )
        reservation = _Reservation(self._limiter)
        try:
            reservation.cover(declared)  # refused here, the body is never read
            body = await self._read_body(request, reservation)
            body_format = FORMAT_JSON if content_type == JSON else FORMAT_PROTOBUF
            loop = asyncio.get_running_loop()
            # From here the wait for an ingest thread and slot counts toward ingest_max_wait_s.
            accept = functools.partial(self._pipeline.accept, waiting_since=time.monotonic())
            batch = await loop.run_in_executor(self._ingest, accept, body, body_format)
        except _BudgetSpent:
            return status_response(
                429,
                f"the collector has {self._limiter.budget} bytes of requests in flight; retry later",
                reply_type,
                {"Retry-After": str(RETRY_AFTER_S)},
            )
        except _BodyTooLarge as exc:
            return status_response(413, str(exc), reply_type, _CLOSE)
        except TimeoutError:
            return status_response(
                408, f"the body did not arrive within {self.options.body_timeout_s:g} s", reply_type, _CLOSE
            )
        except OtlpDecodeError as exc:
            return status_response(400, str(exc), reply_type)
        except OverloadedError as exc:
            code = 503 if exc.store_down else 429
            return status_response(code, str(exc), reply_type, {"Retry-After": str(exc.retry_after_s)})
        except Exception as exc:
            log.exception("OTLP/HTTP request failed unexpectedly")
            return status_response(500, f"the collector failed on this request: {exc}", reply_type)
        finally:
            reservation.release()
        response = batch.export_response()
        if reply_type == JSON:
            return Response(json.dumps(json_format.MessageToDict(response)).encode(), 200, media_type=JSON)
        return Response(response.SerializeToString(), 200, media_type=PROTOBUF)

    async def _health(self, request: Request, check: HealthCheck | None) -> Response:
        if self.options.health_auth and not self.authorized(request):
            return status_response(401, "missing or wrong bearer token (health_auth is on)", JSON)
        healthy, detail = await run_in_threadpool(check) if check else (True, {})
        body = json.dumps({"status": "ok" if healthy else "unavailable", **detail}).encode()
        return Response(body, 200 if healthy else 503, media_type=JSON)

    async def _livez(self, request: Request) -> Response:
        return await self._health(request, self._liveness)

    async def _readyz(self, request: Request) -> Response:
        return await self._health(request, self._readiness)

    async def _get(self, request: Request) -> Response:
        path = request.url.path
        page = self.page_routes.get(path)
        route = self.read_routes.get(path)
        if page is None and route is None:
            return status_response(404, f"no such endpoint {path}", JSON)
        open_page = path == METRICS_PATH and page is not None and not self.options.metrics_auth
        if not open_page and not self.authorized(request):
            return status_response(401, "missing or wrong bearer token", JSON)
        params = dict(request.query_params)
        try:
            if page is not None:
                content_type, page_body = await run_in_threadpool(page, params)
                return Response(page_body, 200, media_type=content_type)
            assert route is not None
            lines = await run_in_threadpool(
                lambda: [json.dumps(item, ensure_ascii=False) for item in route(params)]
            )
        except StoreUnavailable as exc:  # serve waits for its server, or an outage
            return status_response(503, str(exc), JSON, {"Retry-After": str(STORE_RETRY_AFTER_S)})
        except (AgentTrailError, ValueError) as exc:
            return status_response(400, str(exc), JSON)
        except Exception as exc:
            log.exception("GET %s failed unexpectedly", path)
            return status_response(500, f"{path} failed: {exc}", JSON)
        body = ("\n".join(lines) + "\n").encode() if lines else b""
        return Response(body, 200, media_type=NDJSON)

    async def _not_found(self, request: Request) -> Response:
        content_type = (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
        return status_response(
            404,
            f"no such endpoint {request.url.path}; OTLP traces go to POST /v1/traces",
            JSON if content_type == JSON else PROTOBUF,
        )


_CLOSE = {"Connection": "close"}
# Retry-After of a read while the store cannot be reached.
STORE_RETRY_AFTER_S = 5


def unavailable_while(app: ASGIApp, why_not: Callable[[], str | None]) -> ASGIApp:
    """`app` (a mounted one: console, MCP, write endpoints), answering its HTTP requests with 503
    and `why_not()` while that is not None (serve waits for its store) instead of failing inside
    on a store it cannot have. Plain text to a browser, JSON `{"message": ...}` to the rest."""

    async def gated(scope: Any, receive: Any, send: Any) -> None:
        why = why_not() if scope["type"] == "http" else None
        if why is None:
            await app(scope, receive, send)
            return
        accept = dict(scope.get("headers") or []).get(b"accept", b"")
        if b"text/html" in accept:
            response = Response(why + "\n", 503, {"Retry-After": str(STORE_RETRY_AFTER_S)}, "text/plain")
        else:
            body = json.dumps({"message": why}).encode()
            response = Response(body, 503, {"Retry-After": str(STORE_RETRY_AFTER_S)}, JSON)
        await response(scope, receive, send)

    return gated
