"""OpenTelemetry export for cupellation.

    from cupellation_exporters import setup_otlp

    otlp = setup_otlp()                      # OTLP/HTTP to http://localhost:4318
    tracer = otlp.tracer_provider.get_tracer("my-app")
    ...
    otlp.shutdown()                          # bounded: the export timeout
    print(otlp.dropped_spans)                # spans that never reached the backend

``setup_otlp`` reads the standard ``OTEL_EXPORTER_OTLP_*`` variables, returns the
providers instead of installing them globally (unless ``set_global=True``), and
counts dropped spans (``DropCountingSpanProcessor``, ``DropCountingSpanExporter``),
logging the first drop once on the ``cupellation`` logger.
"""

from __future__ import annotations

from ._accounting import (
    DEFAULT_SHUTDOWN_TIMEOUT_MILLIS,
    DROP_REASONS,
    EXPORT_FAILED,
    QUEUE_FULL,
    SHUTDOWN,
    DropCounter,
    DropCountingSpanExporter,
    DropCountingSpanProcessor,
)
from ._otlp import (
    DEFAULT_GRPC_ENDPOINT,
    DEFAULT_GRPC_PORT,
    DEFAULT_HTTP_ENDPOINT,
    DEFAULT_HTTP_PORT,
    DEFAULT_MAX_EXPORT_BATCH_SIZE,
    DEFAULT_MAX_QUEUE_SIZE,
    DEFAULT_PROTOCOL,
    DEFAULT_SCHEDULE_DELAY_MILLIS,
    DEFAULT_SERVICE_NAME,
    DEFAULT_TIMEOUT_SECONDS,
    HTTP_METRICS_PATH,
    HTTP_TRACES_PATH,
    PROTOCOLS,
    OtlpProtocol,
    OtlpProviders,
    setup_otlp,
)

__all__ = [
    "DEFAULT_GRPC_ENDPOINT",
    "DEFAULT_GRPC_PORT",
    "DEFAULT_HTTP_ENDPOINT",
    "DEFAULT_HTTP_PORT",
    "DEFAULT_MAX_EXPORT_BATCH_SIZE",
    "DEFAULT_MAX_QUEUE_SIZE",
    "DEFAULT_PROTOCOL",
    "DEFAULT_SCHEDULE_DELAY_MILLIS",
    "DEFAULT_SERVICE_NAME",
    "DEFAULT_SHUTDOWN_TIMEOUT_MILLIS",
    "DEFAULT_TIMEOUT_SECONDS",
    "DROP_REASONS",
    "EXPORT_FAILED",
    "HTTP_METRICS_PATH",
    "HTTP_TRACES_PATH",
    "PROTOCOLS",
    "QUEUE_FULL",
    "SHUTDOWN",
    "DropCounter",
    "DropCountingSpanExporter",
    "DropCountingSpanProcessor",
    "OtlpProviders",
    "OtlpProtocol",
    "setup_otlp",
]
