"""Spans from the command line: ``--otlp`` (the standard ``OTEL_EXPORTER_OTLP_*``
variables, through ``cupellation_exporters.setup_otlp``) and the demo's trace
file (OTLP/JSON lines); and library warnings as single lines on stderr."""

from __future__ import annotations

import base64
import binascii
import contextlib
import importlib
import io
import json
import logging
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib.metadata import entry_points
from typing import Any, Final

from ..otel import SpanCollector
from ..settings import resolve_service
from ._common import CliError, safe
from ._tracelinks import RootIds, trace_lines

__all__ = [
    "CLI_SERVICE",
    "OTLP_INSTALL_HINT",
    "Otlp",
    "TraceFile",
    "WarningLines",
    "add_otlp_options",
    "cli_service",
    "current_warnings",
    "one_line_warnings",
]

OTLP_INSTALL_HINT = ("--otlp needs the cupellation-exporters package: pip install "
                     "cupellation-exporters (in a checkout: pip install -e exporters)")
_TIERS = ("StageOnly", "StageAndExclusions", "Full")
_CAPTURES = ("none", "hash", "full")
#: The command's own warnings (a child of the ``cupellation`` logger, whose warnings
#: the command shows as single lines).
_CLI_LOGGER = logging.getLogger("cupellation.cli")


#: The service the CLI's runs are recorded under when nothing names one (the name
#: ``setup_otlp`` gives its resource by default, so spans and files agree).
CLI_SERVICE: Final = "cupellation"


def add_otlp_options(parser: Any, *, default_capture: str | None) -> None:
    """``--otlp``, ``--otlp-tier``, ``--otlp-content`` and ``--service``."""
    parser.add_argument("--service", metavar="NAME", default=None,
                        help="the service recorded with the run (run_started's service, the "
                             "Collector's ServiceName) and the --otlp resource's service.name "
                             f"(default: OTEL_SERVICE_NAME, else service.name in "
                             f"OTEL_RESOURCE_ATTRIBUTES, else {CLI_SERVICE})")
    parser.add_argument("--otlp", action="store_true",
                        help="also send the run's spans and metrics over OTLP to the endpoint "
                             "the standard OTEL_EXPORTER_OTLP_* variables name (default "
                             "http://localhost:4318, HTTP/protobuf); needs "
                             "cupellation-exporters")
    parser.add_argument("--otlp-tier", choices=_TIERS, default="Full", metavar="TIER",
                        help="how much --otlp sends: StageOnly, StageAndExclusions or Full "
                             "(default Full: every decision, so 'cupellation report' can "
                             "rebuild the run from the backend's export)")
    capture = ("default: CUPELLATION_CAPTURE_CONTENT, else none" if default_capture is None
               else f"default {default_capture}")
    parser.add_argument("--otlp-content", choices=_CAPTURES, default=default_capture,
                        metavar="CAPTURE",
                        help=f"item content in the spans: none, hash or full ({capture})")


def cli_service(args: Any) -> str:
    """The service a run of ``select`` or ``demo`` records: ``--service``, else the
    environment (:func:`~cupellation.settings.resolve_service`), else :data:`CLI_SERVICE`.
    A blank ``--service`` is bad input."""
    named = getattr(args, "service", None)
    if named is not None and not named.strip():
        raise CliError(f"--service: {safe(repr(named))} is empty: name the service")
    return resolve_service(named) or CLI_SERVICE


def _endpoint(protocol: str) -> str:
    """Where the spans go (the exporters' otlp_target: the OTLP variables are read in
    one place)."""
    return str(load_exporters().otlp_target(protocol=protocol or None)[1])


class _Gather(logging.Handler):
    """Keeps the export's own warnings (the SDK's retries and failures, the
    exporters' drop notice) for one summary line instead of a line each.
    ``muffle`` is the filter that takes the exporters' records (logged on the
    ``cupellation`` logger from files under ``folder``) away from other handlers."""

    def __init__(self, folder: str) -> None:
        super().__init__(logging.WARNING)
        self.folder = folder
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            lines = record.getMessage().strip().splitlines()
            if lines:
                self.messages.append(lines[0])

    def muffle(self, record: logging.LogRecord) -> bool:
        """False (drop) for the exporters' own records, which are kept here instead."""
        if self.folder and record.pathname.startswith(self.folder):
            if record.levelno >= logging.WARNING:
                self.emit(record)
            return False
        return True


#: The entry-point group a telemetry backend registers in (cupellation-exporters
#: registers ``otlp``): the CLI's ``export``, ``--otlp`` and trace files use it.
EXPORTERS_GROUP = "cupellation.exporters"


