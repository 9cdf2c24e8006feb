"""File exporters: the event stream as JSON lines, a SelectionReport as one JSON
document replaced atomically, and spans as OTLP/JSON lines (the OpenTelemetry
Collector's file format).

Each has ``export``, ``force_flush`` and ``shutdown`` like an SDK ``SpanExporter``
and returns the SDK's ``SpanExportResult`` from ``export``; none raises on the
telemetry path (a write that fails is a ``FAILURE``, counted in
``failed_exports`` and logged once on the ``cupellation`` logger). The event and
report exporters are also trace collectors (``record(events)``), so they can be
passed to ``Pipeline.run`` directly or inside a ``FanOutCollector``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import io
import json
import logging
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any, Final

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from cupellation import ReportBuilder, SelectionReport, TraceDetailLevel
from cupellation.events import (
    ContentCapture,
    ItemEventBatch,
    PipelineEvent,
    RunCompleted,
    RunFailed,
)
from cupellation.exceptions import InvalidTypeError, InvalidValueError
from cupellation.files import write_whole_file
from cupellation.logs import AuditLog

__all__ = [
    "RUN_ID_FIELD",
    "EventLogExporter",
    "OtlpJsonFileSpanExporter",
    "ReportFileExporter",
    "otlp_json_document",
    "otlp_json_line",
]

_logger = logging.getLogger("cupellation")

RUN_ID_FIELD: Final = "{run_id}"
"""Put in a :class:`ReportFileExporter` path, replaced by each report's run id."""

_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)


