"""Log records: one structured record per event, for structlog or stdlib ``logging``.

A record is the events' flat mapping (:func:`~cupellation.events.event_to_dict`)
after the sink's content-capture policy, plus ``trace_id``/``span_id`` of the
OpenTelemetry span current when it was written. Its name (structlog's
``event``, stdlib's message) is ``cupel.<event type>``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import msgspec
import structlog
from opentelemetry import trace as otel_trace

from .._tracecontext import current_span_ids
from ..events import (
    ContentCapture,
    PipelineEvent,
    RunCompleted,
    RunDigest,
    RunFailed,
    RunStarted,
    TraceDetailLevel,
    UnknownEvent,
    apply_content_capture,
    event_to_dict,
    resolve_capture,
    stamp_service,
)
from ..exceptions import InvalidTypeError, InvalidValueError
from ..settings import check_service, resolve_digest_key, resolve_service

__all__ = [
    "RECORD_PREFIX",
    "STDLIB_LOGGER_NAME",
    "StructlogSink",
    "log_record",
    "record_name",
]

#: Every record's name starts with this: ``cupel.item_excluded``.
RECORD_PREFIX = "cupel."

#: The stdlib logger records go to when structlog is not configured.
STDLIB_LOGGER_NAME = "cupellation.events"

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR, "critical": logging.CRITICAL}


def record_name(event: PipelineEvent) -> str:
    """``cupel.<type>``: the record's name (structlog ``event``, stdlib message)."""
    name = event.event_type if isinstance(event, UnknownEvent) else event.type
    return RECORD_PREFIX + name


def log_record(event: PipelineEvent, capture: ContentCapture | str = ContentCapture.FULL,
               *, span_ids: tuple[str, str] | None = None) -> dict[str, Any]:
    """The fields of ``event``'s log record: its flat mapping under ``capture``,
    with ``trace_id``/``span_id`` from ``span_ids`` added to every event but
    ``run_started`` (which carries the ids of the span current when the run
    began, or none)."""
    fields = event_to_dict(apply_content_capture(event, capture))
    if span_ids is not None and not isinstance(event, RunStarted):
        fields["trace_id"], fields["span_id"] = span_ids
    return fields


_encode = msgspec.json.encode