def load_exporters() -> Any:
    """The telemetry backend the ``cupellation.exporters`` entry point names (the
    cupellation-exporters distribution), or None when none is installed. The CLI
    never imports that distribution by name: it depends on this one, not the reverse."""
    for entry in entry_points(group=EXPORTERS_GROUP, name="otlp"):
        try:
            return entry.load()
        except ImportError:
            return None
    return None


class Otlp:
    """The ``--otlp`` providers and their SpanCollector; ``close()`` shuts them down
    (bounded by the export timeout) and sums up a failed export in one line."""

    def __init__(self, tier: str, content: str | None, service: str | None = None) -> None:
        exporters = load_exporters()
        if exporters is None:
            raise CliError(OTLP_INSTALL_HINT)
        folder = os.path.dirname(getattr(exporters, "__file__", "") or "")
        self._gather = _Gather(folder + os.sep if folder else "")
        logging.getLogger("opentelemetry").addHandler(self._gather)
        logging.getLogger("cupellation").addFilter(self._gather.muffle)
        self._closed = False
        try:
            self.providers = exporters.setup_otlp(service_name=service)
        except (ValueError, ImportError) as exc:
            self._detach()
            raise CliError(f"--otlp: {safe(str(exc), 300)}") from None
        self.endpoint = _endpoint(str(getattr(self.providers, "protocol", "")))
        # The runs' trace and run ids, to say where they went (see close).
        self._roots = RootIds()
        self.providers.tracer_provider.add_span_processor(self._roots)
        self.collector = SpanCollector(tracer_provider=self.providers.tracer_provider,
                                       meter_provider=self.providers.meter_provider,
                                       tier=tier, content_capture=content,
                                       service=service)

    def _detach(self) -> None:
        logging.getLogger("opentelemetry").removeHandler(self._gather)
        logging.getLogger("cupellation").removeFilter(self._gather.muffle)

    def close(self) -> None:
        """Flush and shut the providers down; one warning line if the export failed."""
        if self._closed:
            return
        self._closed = True
        try:
            self.providers.shutdown()
        finally:
            self._detach()
        dropped = int(getattr(self.providers, "dropped_spans", 0) or 0)
        messages = self._gather.messages
        first = f": {messages[0][:200]}" if messages else ""
        # Through the command's warning lines: shown when the command ends, unless it
        # ends with bad input (then its one line is the error).
        if dropped:
            _CLI_LOGGER.warning("--otlp: export to %s failed (%d span(s) dropped)%s",
                                self.endpoint, dropped, first)
        elif messages:
            _CLI_LOGGER.warning("--otlp%s", first)
        else:  # (after a failed export there is no trace to point to)
            _print_lines(trace_lines(self.endpoint, self._roots.roots))


def _print_lines(lines: Sequence[str]) -> None:
    """``lines`` on standard error (nothing when it is gone)."""
    stream = sys.stderr
    if stream is None or not lines:
        return
    with contextlib.suppress(OSError, ValueError):
        stream.write("".join(line + "\n" for line in lines))
        stream.flush()


# -- the demo's trace file -----------------------------------------------------------


def _hex_ids(entry: dict[str, Any]) -> None:
    for key in ("traceId", "spanId", "parentSpanId"):
        value = entry.get(key)
        if isinstance(value, str) and value:
            with contextlib.suppress(binascii.Error, ValueError):
                entry[key] = base64.b64decode(value, validate=True).hex()


def _otlp_json_line(spans: Sequence[Any]) -> str:
    """Spans as one line of OTLP/JSON: the OTLP exporters' own protobuf encoder, then
    protobuf's JSON mapping with trace and span ids as hex (as OTLP/JSON wants)."""
    from google.protobuf import json_format  # noqa: PLC0415 - optional
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import (  # noqa: PLC0415
        encode_spans,
    )

    document: dict[str, Any] = json_format.MessageToDict(
        encode_spans(spans), use_integers_for_enums=True, preserving_proto_field_name=False)
    for resource in document.get("resourceSpans", ()):
        for scope in resource.get("scopeSpans", ()):
            for span in scope.get("spans", ()):
                _hex_ids(span)
                for link in span.get("links", ()):
                    _hex_ids(link)
    document.setdefault("resourceSpans", [])
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False) + "\n"


