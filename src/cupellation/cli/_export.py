"""``cupellation export``: recorded runs sent to a trace backend (or a file) as traces.

The work is done by the telemetry backend the ``cupellation.exporters`` entry point
names: the ``cupellation-exporters`` distribution, which brings the OpenTelemetry SDK
and the OTLP exporters. This module only parses the command line and reports, so
importing it needs neither.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import math
import re
import sys
import threading
from typing import IO, TYPE_CHECKING, Any, cast

from ..exceptions import CupelError
from ._logread import (
    READ_ERRORS,
    USAGE,
    UsageError,
    check_sources,
    read_failure,
    safe,
    stats_lines,
    unreadable_sources,
)
from ._telemetry import current_warnings, load_exporters
from ._tracelinks import root_ids, trace_lines

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ["EXPORT_FAILED", "NAME", "add_export_parser", "add_parser", "run", "run_export"]

NAME = "export"
OK = 0
NOTHING_FOUND = 1
EXPORT_FAILED = 3
"""Exit status when the backend did not take every span (refused, down, timed out)."""

_TIERS = ("StageOnly", "StageAndExclusions", "Full")
_PROTOCOLS = ("http/protobuf", "grpc")
_EXPORTERS_MISSING = ("cupellation export needs the cupellation-exporters distribution "
                      "(OpenTelemetry SDK and OTLP exporters): pip install ./exporters")

_HELP_EXIT = (
    "exit status: 0 every span was taken; 1 no run found in the sources; 2 bad usage or "
    "input that cannot be read whole (one line on standard error); 3 the backend did not "
    "take every span (down, refusing, or not done within --timeout); 130 interrupted; "
    "141 standard output closed early."
)

#: The range of --timeout, in seconds: at least a millisecond, at most a day.
TIMEOUT_MIN = 0.001
TIMEOUT_MAX = 86_400.0


def _timeout_seconds(text: str) -> float:
    """``--timeout``: positive, finite seconds from 0.001 to 86,400."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or not TIMEOUT_MIN <= value <= TIMEOUT_MAX:
        raise argparse.ArgumentTypeError(
            f"must be finite seconds from {TIMEOUT_MIN:g} to {TIMEOUT_MAX:,.0f}, not {text!r}")
    return value


def add_export_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
) -> argparse.ArgumentParser:
    """Add the ``export`` sub-parser."""
    parser = subparsers.add_parser(
        NAME, help="send recorded runs to a trace backend (OTLP) or a file, as traces",
        description=(
            "Replay recorded runs as OpenTelemetry traces. SOURCE is an audit log or any log "
            "'cupellation audit' reads (JSON lines of events, gzip, rotated sets, '-' for "
            "standard input), or a trace file (OTLP/JSON, Jaeger JSON, OTLP protobuf), which "
            "is re-sent as it is. Spans keep the runs' own times (run_started.started_at and "
            "the recorded durations; a trace file's span times) and ids (a trace file's; for "
            "a log, ids derived from the run id, under the caller's span recorded in "
            "run_started when there is one), so sending the same source twice sends the "
            "same spans. --to otlp honours the OTEL_EXPORTER_OTLP_* variables (endpoint, "
            "headers, timeout, compression, protocol) and OTEL_SERVICE_NAME / "
            "OTEL_RESOURCE_ATTRIBUTES; --to file writes OTLP/JSON lines (the OpenTelemetry "
            "Collector's otlpjsonfile format)."),
        epilog=_HELP_EXIT)
    parser.add_argument("sources", nargs="+", metavar="SOURCE",
                        help="audit logs, event files or trace files")
    parser.add_argument("--to", required=True, choices=["otlp", "file"],
                        help="otlp: an OTLP endpoint; file: OTLP/JSON lines in --out")
    parser.add_argument("--out", metavar="FILE",
                        help="with --to file: the file to append to ('-': standard output)")
    parser.add_argument("--protocol", choices=_PROTOCOLS, default=None,
                        help="with --to otlp (default: OTEL_EXPORTER_OTLP_PROTOCOL, else "
                             "http/protobuf)")
    parser.add_argument("--endpoint", metavar="URL", default=None,
                        help="with --to otlp: the base URL (default: "
                             "OTEL_EXPORTER_OTLP_ENDPOINT, else localhost:4318 or 4317)")
    parser.add_argument("--header", action="append", default=[], metavar="KEY=VALUE",
                        help="with --to otlp: a header to send (repeatable), merged over "
                             "OTEL_EXPORTER_OTLP_HEADERS; e.g. x-project-name=NAME for Phoenix")
    parser.add_argument("--timeout", type=_timeout_seconds, default=None, metavar="SECONDS",
                        help="with --to otlp: the whole export, reading and sending, is "
                             "given up after SECONDS (0.001 to 86400; exit 3), and each "
                             "call to the backend too (default: no bound on the whole; each "
                             "call OTEL_EXPORTER_OTLP_TIMEOUT, else 10 s)")
    parser.add_argument("--tier", choices=_TIERS, default="Full",
                        help="what the spans carry (default Full; never more than the run "
                             "recorded). Trace files are re-sent as they are.")
    parser.add_argument("--content-capture", choices=["full", "hash", "none"], default=None,
                        help="item content in the spans (default: "
                             "CUPELLATION_CAPTURE_CONTENT, else none; never more than the "
                             "log holds)")
    parser.add_argument("--service-name", metavar="NAME", default=None,
                        help="the resource's service.name (default: OTEL_SERVICE_NAME, else "
                             "cupellation)")
    parser.add_argument("--no-rotated", action="store_true",
                        help="read only the log files named, not their rotated backups")
    parser.add_argument("--quiet", action="store_true",
                        help="print nothing but errors")
    return parser