class StructlogSink:
    """A collector that writes one structured log record per event.

    Pass it to :meth:`~cupellation.Pipeline.run` (alone or in a
    :class:`~cupellation.FanOutCollector`): creating it is how the application
    opts in, and the library writes no record without it. Each record is named
    ``cupel.<event type>`` and carries the events' flat fields (dotted keys such
    as ``item.content`` and ``reason.name``, plus ``schema``, ``type``,
    ``run_id`` and ``seq``) under the sink's content-capture policy, and
    ``trace_id``/``span_id`` of the current OpenTelemetry span when there is
    one, so a trace leads to its log lines and back.

    **Where records go.** To ``logger`` when given: a structlog logger (records
    are ``logger.<level>(name, **fields)``) or a stdlib :class:`logging.Logger`
    (``logger.log(level, name, extra=fields)``; no field clashes with a
    ``LogRecord`` attribute). Otherwise, decided at each run's start: when the
    application has configured structlog (``structlog.is_configured()``),
    ``structlog.get_logger("cupellation")``, fetched then so the application's
    configuration decides everything; when it has not, the stdlib logger
    ``cupellation.events``, which stays silent until the application configures
    stdlib logging (the ``cupellation`` logger has a ``NullHandler``). The
    library never configures structlog or logging itself: unconfigured
    structlog would print to standard output, which a library must not do.

    ``content_capture`` is ``full``, ``hash`` or ``none``; when not given, the
    ``CUPELLATION_CAPTURE_CONTENT`` environment variable decides, and without it
    ``full`` (these records are the durable per-item record of every decision;
    choose ``hash`` where content is sensitive: equal contents keep equal
    digests). ``level`` is the log level name (``info``).

    Each run's ``run_completed`` (or ``run_failed``) record carries ``digest``,
    the digest of the run's records in their canonical line form (see
    :class:`~cupellation.logs.AuditLog`), keyed with ``digest_key`` or the
    ``CUPELLATION_DIGEST_KEY`` environment variable when set.

    Each ``run_started`` record names the run's ``service``, resolved as
    :class:`~cupellation.logs.AuditLog` resolves it (``service=`` here, else the
    global SDK tracer provider's ``service.name``, else ``OTEL_SERVICE_NAME``).
    """

    __slots__ = ("_capture", "_detail_level", "_digests", "_explicit", "_key", "_level",
                 "_levelno", "_route", "_service")

    def __init__(self, logger: Any = None, *, content_capture: ContentCapture | str | None = None,
                 detail_level: TraceDetailLevel | str | int = TraceDetailLevel.FULL,
                 level: str = "info", digest_key: bytes | str | None = None,
                 service: str | None = None) -> None:
        if not isinstance(level, str) or level.lower() not in _LEVELS:
            raise InvalidValueError("level", level, "must be debug, info, warning, error or "
                                    "critical")
        if logger is not None and not isinstance(logger, logging.Logger) and not callable(
                getattr(logger, level.lower(), None)):
            raise InvalidTypeError("logger", logger,
                                   f"a structlog logger with a {level.lower()}() method or a "
                                   "logging.Logger")
        self._capture = resolve_capture(content_capture, ContentCapture.FULL)
        self._detail_level = TraceDetailLevel.parse(detail_level)
        self._level = level.lower()
        self._levelno = _LEVELS[self._level]
        self._explicit = logger
        self._route: Any = None
        self._key = resolve_digest_key(digest_key)
        self._digests: dict[str, RunDigest] = {}
        self._service = check_service(service)

    @property
    def is_enabled(self) -> bool:
        return True

    @property
    def detail_level(self) -> TraceDetailLevel:
        return self._detail_level

    @property
    def content_capture(self) -> ContentCapture:
        """The policy applied to every record."""
        return self._capture

    def _resolve(self) -> Any:
        if self._explicit is not None:
            return self._explicit
        if structlog.is_configured():
            return structlog.get_logger("cupellation")
        return logging.getLogger(STDLIB_LOGGER_NAME)

    def record(self, events: Sequence[PipelineEvent], /) -> None:
        """Write one record per event, in order."""
        events = stamp_service(events, self._run_service)
        route = self._route
        if route is None or (len(events) == 1 and isinstance(events[0], RunStarted)):
            route = self._route = self._resolve()
        span_ids = current_span_ids()
        if isinstance(route, logging.Logger):
            if not route.isEnabledFor(self._levelno):
                return
            for event in events:
                route.log(self._levelno, record_name(event),
                          extra=self._fields(event, span_ids))
            return
        method = getattr(route, self._level)
        for event in events:
            method(record_name(event), **self._fields(event, span_ids))

    @property
    def service(self) -> str | None:
        """The service a run that names none is recorded under, were it to start now
        (``service=``, else the provider's resource, else the environment)."""
        return self._run_service()

    def _run_service(self) -> str | None:
        return resolve_service(self._service, otel_trace.get_tracer_provider())

    def _fields(self, event: PipelineEvent, span_ids: tuple[str, str] | None) -> dict[str, Any]:
        """The record of ``event`` (its run's digest hashed on, and written into its end)."""
        fields = event_to_dict(apply_content_capture(event, self._capture))
        run_id = event.run_id
        digest = self._digests.get(run_id)
        if digest is None:
            digest = self._digests[run_id] = RunDigest(self._key)
        if isinstance(event, RunCompleted | RunFailed):
            fields.pop("digest", None)
            digest.update(_encode(fields) + b"\n")
            fields["digest"] = digest.hexdigest()
            del self._digests[run_id]
        else:
            digest.update(_encode(fields) + b"\n")
        if span_ids is not None and not isinstance(event, RunStarted):
            fields["trace_id"], fields["span_id"] = span_ids
        return fields

    def flush(self) -> None:
        """Nothing is held back: every record is written as its event arrives."""

    def close(self) -> None:
        """Forget the digests of runs that have not ended (their end will not come)."""
        self._digests.clear()

    def __repr__(self) -> str:
        return (f"StructlogSink(content_capture={self._capture.value!r}, "
                f"detail_level={self._detail_level.tier})")
