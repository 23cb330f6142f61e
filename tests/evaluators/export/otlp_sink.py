"""A local OTLP receiver for metrics and logs, over gRPC or HTTP (protobuf), that keeps every request."""

from __future__ import annotations

import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)

_SIGNALS: dict[str, tuple[str, Any, Any]] = {
    "metrics": (
        "opentelemetry.proto.collector.metrics.v1.MetricsService",
        ExportMetricsServiceRequest,
        ExportMetricsServiceResponse,
    ),
    "logs": (
        "opentelemetry.proto.collector.logs.v1.LogsService",
        ExportLogsServiceRequest,
        ExportLogsServiceResponse,
    ),
}


class OtlpSink:
    """Start with `start(protocol)`; `endpoint` is what an exporter should be given."""

    def __init__(self) -> None:
        self.requests: dict[str, list[Any]] = {"metrics": [], "logs": []}
        self._lock = threading.Lock()
        self._grpc: grpc.Server | None = None
        self._http: ThreadingHTTPServer | None = None
        self.endpoint = ""
        self.protocol = ""

    def received(self, signal: str) -> list[Any]:
        with self._lock:
            return list(self.requests[signal])

    def _keep(self, signal: str, message: Any) -> None:
        with self._lock:
            self.requests[signal].append(message)

    def start(self, protocol: str) -> OtlpSink:
        self.protocol = protocol
        if protocol == "grpc":
            self._start_grpc()
        else:
            self._start_http()
        return self

    def _start_grpc(self) -> None:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        for signal, (service, request_type, response_type) in _SIGNALS.items():

            def export(
                message: Any, context: Any, signal: str = signal, response: Any = response_type
            ) -> Any:
                self._keep(signal, message)
                return response()

            handler = grpc.unary_unary_rpc_method_handler(
                export,
                request_deserializer=request_type.FromString,
                response_serializer=response_type.SerializeToString,
            )
            server.add_generic_rpc_handlers(
                (grpc.method_handlers_generic_handler(service, {"Export": handler}),)
            )
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self._grpc = server
        self.endpoint = f"http://127.0.0.1:{port}"

    def _start_http(self) -> None:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                signal = self.path.rsplit("/", 1)[-1]
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if signal not in _SIGNALS or self.headers["Content-Type"] != "application/x-protobuf":
                    self.send_response(404)
                    self.end_headers()
                    return
                _, request_type, response_type = _SIGNALS[signal]
                sink._keep(signal, request_type.FromString(body))
                reply = response_type().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._http = server
        self.endpoint = f"http://127.0.0.1:{server.server_address[1]}"

    def stop(self) -> None:
        if self._grpc is not None:
            self._grpc.stop(None)
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