def _fail(message: str) -> int:
    print(f"cupellation {NAME}: error: {safe(message)}", file=sys.stderr)
    return USAGE


#: An HTTP header name (RFC 9110's token).
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def _headers(pairs: list[str]) -> dict[str, str]:
    headers = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise UsageError(f"--header {safe(repr(pair))} is not KEY=VALUE")
        if not _HEADER_NAME.fullmatch(key):
            raise UsageError(f"--header {safe(repr(pair))}: {safe(repr(key))} is not an HTTP "
                             "header name (letters, digits and !#$%&'*+.^_`|~-)")
        if not value.isprintable() or any(ord(char) > 0xFF for char in value):
            raise UsageError(f"--header {safe(repr(pair))}: the value must be printable "
                             "Latin-1 text (HTTP sends header values as bytes)")
        headers[key.lower()] = value
    return headers


def _text_option(option: str, value: str | None) -> None:
    """Refuse text that is not Unicode (a name with bytes that are not UTF-8 reaches
    Python as lone surrogates): it could not be sent, and the SDK would log a
    traceback for it."""
    if value is None:
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{option} {safe(value)}: not valid UTF-8 text") from None


def _check(args: argparse.Namespace) -> None:
    _text_option("--service-name", args.service_name)
    _text_option("--endpoint", args.endpoint)
    for header in args.header:
        _text_option("--header", header)
    if args.to == "file":
        if not args.out:
            raise UsageError("--to file needs --out FILE ('-' for standard output)")
        used = [flag for flag, value in (("--protocol", args.protocol),
                                         ("--endpoint", args.endpoint),
                                         ("--header", args.header),
                                         ("--timeout", args.timeout))
                if value is not None and value != []]
        if used:
            raise UsageError(f"{', '.join(used)} apply to --to otlp only")
    elif args.out is not None:
        raise UsageError("--out applies to --to file only")
    check_sources(args.sources)


def _destination(args: argparse.Namespace) -> str:
    if args.to == "file":
        return "standard output" if args.out == "-" else str(args.out)
    exporters = load_exporters()  # the OTLP variables, read in one place
    protocol, endpoint = exporters.otlp_target(protocol=args.protocol,
                                               endpoint=args.endpoint)
    return f"{endpoint} ({protocol})"


def run_export(args: argparse.Namespace, /) -> int:
    """Replay the runs in ``args.sources``; see the parser for the exit statuses. The
    OpenTelemetry SDK's own messages (invalid settings, retries, failures) become the
    command's one-line warnings."""
    sdk_logger = logging.getLogger("opentelemetry")
    warnings = current_warnings()
    if warnings is not None:
        sdk_logger.addHandler(warnings)
    try:
        return _export(args)
    finally:
        if warnings is not None:
            sdk_logger.removeHandler(warnings)


def _export(args: argparse.Namespace) -> int:
    try:
        _check(args)
        headers = _headers(args.header)
    except UsageError as exc:
        return _fail(str(exc))
    exporters = load_exporters()
    if exporters is None:
        return _fail(_EXPORTERS_MISSING)
    stdout = _Stdout()
    try:
        resource = exporters.otlp_resource(args.service_name)
        exporter = _span_exporter(exporters, args, headers, stdout)
    except OSError as exc:
        return _fail(f"cannot write {exc.filename or args.out}: {exc.strerror or exc}")
    except ValueError as exc:
        return _fail(str(exc))
    read_spans = [0]
    roots: list[tuple[str, str]] = []

    def count(run: Any) -> None:
        read_spans[0] += len(run.spans)
        roots.extend(root_ids(run.spans))

    def send() -> Any:
        return exporters.replay(args.sources, exporter, tier=args.tier,
                                content_capture=args.content_capture, resource=resource,
                                rotated=not args.no_rotated, on_run=count)

    timed_out = False
    try:
        outcome = _within(args.timeout, send)
        if outcome is None:
            timed_out = True
            # Tell the exporter to stop retrying; the send still waiting on the backend
            # is left behind and ends with the process.
            with contextlib.suppress(Exception):
                exporter.shutdown()
            print(f"cupellation {NAME}: the export to {_destination(args)} did not finish "
                  f"within --timeout {args.timeout:g} s (the backend is slow or not "
                  f"answering; {read_spans[0]} span(s) read so far): not every span was "
                  "taken", file=sys.stderr)
            return EXPORT_FAILED
        result = outcome
    except CupelError as exc:
        return _fail(str(exc))
    except READ_ERRORS as exc:
        return _fail(read_failure(exc, None))
    finally:
        if not timed_out:
            exporter.shutdown()
    if stdout.closed_early:
        raise BrokenPipeError("standard output was closed")  # exit 141, from main
    status = _outcome(args, result)
    if args.to == "otlp" and not args.quiet:
        endpoint = exporters.otlp_target(protocol=args.protocol, endpoint=args.endpoint)[1]
        for line in trace_lines(str(endpoint), roots, headers):
            print(line, file=sys.stderr)
    return status