class TraceFile:
    """A run's spans kept in memory (an SDK TracerProvider, Full tier, full content),
    then written as one line of OTLP/JSON: by ``cupellation_exporters``' span file
    exporter when it offers one, else encoded here the same way.

    ``TraceFile.create()`` returns None (and ``why_not`` says why) when the
    OpenTelemetry SDK or the OTLP encoder is not installed.
    """

    why_not: str = ""

    def __init__(self, service: str = CLI_SERVICE) -> None:
        from opentelemetry.sdk.resources import Resource  # noqa: PLC0415 - optional
        from opentelemetry.sdk.trace import SpanLimits, TracerProvider  # noqa: PLC0415
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: PLC0415
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: PLC0415
            InMemorySpanExporter,
        )

        self._memory = InMemorySpanExporter()
        limits = SpanLimits(max_span_attributes=10_000, max_events=100_000,
                            max_event_attributes=10_000, max_attributes=10_000)
        self._provider = TracerProvider(
            resource=Resource.create({"service.name": service}), span_limits=limits)
        self._provider.add_span_processor(SimpleSpanProcessor(self._memory))
        self.collector = SpanCollector(tracer_provider=self._provider, tier="Full",
                                       content_capture="full")
        self.writer = "cupellation"

    @classmethod
    def create(cls, service: str = CLI_SERVICE) -> TraceFile | None:
        """A TraceFile, or None when the optional packages are missing."""
        try:
            importlib.import_module("opentelemetry.sdk.trace")
            importlib.import_module("google.protobuf.json_format")
            importlib.import_module("opentelemetry.exporter.otlp.proto.common.trace_encoder")
        except ImportError as exc:
            cls.why_not = (f"the trace file needs {exc.name or 'the OpenTelemetry SDK'}: pip "
                           "install cupellation-exporters")
            return None
        return cls(service)

    def text(self) -> str:
        """The spans recorded so far as OTLP/JSON lines ('' when there are none)."""
        self._provider.force_flush()
        spans = self._memory.get_finished_spans()
        self._provider.shutdown()
        if not spans:
            return ""
        exporter_class = _file_exporter_class()
        if exporter_class is not None:
            buffer = io.StringIO()
            exporter = exporter_class(buffer)
            try:
                result = exporter.export(spans)
            finally:
                exporter.shutdown()
            if getattr(result, "name", "SUCCESS") == "SUCCESS" and buffer.getvalue():
                self.writer = f"cupellation_exporters.{exporter_class.__name__}"
                return buffer.getvalue()
        return _otlp_json_line(spans)


def _file_exporter_class() -> Any:
    """``cupellation_exporters``' OTLP/JSON span file exporter, if it offers one."""
    exporters = load_exporters()
    if exporters is None:
        return None
    for name in getattr(exporters, "__all__", ()):
        if "span" in name.lower() and "file" in name.lower() and "exporter" in name.lower():
            return getattr(exporters, name, None)
    return None


# -- logging ---------------------------------------------------------------------------


class WarningLines(logging.Handler):
    """Each distinct warning once, as one line (``cupellation: warning: ...``, no
    traceback, control characters escaped), kept until the command ends: printed
    then, unless the command ends with bad input (status 2), whose one line on
    standard error is the error itself."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self._seen: set[str] = set()
        self._lock_lines = threading.Lock()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage().strip().splitlines()
            text = message[0] if message else record.name
            text = text.removeprefix("cupellation: ")
            level = "error" if record.levelno >= logging.ERROR else "warning"
            with self._lock_lines:
                if text in self._seen:
                    return
                self._seen.add(text)
                self.lines.append(f"cupellation: {level}: {safe(text, 300)}")
        except Exception:  # a logging handler never raises
            return

    def print(self) -> None:
        """Write the warnings kept so far to standard error, once."""
        with self._lock_lines:
            lines, self.lines = self.lines, []
        stream = sys.stderr
        if stream is None or not lines:
            return
        try:
            stream.write("".join(line + "\n" for line in lines))
            stream.flush()
        except (OSError, ValueError):  # standard error is gone
            return


_CURRENT: list[WarningLines] = []


def current_warnings() -> WarningLines | None:
    """The handler of the innermost :func:`one_line_warnings` block, if any (a command
    adds it to the loggers of the libraries it drives, such as OpenTelemetry's)."""
    return _CURRENT[-1] if _CURRENT else None


@contextmanager
def one_line_warnings(*names: str) -> Iterator[WarningLines]:
    """Keep the warnings of the named loggers as single lines while inside; the
    caller prints them (:meth:`WarningLines.print`) or drops them."""
    handler = WarningLines()
    loggers = [logging.getLogger(name) for name in names]
    for logger in loggers:
        logger.addHandler(handler)
    _CURRENT.append(handler)
    try:
        yield handler
    finally:
        _CURRENT.remove(handler)
        for logger in loggers:
            logger.removeHandler(handler)
