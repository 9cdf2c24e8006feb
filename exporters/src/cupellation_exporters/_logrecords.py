"""Runs as OpenTelemetry log records: one record per event, through the SDK's
``LoggerProvider``, so that an OpenTelemetry Collector with the ``clickhouse``
exporter stores every decision in its ``otel_logs`` table with nothing
cupellation-specific in between.

A record is the row ``cupellation store load`` writes for the same event:

- **attributes**: the event's flat mapping (:func:`cupellation.events.event_to_dict`,
  after the collector's content capture), each value with its own type (text,
  integer, double, bool, or a list of them). The Collector's exporter writes each
  as a string in ``LogAttributes`` (Go's ``AsString``: ``1.5e+21``, ``true``,
  ``["a","b"]``), which cupellation's decoders read back by the declared types;
- **body**: the event type (``item_excluded``);
- **timestamp**: the run's ``started_at`` on every record of the run, so a run is
  one point in time in the store (without a timestamp the exporter would use
  the observed time, scattering a run over the export's delays); **observed
  timestamp**: when the record was made. A record of a run whose ``run_started``
  this collector never saw carries the observed time as its timestamp too;
- **severity**: ``INFO``; **trace/span ids**: those of the span current when the
  record is emitted (the SDK takes them from the context);
- **resource**: the logger provider's (its ``service.name`` is the Collector's
  ``ServiceName``, and each ``run_started`` names the same service).

The logs SDK (``opentelemetry.sdk._logs``) is not yet stable: this module is
written against the versions ``cupellation-exporters`` pins.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import msgspec
from opentelemetry import _logs as otel_logs
from opentelemetry._logs import Logger, LoggerProvider, SeverityNumber
from opentelemetry._logs._internal import ProxyLoggerProvider

from cupellation import TraceDetailLevel, __version__
from cupellation.events import (
    ContentCapture,
    PipelineEvent,
    RunCompleted,
    RunFailed,
    RunLineEncoder,
    RunStarted,
    apply_content_capture,
    event_to_dict,
    event_type_name,
    resolve_capture,
    stamp_service,
)
from cupellation.settings import check_service, resolve_digest_key, resolve_service

__all__ = ["LOG_SCOPE_NAME", "LOG_SEVERITY", "LogRecordCollector", "log_record_attributes",
           "run_timestamp"]

_logger = logging.getLogger("cupellation")

#: The instrumentation scope of the records (the Collector's ``ScopeName``).
LOG_SCOPE_NAME: Final = "cupellation"
#: Every record's severity (``SeverityText`` ``INFO``, ``SeverityNumber`` 9).
LOG_SEVERITY: Final = SeverityNumber.INFO


def log_record_attributes(event: PipelineEvent,
                          capture: ContentCapture | str = ContentCapture.FULL
                          ) -> dict[str, Any]:
    """The attributes of ``event``'s log record: its flat mapping under ``capture``,
    every value with its natural type (lists as lists)."""
    return event_to_dict(apply_content_capture(event, capture))


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)


def run_timestamp(started: RunStarted) -> int:
    """The timestamp of every record of ``started``'s run: its ``started_at``, in
    nanoseconds since the Unix epoch (exact: no float on the way)."""
    return (started.started_at - _EPOCH) // _MICROSECOND * 1000


class LogRecordCollector:
    """A collector that emits one OpenTelemetry log record per event (see the module
    documentation for what each record holds).

    ``logger_provider`` is the application's SDK ``LoggerProvider`` (from
    :func:`~cupellation_exporters.setup_otlp` with ``logs=True``, or its own);
    without it, OpenTelemetry's global logger provider as it is at each run's start
    (unset: the collector is not enabled, and the pipeline builds no event for it).

    ``content_capture`` (``full``, ``hash`` or ``none``; default
    ``CUPELLATION_CAPTURE_CONTENT``, else ``none``, as for spans: records leave the
    process); ``detail_level`` (default ``Full``: every decision, which a store needs
    to rebuild a report); ``digest_key`` (default ``CUPELLATION_DIGEST_KEY``): each
    run's end record carries ``digest`` over the run's canonical lines, as the audit
    log's does; ``service`` names the service of runs that name none (default: the
    provider's resource ``service.name``, else ``OTEL_SERVICE_NAME``).

    Never raises into the run: a failure is logged once per run on the
    ``cupellation`` logger, and the collector records nothing more of that run.
    """

    __slots__ = ("_capture", "_closed", "_failed", "_level", "_lines", "_lock", "_logger_cache",
                 "_provider", "_service", "_starts")

    def __init__(self, *, logger_provider: LoggerProvider | None = None,
                 content_capture: ContentCapture | str | None = None,
                 detail_level: TraceDetailLevel | str | int = TraceDetailLevel.FULL,
                 digest_key: bytes | str | None = None, service: str | None = None) -> None:
        self._provider = logger_provider
        self._capture = resolve_capture(content_capture, ContentCapture.NONE)
        self._level = TraceDetailLevel.parse(detail_level)
        self._lines = RunLineEncoder(self._capture, resolve_digest_key(digest_key))
        self._service = check_service(service)
        self._starts: dict[str, int] = {}
        self._failed: set[str] = set()
        self._lock = threading.Lock()
        self._logger_cache: tuple[object, Logger] | None = None
        self._closed = False

    @property
    def is_enabled(self) -> bool:
        """True while open and a logger provider is given or set globally."""
        return not self._closed and self._current_provider() is not None

    @property
    def detail_level(self) -> TraceDetailLevel:
        """What the pipeline delivers: ``Full`` by default."""
        return self._level

    @property
    def content_capture(self) -> ContentCapture:
        """How item content appears in the records."""
        return self._capture

    @property
    def service(self) -> str | None:
        """The service a run that names none is recorded under, were it to start now."""
        return resolve_service(self._service, self._current_provider())

    def record(self, events: Sequence[PipelineEvent], /) -> None:
        """Emit one log record per event of this delivery, in order."""
        if not events:
            return
        run_id = events[0].run_id
        if run_id in self._failed:
            if isinstance(events[-1], RunCompleted | RunFailed):
                self._failed.discard(run_id)  # its end: nothing more will come
            return
        try:
            self._emit(events, run_id)
        except Exception:
            _logger.exception("cupellation: LogRecordCollector failed on run %s; it records "
                              "nothing more of that run", run_id)
            self._forget(run_id)
            self._failed.add(run_id)

    def _emit(self, events: Sequence[PipelineEvent], run_id: str) -> None:
        events = stamp_service(events, lambda: self.service)
        digest = self._lines.digest(events)
        logger = self._logger()
        for event in events:
            if type(event) is RunStarted:
                self._starts[run_id] = run_timestamp(event)
            if digest is not None and isinstance(event, RunCompleted | RunFailed):
                event = msgspec.structs.replace(event, digest=digest)  # noqa: PLW2901
            now = time.time_ns()
            timestamp = self._starts.get(run_id, now)
            if logger is not None:
                logger.emit(timestamp=timestamp, observed_timestamp=now,
                            severity_number=LOG_SEVERITY, severity_text=LOG_SEVERITY.name,
                            body=event_type_name(event),
                            attributes=log_record_attributes(event, self._capture))
        last = events[-1]
        if isinstance(last, RunCompleted | RunFailed):
            self._starts.pop(run_id, None)

    def _current_provider(self) -> LoggerProvider | None:
        provider = self._provider if self._provider is not None else (
            otel_logs.get_logger_provider())
        if isinstance(provider, otel_logs.NoOpLoggerProvider | ProxyLoggerProvider):
            return None
        return provider

    def _logger(self) -> Logger | None:
        provider = self._current_provider()
        if provider is None:
            return None
        cached = self._logger_cache
        if cached is not None and cached[0] is provider:
            return cached[1]
        with self._lock:
            logger = provider.get_logger(LOG_SCOPE_NAME, __version__)
            self._logger_cache = (provider, logger)
        return logger

    def _forget(self, run_id: str) -> None:
        self._starts.pop(run_id, None)
        self._lines.forget(run_id)

    def flush(self) -> None:
        """Nothing is held back here: each record goes to the provider as it is made
        (the provider's processor decides when it is exported)."""

    def close(self) -> None:
        """Forget the runs that have not ended; the collector is disabled afterwards.
        The logger provider is the application's: shut it down there."""
        self._closed = True
        for run_id in list(self._starts):
            self._forget(run_id)
        self._failed.clear()

    def __repr__(self) -> str:
        return (f"LogRecordCollector(content_capture={self._capture.value!r}, "
                f"detail_level={self._level.tier})")