def _span_exporter(exporters: Any, args: argparse.Namespace, headers: dict[str, str],
                   stdout: _Stdout) -> SpanExporter:
    """The exporter ``--to`` names: the OTLP/JSON file (or standard output), or OTLP
    with what it dropped counted."""
    if args.to == "file":
        return cast("SpanExporter", exporters.OtlpJsonFileSpanExporter(
            cast("IO[str]", stdout) if args.out == "-" else args.out))
    return cast("SpanExporter", exporters.DropCountingSpanExporter(exporters.otlp_span_exporter(
        protocol=args.protocol, endpoint=args.endpoint, headers=headers or None,
        timeout=args.timeout)))


def _outcome(args: argparse.Namespace, result: Any) -> int:
    """Print what the export did (unless --quiet and all was taken); its exit status."""
    broken = unreadable_sources(result.stats)
    if broken is not None:
        return _fail(f"{broken} ({result.delivered} span(s) of the runs read before it "
                     "were taken)")
    parts = [f"{result.runs} run(s)"] if result.runs or not result.trace_files else []
    if result.trace_files:
        parts.append(f"{result.trace_files} trace file(s)")
    what = " and ".join(parts) + f" ({result.spans} spans)"
    lines = []
    if result.failed:
        lines.append(f"exported {what} to {_destination(args)}: {result.delivered} taken, "
                     f"{result.failed} NOT taken (the backend refused them, was down or "
                     "timed out" + ("; gave up sending after repeated failures)"
                                    if result.gave_up else ")"))
    else:
        lines.append(f"exported {what} to {_destination(args)}")
    lines.extend(f"skipped run {safe(run.run_id)} ({safe(run.source)}): {safe(run.problem)}"
                 for run in result.skipped[:10] if run.problem)
    if result.skipped_count > 10:
        lines.append(f"  ... and {result.skipped_count - 10} more skipped")
    if result.incomplete_count:
        shown = ", ".join(safe(run_id) for run_id in result.incomplete[:5])
        lines.append(f"{result.incomplete_count} run(s) were incomplete in the log and are "
                     f"sent as recorded: {shown}"
                     + (", ..." if result.incomplete_count > 5 else ""))
    lines.extend(stats_lines(result.stats))
    if not args.quiet or result.failed:
        for line in lines:
            print(line, file=sys.stderr)
    if not result.runs and not result.trace_files:
        if not args.quiet:
            print(f"cupellation {NAME}: no run found in the sources", file=sys.stderr)
        return NOTHING_FOUND
    return EXPORT_FAILED if result.failed else OK


class _Stdout(io.TextIOBase):
    """Standard output for ``--out -``, noting a reader that went away: the file
    exporter turns the write's BrokenPipeError into a failed export, and the
    command must still end with 141, not 3."""

    def __init__(self) -> None:
        super().__init__()
        self.closed_early = False
        self.name = "<stdout>"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        try:
            written = sys.stdout.write(text)
        except BrokenPipeError:
            self.closed_early = True
            raise
        return written if written is not None else len(text)

    def flush(self) -> None:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            self.closed_early = True
            raise


def _within(seconds: float | None, work: Any) -> Any:
    """``work()``'s result, or None when ``seconds`` passed first. The work runs in a
    daemon thread, so that a backend that trickles its answer (which no socket
    timeout notices) cannot hold the command: the thread is left behind and ends
    with the process. Its exception, if any, is raised here."""
    if seconds is None:
        return work()
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = work()
        except BaseException as exc:  # handed to the waiting thread
            box["error"] = exc

    worker = threading.Thread(target=run, name="cupellation-export", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        return None
    if "error" in box:
        raise box["error"]
    return box["result"]


#: The names the ``cupellation`` command's subcommand table expects of a module.
add_parser = add_export_parser
run = run_export
