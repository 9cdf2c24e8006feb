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

Files: ``EventLogExporter`` (the event stream as JSON lines, through
``cupellation.logs.AuditLog``), ``ReportFileExporter`` (each SelectionReport as a JSON
document, replaced atomically) and ``OtlpJsonFileSpanExporter`` (spans as OTLP/JSON
lines, the Collector's ``otlpjsonfile`` format).

Log records: ``LogRecordCollector`` emits one OpenTelemetry log record per event
(attributes: the event's flat mapping; body: its type; timestamp: the run's
``started_at``) through an SDK ``LoggerProvider``, such as the one
``setup_otlp(logs=True)`` builds (``providers.log_collector()``), so an
OpenTelemetry Collector's ``clickhouse`` exporter stores the rows ``cupellation
store`` reads.

Replay: ``replay(sources, exporter)`` sends runs recorded in audit logs, event files or
trace files to any span exporter as spans with the runs' own times and deterministic
ids (``spans_from_events``, ``spans_from_trace``, ``read_replay_sources``); it is what
``cupellation export`` runs.
"""

from __future__ import annotations

from ._accounting import (
    DEFAULT_SHUTDOWN_TIMEOUT_MILLIS,
    DROP_REASONS,
    EXPORT_FAILED,
    GRPC_MAX_REQUEST_BYTES,
    QUEUE_FULL,
    SHUTDOWN,
    TOO_LARGE,
    DropCounter,
    DropCountingSpanExporter,
    DropCountingSpanProcessor,
)
from ._files import (
    RUN_ID_FIELD,
    EventLogExporter,
    OtlpJsonFileSpanExporter,
    ReportFileExporter,
    otlp_json_document,
    otlp_json_line,
)
from ._logrecords import (
    LOG_SCOPE_NAME,
    LOG_SEVERITY,
    LogRecordCollector,
    log_record_attributes,
    run_timestamp,
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
    HTTP_LOGS_PATH,
    HTTP_METRICS_PATH,
    HTTP_TRACES_PATH,
    PROTOCOLS,
    OtlpProtocol,
    OtlpProviders,
    logs_asked,
    otlp_log_exporter,
    otlp_resource,
    otlp_span_exporter,
    otlp_target,
    setup_otlp,
)
from ._replay import (
    DEFAULT_BATCH_EVENTS,
    DEFAULT_BATCH_SIZE,
    DEFAULT_GIVE_UP_AFTER,
    ReplayedRun,
    ReplayResult,
    ReplaySource,
    is_trace_source,
    read_replay_sources,
    replay,
)
from ._replay_spans import replay_id, spans_from_events, spans_from_trace

__all__ = [
    "otlp_target",
    "GRPC_MAX_REQUEST_BYTES",
    "TOO_LARGE",
    "DEFAULT_BATCH_EVENTS",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_GIVE_UP_AFTER",
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
    "HTTP_LOGS_PATH",
    "HTTP_METRICS_PATH",
    "LOG_SCOPE_NAME",
    "LOG_SEVERITY",
    "LogRecordCollector",
    "HTTP_TRACES_PATH",
    "PROTOCOLS",
    "QUEUE_FULL",
    "RUN_ID_FIELD",
    "SHUTDOWN",
    "DropCounter",
    "DropCountingSpanExporter",
    "DropCountingSpanProcessor",
    "EventLogExporter",
    "OtlpJsonFileSpanExporter",
    "OtlpProtocol",
    "OtlpProviders",
    "ReplayResult",
    "ReplaySource",
    "ReplayedRun",
    "ReportFileExporter",
    "is_trace_source",
    "log_record_attributes",
    "logs_asked",
    "otlp_log_exporter",
    "otlp_json_document",
    "otlp_json_line",
    "otlp_resource",
    "otlp_span_exporter",
    "read_replay_sources",
    "replay",
    "replay_id",
    "run_timestamp",
    "setup_otlp",
    "spans_from_events",
    "spans_from_trace",
]
