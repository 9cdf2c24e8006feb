"""One call that gives an application with no OpenTelemetry configuration an OTLP
pipeline: a TracerProvider (bounded batch queue, dropped-span accounting), a
MeterProvider and a LoggerProvider, exporting over HTTP/protobuf or gRPC.

Nothing global is touched unless ``set_global=True``: the caller gets the providers
back, passes ``tracer_provider`` to whatever creates spans, and calls ``shutdown()``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from opentelemetry import _logs as otel_logs
from opentelemetry import metrics as otel_metrics
from opentelemetry import trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import (
    SERVICE_NAME,
    TELEMETRY_SDK_LANGUAGE,
    TELEMETRY_SDK_NAME,
    TELEMETRY_SDK_VERSION,
    Resource,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.sdk.version import __version__ as sdk_version
from opentelemetry.util.re import parse_env_headers

from cupellation.settings import (
    LOGS_EXPORTER_ENV_VAR,
    METRICS_EXPORTER_ENV_VAR,
    OTLP_ENDPOINT_ENV_VAR,
    OTLP_HEADERS_ENV_VAR,
    OTLP_LOGS_HEADERS_ENV_VAR,
    OTLP_LOGS_PROTOCOL_ENV_VAR,
    OTLP_METRICS_HEADERS_ENV_VAR,
    OTLP_METRICS_PROTOCOL_ENV_VAR,
    OTLP_PROTOCOL_ENV_VAR,
    OTLP_TIMEOUT_ENV_VAR,
    OTLP_TRACES_ENDPOINT_ENV_VAR,
    OTLP_TRACES_HEADERS_ENV_VAR,
    OTLP_TRACES_PROTOCOL_ENV_VAR,
    OTLP_TRACES_TIMEOUT_ENV_VAR,
    environment_used,
    read,
    resolve_service,
)

if TYPE_CHECKING:
    from grpc import Compression as GrpcCompression
    from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression

from ._accounting import (
    DEFAULT_MAX_EXPORT_BATCH_SIZE,
    DEFAULT_MAX_QUEUE_SIZE,
    DEFAULT_SCHEDULE_DELAY_MILLIS,
    DropCountingSpanProcessor,
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
    "DEFAULT_TIMEOUT_SECONDS",
    "HTTP_LOGS_PATH",
    "HTTP_METRICS_PATH",
    "HTTP_TRACES_PATH",
    "PROTOCOLS",
    "OtlpProviders",
    "OtlpProtocol",
    "logs_asked",
    "otlp_log_exporter",
    "otlp_resource",
    "otlp_span_exporter",
    "setup_otlp",
]

_logger = logging.getLogger("cupellation")

OtlpProtocol = Literal["http/protobuf", "grpc"]
PROTOCOLS: Final[tuple[OtlpProtocol, ...]] = ("http/protobuf", "grpc")
DEFAULT_PROTOCOL: Final[OtlpProtocol] = "http/protobuf"
DEFAULT_SERVICE_NAME: Final = "cupellation"
DEFAULT_HTTP_PORT: Final = 4318
DEFAULT_GRPC_PORT: Final = 4317
DEFAULT_HTTP_ENDPOINT: Final = f"http://localhost:{DEFAULT_HTTP_PORT}"
DEFAULT_GRPC_ENDPOINT: Final = f"http://localhost:{DEFAULT_GRPC_PORT}"
HTTP_TRACES_PATH: Final = "v1/traces"
HTTP_METRICS_PATH: Final = "v1/metrics"
HTTP_LOGS_PATH: Final = "v1/logs"
DEFAULT_TIMEOUT_SECONDS: Final = 10.0
_COMPRESSIONS: Final = ("none", "gzip", "deflate")

_Signal = Literal["TRACES", "METRICS", "LOGS"]
#: Each signal's own protocol and headers variables (read before the general ones).
_PROTOCOL_VARS: Final[dict[_Signal, str]] = {
    "TRACES": OTLP_TRACES_PROTOCOL_ENV_VAR, "METRICS": OTLP_METRICS_PROTOCOL_ENV_VAR,
    "LOGS": OTLP_LOGS_PROTOCOL_ENV_VAR}
_HEADERS_VARS: Final[dict[_Signal, str]] = {
    "TRACES": OTLP_TRACES_HEADERS_ENV_VAR, "METRICS": OTLP_METRICS_HEADERS_ENV_VAR,
    "LOGS": OTLP_LOGS_HEADERS_ENV_VAR}
#: The OpenTelemetry SDK's default metric export interval (OTEL_METRIC_EXPORT_INTERVAL's).
_DEFAULT_METRIC_INTERVAL_MILLIS: Final = 60_000.0


@dataclass(frozen=True, slots=True)
class OtlpProviders:
    """What :func:`setup_otlp` built. The application owns it: pass
    ``tracer_provider`` (and ``meter_provider``) where telemetry is created, read
    ``dropped_spans`` when it likes, and call ``shutdown()`` before exiting."""

    tracer_provider: TracerProvider
    """Spans go to ``span_processor``, then to the OTLP span exporter."""
    meter_provider: MeterProvider | None
    """A periodic reader exporting over OTLP; None when built with ``metrics=False``."""
    span_processor: DropCountingSpanProcessor
    """The batch processor; ``span_processor.counter`` has the full tally."""
    protocol: OtlpProtocol
    """The traces protocol in use."""
    resource: Resource
    """The resource every provider reports (``service.name`` included)."""
    logger_provider: LoggerProvider | None = None
    """Log records (a :class:`~cupellation_exporters.LogRecordCollector`'s) go to a
    batch processor, then to the OTLP log exporter; None unless built with
    ``logs=True`` (or ``OTEL_LOGS_EXPORTER=otlp``)."""

    def log_collector(self, **options: Any) -> Any:
        """A :class:`~cupellation_exporters.LogRecordCollector` on ``logger_provider``
        (``options`` are its own). Raises ``ValueError`` when built without logs."""
        if self.logger_provider is None:
            raise ValueError("setup_otlp was called without logs=True: no logger provider")
        from ._logrecords import LogRecordCollector  # noqa: PLC0415

        return LogRecordCollector(logger_provider=self.logger_provider, **options)

    @property
    def dropped_spans(self) -> int:
        """Spans that never reached the backend: queue full, export failed, shutdown."""
        return self.span_processor.dropped_spans

    def force_flush(self, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS) -> bool:
        """Export what is pending; True if everything went out within the timeout."""
        deadline = time.monotonic() + timeout_seconds
        flushed = self.tracer_provider.force_flush(int(timeout_seconds * 1000))
        if self.logger_provider is not None:
            remaining = max(deadline - time.monotonic(), 0.0)
            try:
                flushed = self.logger_provider.force_flush(int(remaining * 1000)) and flushed
            except Exception:
                _logger.debug("logger provider force_flush raised", exc_info=True)
                flushed = False
        if self.meter_provider is not None:
            remaining = max(deadline - time.monotonic(), 0.0)
            try:
                flushed = self.meter_provider.force_flush(remaining * 1000) and flushed
            except Exception:
                _logger.debug("meter provider force_flush raised", exc_info=True)
                flushed = False
        return flushed

    def shutdown(self, timeout_seconds: float | None = None) -> None:
        """Flush and stop both providers. Spans get ``span_processor``'s shutdown
        timeout (the export timeout by default); metrics get what remains of
        ``timeout_seconds`` (default: that same timeout) with at least one second.
        Never raises; calling it again does nothing."""
        started = time.monotonic()
        try:
            self.tracer_provider.shutdown()
        except Exception:
            _logger.debug("tracer provider shutdown raised", exc_info=True)
        if self.logger_provider is not None:
            try:
                self.logger_provider.shutdown()
            except Exception:
                _logger.debug("logger provider shutdown raised", exc_info=True)
        if self.meter_provider is None:
            return
        budget = (self.span_processor.shutdown_timeout_millis / 1000
                  if timeout_seconds is None else timeout_seconds)
        remaining = max(budget - (time.monotonic() - started), 1.0)
        try:
            self.meter_provider.shutdown(timeout_millis=remaining * 1000)
        except Exception:
            _logger.debug("meter provider shutdown raised", exc_info=True)


def setup_otlp(
    *,
    protocol: OtlpProtocol | None = None,
    endpoint: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
    compression: str | None = None,
    service_name: str | None = None,
    resource_attributes: Mapping[str, str | bool | int | float] | None = None,
    metrics: bool | None = None,
    max_queue_size: int | None = None,
    max_export_batch_size: int | None = None,
    schedule_delay_millis: float | None = None,
    shutdown_timeout: float | None = None,
    metric_export_interval_millis: float | None = None,
    set_global: bool = False,
    logs: bool | None = None,
) -> OtlpProviders:
    """Build a TracerProvider and a MeterProvider that export over OTLP.

    Every argument left as None falls back to the standard environment variables,
    then to the OTLP defaults:

    - ``protocol``: ``"http/protobuf"`` or ``"grpc"``; else
      ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` (``..._METRICS_PROTOCOL`` for metrics),
      else ``OTEL_EXPORTER_OTLP_PROTOCOL``, else ``"http/protobuf"``. ``http/json`` is
      not offered by the Python SDK (an environment value naming it is ignored with a
      warning; as an argument it raises ``ValueError``).
    - ``endpoint``: the base URL, as in ``OTEL_EXPORTER_OTLP_ENDPOINT``; over HTTP
      ``/v1/traces`` and ``/v1/metrics`` are appended. Else the signal's own
      ``OTEL_EXPORTER_OTLP_{TRACES,METRICS}_ENDPOINT`` (used as is), else
      ``OTEL_EXPORTER_OTLP_ENDPOINT``, else ``http://localhost:4318`` (HTTP) or
      ``http://localhost:4317`` (gRPC, plaintext for ``http://``).
    - ``headers``: merged over ``OTEL_EXPORTER_OTLP_{TRACES_,}HEADERS`` (keys
      lowercased; e.g. ``{"x-project-name": "demo"}`` picks a Phoenix project).
    - ``timeout``: seconds per export, retries included; else
      ``OTEL_EXPORTER_OTLP_{TRACES_,}TIMEOUT`` read as **seconds** (the Python SDK's
      reading; the specification says milliseconds), else 10.
    - ``compression``: ``"gzip"``, ``"deflate"`` or ``"none"``; else
      ``OTEL_EXPORTER_OTLP_{TRACES_,}COMPRESSION``, else none.
    - ``service_name``: else ``OTEL_SERVICE_NAME``, else ``service.name`` from
      ``OTEL_RESOURCE_ATTRIBUTES``, else ``"cupellation"``. ``resource_attributes`` are
      added to the resource (after those from ``OTEL_RESOURCE_ATTRIBUTES``).
    - batching: ``max_queue_size`` (default 2048, the queue is always bounded),
      ``max_export_batch_size`` (512), ``schedule_delay_millis`` (5000), else the
      ``OTEL_BSP_*`` variables. ``shutdown_timeout`` (seconds) bounds
      ``shutdown()`` for spans; default: the export timeout.
    - ``metrics``: build a MeterProvider exporting over OTLP; None (the default) does
      so only when ``OTEL_METRICS_EXPORTER`` names ``otlp`` (metrics are sent only
      when asked: Phoenix and MLflow take none, and refuse them). A failing metrics
      export is logged once per process, not once per run. ``metric_export_interval_millis``
      (else ``OTEL_METRIC_EXPORT_INTERVAL``, else 60000).
    - ``logs``: build a LoggerProvider (batch processor, OTLP log exporter) for
      :class:`~cupellation_exporters.LogRecordCollector` (``providers.log_collector()``);
      None (the default) does so only when ``OTEL_LOGS_EXPORTER`` names ``otlp``. Its
      protocol, endpoint (``/v1/logs`` over HTTP), headers, timeout and compression
      follow the rules above with ``OTEL_EXPORTER_OTLP_LOGS_*`` in place of
      ``..._TRACES_*``.

    With ``set_global=True`` the providers (the logger provider included) also become
    OpenTelemetry's global ones
    (which can be set only once per process). Raises ``ValueError`` for an invalid
    argument; nothing here raises once spans flow.
    """
    traces_protocol = _protocol(protocol, "TRACES")
    metrics_protocol = _protocol(protocol, "METRICS")
    _check(compression, timeout)
    resource = otlp_resource(service_name, resource_attributes)

    span_exporter = _span_exporter(traces_protocol, endpoint, headers, timeout, compression)
    export_timeout = timeout if timeout is not None else _env_timeout()
    processor = DropCountingSpanProcessor(
        span_exporter,
        max_queue_size=max_queue_size,
        max_export_batch_size=max_export_batch_size,
        schedule_delay_millis=schedule_delay_millis,
        shutdown_timeout_millis=(export_timeout if shutdown_timeout is None
                                 else shutdown_timeout) * 1000,
    )
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(processor)

    meter_provider: MeterProvider | None = None
    if metrics if metrics is not None else metrics_asked():
        metric_exporter = _WarnOnceMetricExporter(_metric_exporter(
            metrics_protocol, endpoint, headers, timeout, compression))
        reader = PeriodicExportingMetricReader(
            metric_exporter, export_interval_millis=_interval(metric_export_interval_millis))
        meter_provider = MeterProvider(resource=resource, metric_readers=[reader])

    logger_provider: LoggerProvider | None = None
    if logs if logs is not None else logs_asked():
        logger_provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
        logger_provider.add_log_record_processor(BatchLogRecordProcessor(_log_exporter(
            _protocol(protocol, "LOGS"), endpoint, headers, timeout, compression)))

    if set_global:
        trace.set_tracer_provider(tracer_provider)
        if meter_provider is not None:
            otel_metrics.set_meter_provider(meter_provider)
        if logger_provider is not None:
            otel_logs.set_logger_provider(logger_provider)
    return OtlpProviders(tracer_provider=tracer_provider, meter_provider=meter_provider,
                         span_processor=processor, protocol=traces_protocol,
                         resource=resource, logger_provider=logger_provider)


def otlp_span_exporter(
    *,
    protocol: OtlpProtocol | None = None,
    endpoint: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
    compression: str | None = None,
) -> SpanExporter:
    """The OTLP span exporter :func:`setup_otlp` would build, on its own: for code that
    hands finished spans to an exporter directly (``cupellation export`` replays
    recorded runs this way) rather than through a TracerProvider.

    The arguments, and the environment variables they fall back to, are
    :func:`setup_otlp`'s. Raises ``ValueError`` for an invalid argument.
    """
    _check(compression, timeout)
    return _span_exporter(_protocol(protocol, "TRACES"), endpoint, headers, timeout,
                          compression)


def otlp_log_exporter(
    *,
    protocol: OtlpProtocol | None = None,
    endpoint: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
    compression: str | None = None,
) -> LogRecordExporter:
    """The OTLP log record exporter :func:`setup_otlp` builds with ``logs=True``, on
    its own (for an application that builds its LoggerProvider itself). The
    arguments are :func:`setup_otlp`'s, falling back to ``OTEL_EXPORTER_OTLP_LOGS_*``
    then ``OTEL_EXPORTER_OTLP_*``. Raises ``ValueError`` for an invalid argument."""
    _check(compression, timeout)
    return _log_exporter(_protocol(protocol, "LOGS"), endpoint, headers, timeout, compression)


def otlp_resource(service_name: str | None = None,
                  resource_attributes: Mapping[str, str | bool | int | float] | None = None,
                  ) -> Resource:
    """The resource :func:`setup_otlp` reports: ``OTEL_RESOURCE_ATTRIBUTES``, then
    ``resource_attributes``, with ``service.name`` from ``service_name``, else
    ``OTEL_SERVICE_NAME``, else ``OTEL_RESOURCE_ATTRIBUTES``, else ``"cupellation"``."""
    return _resource(service_name, resource_attributes)


def logs_asked() -> bool:
    """True when ``OTEL_LOGS_EXPORTER`` (a comma-separated list) names ``otlp``."""
    names = read(LOGS_EXPORTER_ENV_VAR) or ""
    return "otlp" in {name.strip().lower() for name in names.split(",")}


def metrics_asked() -> bool:
    """True when ``OTEL_METRICS_EXPORTER`` (a comma-separated list) names ``otlp``."""
    names = read(METRICS_EXPORTER_ENV_VAR) or ""
    return "otlp" in {name.strip().lower() for name in names.split(",")}


class _MetricsWarnedOnce(logging.Filter):
    """Keeps the failure lines our own wrapped OTLP metric exporter logs out of the
    logs: the last one is kept for the one warning :class:`_WarnOnceMetricExporter`
    gives per process. Only records logged inside our wrapper's call to the SDK
    exporter, on its thread (the SDK logs synchronously there), are held back: the
    same loggers' lines for the application's own metric exporters pass untouched."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(_INSIDE_OUR_EXPORT, "active", False):
            return True
        _METRICS_LAST[0] = record.getMessage()[:300]
        return False


#: Set while _WarnOnceMetricExporter calls the SDK exporter, on that thread.
_INSIDE_OUR_EXPORT = threading.local()


_METRICS_WARNED = [False]
_METRICS_LAST = [""]
_METRICS_LOCK = threading.Lock()
_METRICS_FILTER = _MetricsWarnedOnce()
_METRIC_LOGGERS = ("opentelemetry.exporter.otlp.proto.http.metric_exporter",
                   "opentelemetry.exporter.otlp.proto.grpc.exporter")


class _WarnOnceMetricExporter(MetricExporter):
    """Wraps the OTLP metric exporter: a failed export (refused, unreachable, or an
    exception) is reported once per process, on the ``cupellation`` logger, with the
    SDK exporter's own words, which are otherwise kept out of the logs."""

    def __init__(self, exporter: MetricExporter) -> None:
        super().__init__(preferred_temporality=exporter._preferred_temporality,
                         preferred_aggregation=exporter._preferred_aggregation)
        self._exporter = exporter
        for name in _METRIC_LOGGERS:
            logger = logging.getLogger(name)
            if _METRICS_FILTER not in logger.filters:
                logger.addFilter(_METRICS_FILTER)

    def export(self, metrics_data: Any, timeout_millis: float = 10_000,
               **kwargs: Any) -> MetricExportResult:
        _METRICS_LAST[0] = ""
        _INSIDE_OUR_EXPORT.active = True
        try:
            result = self._exporter.export(metrics_data, timeout_millis=timeout_millis,
                                           **kwargs)
        except Exception as exc:
            result, why = MetricExportResult.FAILURE, f"{type(exc).__name__}: {exc}"
        else:
            why = _METRICS_LAST[0] or "the backend refused them or could not be reached"
        finally:
            _INSIDE_OUR_EXPORT.active = False
        if result is not MetricExportResult.SUCCESS:
            with _METRICS_LOCK:
                first = not _METRICS_WARNED[0]
                _METRICS_WARNED[0] = True
            if first:
                _logger.warning("cupellation: exporting metrics over OTLP failed (%s); "
                                "further failures are not reported. Metrics are sent only "
                                "when asked (setup_otlp(metrics=True) or "
                                "OTEL_METRICS_EXPORTER=otlp)", why)
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        try:
            return bool(self._exporter.force_flush(timeout_millis=timeout_millis))
        except Exception:
            return False

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        try:
            self._exporter.shutdown(timeout_millis=timeout_millis, **kwargs)
        except Exception:
            _logger.debug("metric exporter shutdown raised", exc_info=True)


def _check(compression: str | None, timeout: float | None) -> None:
    if compression is not None and compression.strip().lower() not in _COMPRESSIONS:
        raise ValueError(f"compression must be one of {_COMPRESSIONS}, not {compression!r}")
    if timeout is not None and timeout <= 0:
        raise ValueError(f"timeout must be positive seconds, not {timeout!r}")


def otlp_target(*, protocol: str | None = None, endpoint: str | None = None,
                ) -> tuple[OtlpProtocol, str]:
    """Where :func:`setup_otlp` (and :func:`otlp_span_exporter`) send spans with these
    arguments: the traces protocol and the endpoint, each from the argument, else the
    standard variables (``OTEL_EXPORTER_OTLP_TRACES_*``, then ``OTEL_EXPORTER_OTLP_*``),
    else the defaults. The one place the CLI's messages learn it from. Never warns
    (:func:`setup_otlp` does, for an unsupported protocol)."""
    chosen = _protocol(protocol, "TRACES", warn=False)
    if endpoint:
        return chosen, endpoint
    for name in (OTLP_TRACES_ENDPOINT_ENV_VAR, OTLP_ENDPOINT_ENV_VAR):
        value = (read(name) or "").strip()
        if value:
            return chosen, value
    return chosen, DEFAULT_GRPC_ENDPOINT if chosen == "grpc" else DEFAULT_HTTP_ENDPOINT


def _protocol(argument: str | None, signal: _Signal, *, warn: bool = True) -> OtlpProtocol:
    if argument is not None:
        if argument not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, not {argument!r}")
        return argument
    for name in (_PROTOCOL_VARS[signal], OTLP_PROTOCOL_ENV_VAR):
        raw = (read(name) or "").strip().lower()
        if not raw:
            continue
        if raw == "grpc":
            return "grpc"
        if raw == "http/protobuf":
            return "http/protobuf"
        if warn:
            _logger.warning("ignoring %s=%r: supported protocols are %s; using %s",
                            name, raw, ", ".join(PROTOCOLS), DEFAULT_PROTOCOL)
        return DEFAULT_PROTOCOL
    return DEFAULT_PROTOCOL


def _env_timeout() -> float:
    """The traces export timeout the variables set, else the default."""
    for name in (OTLP_TRACES_TIMEOUT_ENV_VAR, OTLP_TIMEOUT_ENV_VAR):
        raw = (read(name) or "").strip()
        if raw:
            try:
                value = float(raw)
            except ValueError:
                return DEFAULT_TIMEOUT_SECONDS
            return value if value > 0 else DEFAULT_TIMEOUT_SECONDS
    return DEFAULT_TIMEOUT_SECONDS


def _resource(service_name: str | None,
              extra: Mapping[str, str | bool | int | float] | None) -> Resource:
    # OTEL_SERVICE_NAME, else OTEL_RESOURCE_ATTRIBUTES' service.name, as the SDK reads them
    name = service_name or resolve_service(None) or DEFAULT_SERVICE_NAME
    attributes: dict[str, str | bool | int | float] = dict(extra or {})
    attributes[SERVICE_NAME] = name
    if environment_used():
        return Resource.create(attributes)  # merges OTEL_RESOURCE_ATTRIBUTES under ours
    # Resource.create would read OTEL_RESOURCE_ATTRIBUTES itself: build it whole instead.
    return Resource({TELEMETRY_SDK_LANGUAGE: "python", TELEMETRY_SDK_NAME: "opentelemetry",
                     TELEMETRY_SDK_VERSION: sdk_version, **attributes})


def _explicit(protocol: OtlpProtocol, endpoint: str | None, timeout: float | None,
              compression: str | None) -> tuple[str | None, float | None, str | None]:
    """The endpoint, timeout and compression an SDK exporter is given: as passed, or,
    with environment reading off (``cupellation.settings.use_environment(False)``), the
    defaults themselves, so that the SDK exporter reads no variable for them."""
    if environment_used():
        return endpoint, timeout, compression
    return (endpoint or (DEFAULT_GRPC_ENDPOINT if protocol == "grpc" else DEFAULT_HTTP_ENDPOINT),
            DEFAULT_TIMEOUT_SECONDS if timeout is None else timeout, compression or "none")


def _interval(millis: float | None) -> float | None:
    """The metric export interval: as passed; with environment reading off, the
    SDK's default itself (None lets the SDK read OTEL_METRIC_EXPORT_INTERVAL)."""
    if millis is None and not environment_used():
        return _DEFAULT_METRIC_INTERVAL_MILLIS
    return millis


def _headers(headers: Mapping[str, str] | None, signal: _Signal) -> dict[str, str] | None:
    """Environment headers with ``headers`` merged over them; None if neither has any
    (the SDK exporter then reads the environment itself)."""
    if not headers:
        return None
    raw = read(_HEADERS_VARS[signal]) or read(OTLP_HEADERS_ENV_VAR) or ""
    merged = {key.lower(): value for key, value in parse_env_headers(raw, liberal=True).items()}
    merged.update({key.lower(): value for key, value in headers.items()})
    return merged


def _http_url(endpoint: str | None, path: str) -> str | None:
    if endpoint is None:
        return None
    return f"{endpoint.removesuffix('/')}/{path}"


def _span_exporter(protocol: OtlpProtocol, endpoint: str | None,
                   headers: Mapping[str, str] | None, timeout: float | None,
                   compression: str | None) -> SpanExporter:
    merged = _headers(headers, "TRACES")
    endpoint, timeout, compression = _explicit(protocol, endpoint, timeout, compression)
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter as GrpcSpanExporter,
        )

        return GrpcSpanExporter(endpoint=endpoint, headers=merged, timeout=timeout,
                                compression=_grpc_compression(compression))
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
        OTLPSpanExporter as HttpSpanExporter,
    )

    return HttpSpanExporter(endpoint=_http_url(endpoint, HTTP_TRACES_PATH), headers=merged,
                            timeout=timeout, compression=_http_compression(compression))


def _metric_exporter(protocol: OtlpProtocol, endpoint: str | None,
                     headers: Mapping[str, str] | None, timeout: float | None,
                     compression: str | None) -> MetricExporter:
    merged = _headers(headers, "METRICS")
    endpoint, timeout, compression = _explicit(protocol, endpoint, timeout, compression)
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (  # noqa: PLC0415
            OTLPMetricExporter as GrpcMetricExporter,
        )

        return GrpcMetricExporter(endpoint=endpoint, headers=merged, timeout=timeout,
                                  compression=_grpc_compression(compression))
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # noqa: PLC0415
        OTLPMetricExporter as HttpMetricExporter,
    )

    return HttpMetricExporter(endpoint=_http_url(endpoint, HTTP_METRICS_PATH),
                              headers=merged, timeout=timeout,
                              compression=_http_compression(compression))


def _log_exporter(protocol: OtlpProtocol, endpoint: str | None,
                  headers: Mapping[str, str] | None, timeout: float | None,
                  compression: str | None) -> LogRecordExporter:
    merged = _headers(headers, "LOGS")
    endpoint, timeout, compression = _explicit(protocol, endpoint, timeout, compression)
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (  # noqa: PLC0415
            OTLPLogExporter as GrpcLogExporter,
        )

        return GrpcLogExporter(endpoint=endpoint, headers=merged, timeout=timeout,
                               compression=_grpc_compression(compression))
    from opentelemetry.exporter.otlp.proto.http._log_exporter import (  # noqa: PLC0415
        OTLPLogExporter as HttpLogExporter,
    )

    return HttpLogExporter(endpoint=_http_url(endpoint, HTTP_LOGS_PATH), headers=merged,
                           timeout=timeout, compression=_http_compression(compression))


def _http_compression(name: str | None) -> HttpCompression | None:
    if name is None:
        return None
    from opentelemetry.exporter.otlp.proto.http import Compression  # noqa: PLC0415

    return Compression(name.strip().lower())


def _grpc_compression(name: str | None) -> GrpcCompression | None:
    if name is None:
        return None
    from grpc import Compression  # noqa: PLC0415

    return {"none": Compression.NoCompression, "gzip": Compression.Gzip,
            "deflate": Compression.Deflate}[name.strip().lower()]
