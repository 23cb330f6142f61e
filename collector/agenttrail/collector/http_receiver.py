"""The HTTP port (default 4318): OTLP/HTTP, health, the read API, pages and mounted ASGI apps.

`HttpReceiver` binds the port at construction (so a taken port is a ConfigError before
anything starts), builds the Starlette app (`http_app`) and serves it with uvicorn in a thread
of its own (`http_server`). Routes may be added before or after start(); mounts too.
"""

from __future__ import annotations

import socket

from starlette.types import ASGIApp

from agenttrail.collector.errors import ConfigError
from agenttrail.collector.http_app import (
    JSON,
    NDJSON,
    PROTOBUF,
    HealthCheck,
    HttpApp,
    HttpOptions,
    PageRoute,
    ReadRoute,
)
from agenttrail.collector.http_server import HttpServer, ServerLimits
from agenttrail.collector.inflight import InFlightBytes
from agenttrail.collector.ingest import IngestPipeline

__all__ = [
    "JSON",
    "NDJSON",
    "PROTOBUF",
    "HealthCheck",
    "HttpOptions",
    "HttpReceiver",
    "PageRoute",
    "ReadRoute",
    "ServerLimits",
]


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
        liveness: HealthCheck | None = None,
        limiter: InFlightBytes | None = None,
        health_auth: bool = False,
        metrics_auth: bool = True,
        body_timeout_s: float = 30.0,
        limits: ServerLimits | None = None,
    ) -> None:
        host, _, port = address.rpartition(":")
        host = host.strip("[]") or "127.0.0.1"
        try:
            sock = socket.create_server(
                (host, int(port)), family=socket.AF_INET6 if ":" in host else socket.AF_INET, backlog=2048
            )
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"cannot listen for OTLP/HTTP on {address}: {exc}; "
                "give another address with --http (AGENTTRAIL_HTTP, collector.http)"
            ) from exc
        self.port: int = sock.getsockname()[1]
        self.address = f"{host}:{self.port}" if ":" not in host else f"[{host}]:{self.port}"
        self.limiter = limiter or InFlightBytes(max_body_bytes)
        options = HttpOptions(
            max_body_bytes=max_body_bytes,
            bearer_token=bearer_token,
            health_auth=health_auth,
            metrics_auth=metrics_auth,
            body_timeout_s=body_timeout_s,
        )
        self._app = HttpApp(
            pipeline,
            self.limiter,
            options,
            read_routes=read_routes,
            page_routes=page_routes,
            readiness=health,
            liveness=liveness,
        )
        try:
            self._server = HttpServer(
                self._app.app,
                sock,
                limits or ServerLimits(),
                tls_cert_file=tls_cert_file,
                tls_key_file=tls_key_file,
            )
        except (OSError, ValueError) as exc:
            sock.close()
            raise ConfigError(
                f"cannot use the TLS certificate {tls_cert_file} / key {tls_key_file}: {exc}"
            ) from exc

    def add_read_route(self, path: str, route: ReadRoute) -> None:
        self._app.read_routes[path] = route

    def add_page_route(self, path: str, route: PageRoute) -> None:
        self._app.page_routes[path] = route

    def mount(self, prefix: str, app: ASGIApp) -> None:
        """Serve the ASGI app `app` (e.g. a Starlette app) under `prefix` on this port.

        It receives requests whose path starts with `prefix`, with `root_path` set to `prefix`
        (Starlette routes inside it match the rest). Auth is the app's own business: the
        sidecar's token is `Sidecar.config.bearer_token` (compare it with `auth.bearer_ok`).
        """
        self._app.mount(prefix, app)

    def start(self) -> None:
        self._server.start()

    def alive(self) -> bool:
        return self._server.alive()

    def stop(self) -> None:
        """Stop accepting; requests in flight finish (acks included), then the port closes."""
        self._server.stop()
        self._app.close()