class _Failures:
    """Counts failed exports and logs the first one, once."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._lock = threading.Lock()
        self.count = 0

    def add(self, problem: str) -> None:
        with self._lock:
            self.count += 1
            first = self.count == 1
        if first:
            with contextlib.suppress(Exception):  # a broken handler must not break export
                _logger.warning("cupellation: %s failed (%s); further failures are counted "
                                "in failed_exports and not logged again", self._what, problem)


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


# -- the event stream -------------------------------------------------------------------------


class EventLogExporter:
    """The event stream as JSON lines (one ``event_to_json`` line per event), through a
    :class:`cupellation.logs.AuditLog`: whole lines, many threads and processes,
    rotation and gzip as it does them.

    As a collector (``Pipeline.run(..., EventLogExporter(path))``) it writes each
    run's lines when the run ends; ``export(events)`` writes events recorded earlier
    (any number of runs; a run without its end is written at once). The options are
    :class:`~cupellation.logs.AuditLog`'s; its content capture defaults to
    ``full``. Opening the file happens here and raises ``OSError`` if it cannot be
    opened; after that nothing raises.
    """

    def __init__(self, path: str | os.PathLike[str], *, max_bytes: int = 0,
                 backup_count: int = 5, compress: bool = True,
                 content_capture: ContentCapture | str | None = None,
                 detail_level: TraceDetailLevel | str | int = TraceDetailLevel.FULL,
                 fsync: bool = False) -> None:
        self._log = AuditLog(path, max_bytes=max_bytes, backup_count=backup_count,
                             compress=compress, content_capture=content_capture,
                             detail_level=detail_level, fsync=fsync)
        self._failures = _Failures(f"writing events to {self._log.path}")

    @property
    def audit_log(self) -> AuditLog:
        """The AuditLog doing the writing."""
        return self._log

    @property
    def path(self) -> str:
        """The file written (absolute)."""
        return self._log.path

    @property
    def failed_exports(self) -> int:
        """Deliveries (``record`` or ``export`` calls) whose lines were not written."""
        return self._failures.count

    @property
    def is_enabled(self) -> bool:
        """True until shut down."""
        return self._log.is_enabled

    @property
    def detail_level(self) -> TraceDetailLevel:
        """What the pipeline should record for this collector."""
        return self._log.detail_level

    def record(self, events: Sequence[PipelineEvent], /) -> None:
        """The collector protocol: one delivery of a running pipeline. Never raises."""
        try:
            self._log.record(events)
        except Exception as error:
            self._failures.add(_describe(error))

    def export(self, events: Iterable[PipelineEvent | ItemEventBatch]) -> SpanExportResult:
        """Write recorded events (each run's in one write when its end is among them).
        ``FAILURE`` if any line could not be written."""
        runs: dict[str, list[PipelineEvent]] = {}
        try:
            for entry in events:
                if isinstance(entry, ItemEventBatch):
                    if entry:
                        runs.setdefault(entry.run_id, []).extend(entry)
                else:
                    runs.setdefault(entry.run_id, []).append(entry)
        except Exception as error:  # a broken iterable: nothing is written
            self._failures.add(_describe(error))
            return SpanExportResult.FAILURE
        ok = True
        for run_events in runs.values():
            try:
                self._log.record(tuple(run_events))
                if not isinstance(run_events[-1], RunCompleted | RunFailed):
                    self._log.flush()
            except Exception as error:
                self._failures.add(_describe(error))
                ok = False
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Write the lines of runs that have not ended yet; False if that failed."""
        try:
            self._log.flush()
        except Exception as error:
            self._failures.add(_describe(error))
            return False
        return True

    def shutdown(self) -> None:
        """Flush and close the file; later calls do nothing."""
        try:
            self._log.close()
        except Exception as error:
            self._failures.add(_describe(error))

    def __repr__(self) -> str:
        return f"EventLogExporter({self._log!r})"


# -- reports ------------------------------------------------------------------------------------


class ReportFileExporter:
    """Each run's SelectionReport as a JSON document (:meth:`SelectionReport.to_json`),
    written to a temporary file in the same folder and renamed over ``path``
    (``os.replace``), so a reader never sees half a report
    (:func:`cupellation.files.write_whole_file`: a symbolic link's target is
    replaced and the link kept; a device or FIFO is written in place, never
    renamed over).

    ``path`` may hold ``{run_id}`` (one file per run); without it each report
    replaces the previous one (the latest run). As a collector it folds each run's
    events with :class:`~cupellation.ReportBuilder` and writes the report when the
    run ends; ``export(report, run_id=...)`` writes a report built elsewhere.
    ``fsync=True`` also forces the file and the rename to disk.
    """

    def __init__(self, path: str | os.PathLike[str], *, indent: int | None = 2,
                 detail_level: TraceDetailLevel | str | int = TraceDetailLevel.FULL,
                 fsync: bool = False) -> None:
        if not isinstance(path, str | os.PathLike):
            raise InvalidTypeError("path", path, "a file path")
        if not os.fspath(path):  # Path("") is the current folder, not a file
            raise InvalidValueError("path", path, "must not be empty")
        if indent is not None and (type(indent) is not int or indent < 0):
            raise InvalidValueError("indent", indent, "must be a non-negative integer or None")
        self._path = os.fspath(Path(path).absolute())
        self._indent = indent
        self._detail_level = TraceDetailLevel.parse(detail_level)
        self._fsync = bool(fsync)
        self._lock = threading.Lock()
        self._builders: dict[str, ReportBuilder] = {}
        self._closed = False
        self._failures = _Failures(f"writing a report to {self._path}")
        self.written = 0
        """Reports written so far."""

    @property
    def path(self) -> str:
        """The path (template) reports are written to."""
        return self._path

    @property
    def failed_exports(self) -> int:
        """Reports that could not be written."""
        return self._failures.count

    @property
    def is_enabled(self) -> bool:
        """True until shut down."""
        return not self._closed

    @property
    def detail_level(self) -> TraceDetailLevel:
        """What the pipeline should record for this collector (Full by default: a
        report folded from less says it is incomplete)."""
        return self._detail_level

    def path_for(self, run_id: str | None) -> Path:
        """Where the report of run ``run_id`` goes."""
        if RUN_ID_FIELD in self._path:
            if not run_id:
                raise ValueError(f"{self._path} needs a run id")
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)
            return Path(self._path.replace(RUN_ID_FIELD, safe))
        return Path(self._path)

    def record(self, events: Sequence[PipelineEvent], /) -> None:
        """The collector protocol: fold the run's events; write its report at its end.
        Never raises."""
        try:
            if not events:
                return
            run_id = events[0].run_id
            with self._lock:
                builder = self._builders.get(run_id)
                if builder is None:
                    builder = self._builders[run_id] = ReportBuilder(run_id)
                if isinstance(events, ItemEventBatch):
                    builder.add(events)
                else:
                    for event in events:
                        builder.add(event)
                ended = isinstance(events[-1], RunCompleted | RunFailed)
                if ended:
                    del self._builders[run_id]
            if ended:
                self.export(builder.result(), run_id=run_id)
        except Exception as error:
            self._failures.add(_describe(error))

    def export(self, report: SelectionReport, *, run_id: str | None = None
               ) -> SpanExportResult:
        """Write ``report`` (``run_id`` fills ``{run_id}`` in the path); ``FAILURE`` if it
        could not be written (the previous document, if any, is left whole)."""
        if self._closed:
            self._failures.add("exporter is shut down")
            return SpanExportResult.FAILURE
        try:
            data = report.to_json(indent=self._indent).encode("utf-8")
            write_whole_file(self.path_for(run_id), data, mode=0o644, fsync=self._fsync)
        except Exception as error:
            self._failures.add(_describe(error))
            return SpanExportResult.FAILURE
        with self._lock:
            self.written += 1
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered: reports are written when their run ends."""
        return True

    def shutdown(self) -> None:
        """Stop writing; runs that have not ended are forgotten."""
        with self._lock:
            self._closed = True
            self._builders.clear()

    def __repr__(self) -> str:
        return f"ReportFileExporter({self._path!r})"


# -- spans as OTLP/JSON -------------------------------------------------------------------------

#: Id fields that OTLP/JSON writes as hex (protobuf's JSON mapping writes base64).
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _hex_ids(entry: dict[str, Any]) -> None:
    for key in _ID_FIELDS:
        value = entry.get(key)
        if isinstance(value, str) and value:
            with contextlib.suppress(binascii.Error, ValueError):  # protobuf wrote it
                entry[key] = base64.b64decode(value, validate=True).hex()


def otlp_json_document(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """``spans`` as one OTLP/JSON traces object (``{"resourceSpans": [...]}``), as the
    OTLP/JSON encoding specifies it: encoded to protobuf by the OTLP exporters' own
    encoder, then mapped to JSON with lowerCamelCase keys, enums as integers, 64-bit
    integers as strings, and trace and span ids as lowercase hex (not base64)."""
    message = encode_spans(spans)
    document: dict[str, Any] = json_format.MessageToDict(
        message, use_integers_for_enums=True, preserving_proto_field_name=False)
    for resource in document.get("resourceSpans", ()):
        for scope in resource.get("scopeSpans", ()):
            for span in scope.get("spans", ()):
                _hex_ids(span)
                for link in span.get("links", ()):
                    _hex_ids(link)
    document.setdefault("resourceSpans", [])
    return document


#: Characters some line readers (Python's ``str.splitlines``) take as line ends, written
#: escaped so that a line is a line for every reader.
_LINE_BREAKING = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029",
                                "\x85": "\\u0085"})


def otlp_json_line(spans: Sequence[ReadableSpan]) -> str:
    """:func:`otlp_json_document` as one line of compact JSON (UTF-8 text, with the
    Unicode line and paragraph separators escaped), newline included."""
    text = json.dumps(otlp_json_document(spans), separators=(",", ":"),
                      ensure_ascii=False, allow_nan=False)
    return text.translate(_LINE_BREAKING) + "\n"


class OtlpJsonFileSpanExporter(SpanExporter):
    """A ``SpanExporter`` that appends each batch to a file as one line of OTLP/JSON
    (``{"resourceSpans": [...]}``): the OpenTelemetry file exporter's format, which
    the Collector's ``otlpjsonfile`` receiver ingests and
    :func:`cupellation.otel.read_trace_file` reads back.

    ``destination`` is a path (opened for appending, created if missing; each line
    goes out in one ``write`` on an ``O_APPEND`` descriptor, so lines from several
    exporters or processes never interleave) or an open text or binary stream
    (``sys.stdout``). Opening a path raises ``OSError`` here; ``export`` never raises.
    """

    def __init__(self, destination: str | os.PathLike[str] | IO[str] | IO[bytes], *,
                 fsync: bool = False) -> None:
        self._lock = threading.Lock()
        self._fsync = bool(fsync)
        self._stream: IO[str] | IO[bytes] | None = None
        self._fd = -1
        if isinstance(destination, str | os.PathLike):
            if not os.fspath(destination):  # Path("") is the current folder, not a file
                raise InvalidValueError("destination", destination, "must not be empty")
            self._name = os.fspath(Path(destination).absolute())
            self._fd = os.open(self._name, _APPEND_FLAGS, 0o644)
        else:
            if not callable(getattr(destination, "write", None)):
                raise InvalidTypeError("destination", destination,
                                       "a file path or a writable stream")
            self._stream = destination
            self._name = str(getattr(destination, "name", "<stream>"))
        self._shut_down = False
        self._failures = _Failures(f"writing OTLP/JSON to {self._name}")
        self.exported_spans = 0
        """Spans written so far."""

    @property
    def name(self) -> str:
        """The file written (absolute), or the stream's name."""
        return self._name

    @property
    def failed_exports(self) -> int:
        """Batches that could not be encoded or written."""
        return self._failures.count

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Append ``spans`` as one line; ``FAILURE`` if they could not be encoded or
        written, or after shutdown."""
        if self._shut_down:
            self._failures.add("exporter is shut down")
            return SpanExportResult.FAILURE
        if not spans:
            return SpanExportResult.SUCCESS
        try:
            data = otlp_json_line(spans).encode("utf-8")
        except Exception as error:  # a value protobuf or JSON cannot hold
            self._failures.add(_describe(error))
            return SpanExportResult.FAILURE
        try:
            with self._lock:
                if self._shut_down:
                    raise OSError("exporter is shut down")
                self._write(data)
                self.exported_spans += len(spans)
        except Exception as error:
            self._failures.add(_describe(error))
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def _write(self, data: bytes) -> None:
        stream = self._stream
        if stream is None:
            view = memoryview(data)
            while view:
                try:
                    written = os.write(self._fd, view)
                except InterruptedError:
                    continue
                if written <= 0:
                    raise OSError(f"could not append to {self._name}")
                view = view[written:]
            if self._fsync:
                os.fsync(self._fd)
            return
        if isinstance(stream, io.TextIOBase):
            stream.write(data.decode("utf-8"))
        else:
            stream.write(data)  # type: ignore[arg-type]
        stream.flush()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Lines are written by ``export`` itself; flushes a stream, syncs with ``fsync``."""
        try:
            with self._lock:
                if self._stream is not None:
                    self._stream.flush()
                elif self._fd >= 0 and self._fsync:
                    os.fsync(self._fd)
        except Exception as error:
            self._failures.add(_describe(error))
            return False
        return True

    def shutdown(self) -> None:
        """Close the file (a stream given is only flushed); later exports fail."""
        with self._lock:
            if self._shut_down:
                return
            self._shut_down = True
            if self._fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = -1
            elif self._stream is not None:
                with contextlib.suppress(Exception):
                    self._stream.flush()

    def __repr__(self) -> str:
        return f"OtlpJsonFileSpanExporter({self._name!r})"
