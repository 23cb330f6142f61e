"""OTLP/gRPC receiver: `opentelemetry.proto.collector.trace.v1.TraceService/Export`.

The handler takes the raw request bytes (no deserializer) so a body that does not parse is
answered INVALID_ARGUMENT with a message, rather than the INTERNAL that a failing gRPC
deserializer would produce. Overload and store outages are UNAVAILABLE, which standard OTLP
exporters retry. A request's bytes count against the in-flight budget shared with the HTTP
receiver while it is decoded and spooled (gRPC hands the handler the whole message, so the
check comes after receiving it; `maximum_concurrent_rpcs` bounds how many are received at once).
Any other failure is INTERNAL with a message and a log line, never a dropped call. The time a
call waits for a worker of the pool counts toward the pipeline's wait bound (`_StampingPool`):
past `ingest_max_wait_s` it is refused UNAVAILABLE with a retry hint instead of served late.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

import grpc

from agenttrail.collector.auth import bearer_ok
from agenttrail.collector.errors import ConfigError, OverloadedError
from agenttrail.collector.inflight import RETRY_AFTER_S, InFlightBytes
from agenttrail.collector.otlp_decode import FORMAT_PROTOBUF, OtlpDecodeError

if TYPE_CHECKING:
    from agenttrail.collector.otlp_decode import DecodedBatch

log = logging.getLogger(__name__)

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"

_P = ParamSpec("_P")
_T = TypeVar("_T")
# The running call's hand-over time to the pool, per worker thread (set by _StampingPool).
_CALL = threading.local()


class _StampingPool(ThreadPoolExecutor):
    """grpc's worker pool, noting when each call was handed to it (before it waited for a worker)."""

    def submit(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> Future[_T]:
        handed = time.monotonic()

        def run() -> _T:
            _CALL.handed_at = handed
            return fn(*args, **kwargs)

        return super().submit(run)


class Acceptor(Protocol):
    """What checks and spools a request: `ingest.IngestPipeline`, or the receiver process's
    `grpc_front.SpoolFront`."""

    def accept(
        self, body: bytes, body_format: int = FORMAT_PROTOBUF, *, waiting_since: float | None = None
    ) -> DecodedBatch: ...


class GrpcReceiver:
    def __init__(
        self,
        pipeline: Acceptor,
        address: str,
        *,
        max_body_bytes: int = 64 * 1024 * 1024,
        bearer_token: str | None = None,
        tls_cert: bytes | None = None,
        tls_key: bytes | None = None,
        workers: int = 8,
        extra_handlers: Sequence[grpc.GenericRpcHandler[Any, Any]] = (),
        limiter: InFlightBytes | None = None,
        serve_otlp: bool = True,
    ) -> None:
        self._pipeline = pipeline
        self._token = bearer_token
        self.limiter = limiter or InFlightBytes(max_body_bytes)
        self._server = grpc.server(
            _StampingPool(max_workers=workers, thread_name_prefix="agenttrail-grpc"),
            maximum_concurrent_rpcs=4 * workers,
            options=[
                ("grpc.max_receive_message_length", max_body_bytes),
                ("grpc.max_send_message_length", 4 * 1024 * 1024),
                # gRPC sets SO_REUSEPORT by default: a second serve on a port in use then binds it
                # too and the kernel splits the clients' spans between two stores, silently.
                ("grpc.so_reuseport", 0),
            ],
        )
        handler = grpc.method_handlers_generic_handler(
            SERVICE, {"Export": grpc.unary_unary_rpc_method_handler(self._export)}
        )
        # Extensions (e.g. the evaluation API) serve their own services on the same port. Without
        # OTLP (`serve_otlp=False`) this is serve's internal port behind the receiver process.
        self._server.add_generic_rpc_handlers(((handler,) if serve_otlp else ()) + tuple(extra_handlers))
        try:
            if tls_cert and tls_key:
                credentials = grpc.ssl_server_credentials([(tls_key, tls_cert)])
                self.port = self._server.add_secure_port(address, credentials)
            else:
                self.port = self._server.add_insecure_port(address)
        except RuntimeError as exc:
            raise ConfigError(
                f"cannot listen for OTLP/gRPC on {address}: {exc}; "
                "give another address with --grpc (AGENTTRAIL_GRPC, collector.grpc)"
            ) from exc
        if not self.port:
            raise ConfigError(
                f"cannot listen for OTLP/gRPC on {address}: is the port in use? "
                "Give another address with --grpc (AGENTTRAIL_GRPC, collector.grpc)"
            )
        host = address.rsplit(":", 1)[0]
        self.address = f"{host}:{self.port}"

    def start(self) -> None:
        self._server.start()

    def stop(self, grace_s: float = 5.0) -> None:
        self._server.stop(grace_s).wait()

    def authorized(self, context: Any) -> bool:
        """Whether the call carries the configured bearer token (always, when none is set)."""
        given = next(
            (v for k, v in context.invocation_metadata() if k == "authorization" and isinstance(v, str)),
            None,
        )
        return bearer_ok(given, self._token)

    def _export(self, request: bytes, context: Any) -> bytes:
        if not self.authorized(context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        size = len(request)
        if not self.limiter.try_acquire(size):
            context.set_trailing_metadata((("retry-after", str(RETRY_AFTER_S)),))
            context.abort(
                grpc.StatusCode.UNAVAILABLE,
                f"the collector has {self.limiter.budget} bytes of requests in flight; retry later",
            )
        try:
            waiting_since = getattr(_CALL, "handed_at", None)
            batch = self._pipeline.accept(request, FORMAT_PROTOBUF, waiting_since=waiting_since)
        except OtlpDecodeError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except OverloadedError as exc:
            context.set_trailing_metadata((("retry-after", str(exc.retry_after_s)),))
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        except Exception as exc:
            log.exception("OTLP/gRPC export failed unexpectedly")
            context.abort(grpc.StatusCode.INTERNAL, f"the collector failed on this request: {exc}")
        finally:
            self.limiter.release(size)
        return bytes(batch.export_response().SerializeToString())
