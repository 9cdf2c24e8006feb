"""Local OTLP backends that misbehave on purpose, for the exporter tests.

Every server listens on 127.0.0.1 only, on a free port the OS picks, serves only while
its ``with`` block runs, and bounds every wait (a "slow" handler sleeps at most
``delay`` seconds and wakes at once when the server stops).
"""

from __future__ import annotations

import gzip
import socket
import threading
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Literal, Self

import grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

Behaviour = Literal["ok", "slow", "refuse", "error", "unavailable"]
"""ok: 200 / OK. slow: sleeps ``delay`` s, then answers OK. refuse: 400 /
INVALID_ARGUMENT (not retried). error: 500 / INTERNAL (not retried). unavailable:
503 / UNAVAILABLE (retried until the export timeout)."""

TRACE_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
METRICS_METHOD = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
LOGS_METHOD = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"


@dataclass(frozen=True, slots=True)
class Received:
    """One export request as the server saw it (body already decompressed)."""

    path: str
    headers: dict[str, str]
    body: bytes

    def trace_request(self) -> ExportTraceServiceRequest:
        """The body decoded as an OTLP trace export request."""
        return ExportTraceServiceRequest.FromString(self.body)

    def logs_request(self) -> ExportLogsServiceRequest:
        """The body decoded as an OTLP logs export request."""
        return ExportLogsServiceRequest.FromString(self.body)


@dataclass(slots=True)
class _Shared:
    behaviour: Behaviour
    delay: float
    stopping: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    received: list[Received] = field(default_factory=list)

    def record(self, item: Received) -> None:
        with self.lock:
            self.received.append(item)


class _Backend:
    """What both fake servers share: the behaviour and what was received."""

    _shared: _Shared

    @property
    def received(self) -> list[Received]:
        """Every export request so far, in arrival order."""
        with self._shared.lock:
            return list(self._shared.received)

    def span_names(self) -> list[str]:
        """Names of every span received in trace requests."""
        return [span.name
                for item in self.received if item.path.endswith(("/v1/traces", TRACE_METHOD))
                for resource_spans in item.trace_request().resource_spans
                for scope_spans in resource_spans.scope_spans
                for span in scope_spans.spans]


class _Handler(BaseHTTPRequestHandler):
    server: _HttpServer

    def do_POST(self) -> None:
        shared = self.server.shared
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        encoding = (self.headers.get("Content-Encoding") or "").lower()
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        headers = {key.lower(): value for key, value in self.headers.items()}
        shared.record(Received(self.path, headers, body))
        status = {"ok": 200, "slow": 200, "refuse": 400, "error": 500,
                  "unavailable": 503}[shared.behaviour]
        if shared.behaviour == "slow":
            shared.stopping.wait(shared.delay)
        if self.path.endswith("/v1/metrics"):
            answer = ExportMetricsServiceResponse().SerializeToString()
        elif self.path.endswith("/v1/logs"):
            answer = ExportLogsServiceResponse().SerializeToString()
        else:
            answer = ExportTraceServiceResponse().SerializeToString()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)
        except OSError:  # the client gave up (timeout) and closed the connection
            pass

    def log_message(self, format: str, *args: object) -> None:
        """Silence the per-request log lines."""


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    shared: _Shared


class FakeHttpBackend(_Backend):
    """An OTLP/HTTP (protobuf) endpoint on 127.0.0.1 behaving as ``behaviour`` says."""

    def __init__(self, behaviour: Behaviour = "ok", *, delay: float = 5.0) -> None:
        self._shared = _Shared(behaviour, delay)
        self._server = _HttpServer(("127.0.0.1", 0), _Handler)
        self._server.shared = self._shared
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def endpoint(self) -> str:
        """The base URL (what OTEL_EXPORTER_OTLP_ENDPOINT takes)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._shared.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class FakeGrpcBackend(_Backend):
    """An OTLP/gRPC endpoint (traces and metrics) on 127.0.0.1; ``refuse`` answers
    INVALID_ARGUMENT, ``error`` INTERNAL, ``unavailable`` UNAVAILABLE."""

    def __init__(self, behaviour: Behaviour = "ok", *, delay: float = 5.0) -> None:
        self._shared = _Shared(behaviour, delay)
        self._server = grpc.server(ThreadPoolExecutor(max_workers=4))
        handlers = {
            "Export": grpc.unary_unary_rpc_method_handler(
                self._export_traces, request_deserializer=ExportTraceServiceRequest.FromString,
                response_serializer=ExportTraceServiceResponse.SerializeToString),
        }
        metric_handlers = {
            "Export": grpc.unary_unary_rpc_method_handler(
                self._export_metrics,
                request_deserializer=ExportMetricsServiceRequest.FromString,
                response_serializer=ExportMetricsServiceResponse.SerializeToString),
        }
        log_handlers = {
            "Export": grpc.unary_unary_rpc_method_handler(
                self._export_logs, request_deserializer=ExportLogsServiceRequest.FromString,
                response_serializer=ExportLogsServiceResponse.SerializeToString),
        }
        self._server.add_generic_rpc_handlers((
            grpc.method_handlers_generic_handler(
                "opentelemetry.proto.collector.logs.v1.LogsService", log_handlers),
            grpc.method_handlers_generic_handler(
                "opentelemetry.proto.collector.trace.v1.TraceService", handlers),
            grpc.method_handlers_generic_handler(
                "opentelemetry.proto.collector.metrics.v1.MetricsService", metric_handlers),
        ))
        self._port = self._server.add_insecure_port("127.0.0.1:0")

    @property
    def endpoint(self) -> str:
        """The URL the gRPC exporter takes (``http://`` means plaintext)."""
        return f"http://127.0.0.1:{self._port}"

    def _answer(self, method: str, body: bytes, context: grpc.ServicerContext) -> None:
        shared = self._shared
        headers = {key: str(value) for key, value in context.invocation_metadata()}
        shared.record(Received(method, headers, body))
        if shared.behaviour == "slow":
            shared.stopping.wait(shared.delay)
        code = {"refuse": grpc.StatusCode.INVALID_ARGUMENT, "error": grpc.StatusCode.INTERNAL,
                "unavailable": grpc.StatusCode.UNAVAILABLE}.get(shared.behaviour)
        if code is not None:
            context.abort(code, f"fake backend: {shared.behaviour}")

    def _export_traces(self, request: ExportTraceServiceRequest,
                       context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        self._answer(TRACE_METHOD, request.SerializeToString(), context)
        return ExportTraceServiceResponse()

    def _export_metrics(self, request: ExportMetricsServiceRequest,
                        context: grpc.ServicerContext) -> ExportMetricsServiceResponse:
        self._answer(METRICS_METHOD, request.SerializeToString(), context)
        return ExportMetricsServiceResponse()

    def _export_logs(self, request: ExportLogsServiceRequest,
                     context: grpc.ServicerContext) -> ExportLogsServiceResponse:
        self._answer(LOGS_METHOD, request.SerializeToString(), context)
        return ExportLogsServiceResponse()

    def __enter__(self) -> Self:
        self._server.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._shared.stopping.set()
        self._server.stop(grace=None).wait(timeout=5)


@contextmanager
def refused_endpoint() -> Iterator[str]:
    """A 127.0.0.1 URL where nothing listens: the port is held (bound, never listening)
    for the block, so every connection is refused and no other process can take it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
