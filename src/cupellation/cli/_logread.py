"""What ``audit``, ``report`` and ``why`` share: reading logs with a progress bar,
safe terminal text, and one-line errors."""

from __future__ import annotations

import argparse
import gzip
import os
import re
import sys
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import IO, Any

from ..exceptions import CupelError
from ..logs import LogReader, ReadStats, read_runs
from ._runfilters import FilteredReader, filters_given
from ._storeread import add_store_arguments, read_store

__all__ = [
    "EXIT_CODES_HELP",
    "NOTHING_FOUND",
    "OK",
    "READ_ERRORS",
    "USAGE",
    "UsageError",
    "add_log_arguments",
    "check_sources",
    "is_trace_file",
    "open_reader",
    "read_failure",
    "reason_text",
    "safe",
    "read_words",
    "stats_lines",
    "unreadable_sources",
]

OK = 0
NOTHING_FOUND = 1
USAGE = 2

EXIT_CODES_HELP = (
    "exit status: 0 success; 1 nothing found (no run in the logs or time window, the run "
    "id is not there, no run considered a matching item); 2 bad usage or input that "
    "cannot be read whole (a missing file, a corrupt gzip stream; one line on standard "
    "error); 130 interrupted; 141 standard output closed early."
)

#: What reading a source can raise besides the library's own errors: a corrupt or
#: truncated gzip stream (``zlib.error``, ``EOFError``, ``gzip.BadGzipFile``), an
#: I/O error.
READ_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error)

#: Reads smaller than this show no progress bar.
_PROGRESS_MIN_BYTES = 4 << 20


class UsageError(Exception):
    """A problem with the command line or the input: one line on stderr, exit 2."""


def add_log_arguments(parser: argparse.ArgumentParser, *, service: bool = True) -> None:
    """``LOG...`` (or ``--store URL``) and the options every log-reading command takes
    (``service``: add ``--service``, for commands without their own)."""
    parser.add_argument("logs", nargs="*", metavar="LOG",
                        help="log files (JSON lines or gzip; a rotated set is read from its "
                             "base name, oldest backup first); '-' reads standard input")
    add_store_arguments(parser, service=service)
    parser.add_argument("--no-rotated", action="store_true",
                        help="read only the files named, not their rotated backups")
    parser.add_argument("--no-progress", action="store_true",
                        help="never show a progress bar (it shows only on a terminal)")


def check_sources(paths: Sequence[str]) -> None:
    """Raise :class:`UsageError` for a path that cannot be read."""
    if list(paths).count("-") > 1:
        raise UsageError("standard input ('-') can be read once")
    for path in paths:
        if path == "-":
            continue
        if os.path.isdir(path):
            raise UsageError(f"{path} is a directory, not a log file")
        if not os.path.exists(path) and not _has_backups(path):
            raise UsageError(f"cannot read {path}: no such file")
        if os.path.exists(path) and not os.access(path, os.R_OK):
            raise UsageError(f"cannot read {path}: permission denied")


def _has_backups(path: str) -> bool:
    directory, base = os.path.split(os.path.abspath(path))
    try:
        return any(re.fullmatch(re.escape(base) + r"\.\d+(\.gz)?", name)
                   for name in os.listdir(directory or "."))
    except OSError:
        return False


def read_failure(exc: BaseException, stats: ReadStats | None) -> str:
    """One line for an error raised while reading, naming the source being read."""
    where = f"{stats.sources[-1]}: " if stats is not None and stats.sources else ""
    if isinstance(exc, EOFError):
        problem = "the compressed data ends early (truncated gzip)"
    elif isinstance(exc, OSError):
        problem = exc.strerror or str(exc) or type(exc).__name__
        if exc.filename and not where:
            where = f"{exc.filename}: "
    elif isinstance(exc, zlib.error):
        problem = f"corrupt compressed data ({exc})"
    else:
        problem = str(exc) or type(exc).__name__
    return f"{where}cannot be read whole: {problem}"


def unreadable_sources(stats: ReadStats) -> str | None:
    """One line naming the first source that could not be opened or read to its end
    (a corrupt or truncated gzip stream), or None when every source was read whole."""
    errors = stats.source_errors
    if not errors:
        return None
    more = f" (and {len(errors) - 1} more unreadable source(s))" if len(errors) > 1 else ""
    return f"{errors[0]}{more}"


@contextmanager
def open_reader(args: argparse.Namespace, sources: Sequence[str | IO[bytes]] | None = None,
                **options: Any) -> Iterator[LogReader]:
    """``read_runs`` over ``sources`` (default ``args.logs``), with a rich progress
    bar on stderr when both output streams are terminals and the read is long; with
    ``--store URL``, the runs the command's filters select from the store."""
    store = getattr(args, "store", None)
    if store is not None:
        if args.logs:
            raise UsageError("give LOG files or --store URL, not both")
        with read_store(args, store, options, UsageError) as reader:
            yield reader
        return
    filters = filters_given(args)
    if filters:  # the store's SQL filters; for files, the same test on each run read
        with _open_files(args, sources, **options) as reader:
            yield FilteredReader(reader, filters)  # type: ignore[misc]
        return
    with _open_files(args, sources, **options) as reader:
        yield reader


@contextmanager
def _open_files(args: argparse.Namespace, sources: Sequence[str | IO[bytes]] | None,
                **options: Any) -> Iterator[LogReader]:
    if not args.logs:
        raise UsageError("no LOG given: name log files (or '-'), or --store URL")
    options.pop("select_by_item", None)  # a file is read whole either way
    check_sources(args.logs)
    if sources is None:
        sources = args.logs
    show = (not args.no_progress and sys.stderr.isatty() and sys.stdout.isatty()
            and all(isinstance(source, str) and source != "-" for source in sources))
    progress_cb: Callable[[ReadStats], object] | None = None
    progress: Any = None
    if show:
        from rich.console import Console  # noqa: PLC0415 - only on a terminal
        from rich.progress import (  # noqa: PLC0415
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        progress = Progress(TextColumn("reading logs"), BarColumn(), DownloadColumn(),
                            TimeRemainingColumn(), console=Console(stderr=True),
                            transient=True)
        task: list[Any] = []

        def progress_cb(stats: ReadStats) -> None:
            total = stats.total_bytes or 0
            if total < _PROGRESS_MIN_BYTES:
                return
            if not task:
                progress.start()
                task.append(progress.add_task("read", total=total))
            progress.update(task[0], completed=stats.bytes_read)

    # Trace files (OTLP/JSON, Jaeger) among the paths: their runs come first, rebuilt
    # from the spans, then the logs' (see _traceruns).
    # (Only regular files are looked at: a FIFO or a pipe is read once, by the reader.)
    traces = [s for s in sources
              if isinstance(s, str) and os.path.isfile(s) and is_trace_file(s)]
    sources = [s for s in sources if not (isinstance(s, str) and s in traces)]
    try:
        reader = read_runs(*sources, rotated=not args.no_rotated, progress=progress_cb,
                           **options)
    except CupelError as exc:
        raise UsageError(str(exc)) from None
    if traces:
        from ._traceruns import with_trace_files  # noqa: PLC0415

        reader = with_trace_files(reader, traces, options)  # type: ignore[assignment]
    try:
        yield reader
    finally:
        if progress is not None:
            progress.stop()


def read_words(stats: ReadStats) -> str:
    """What a read went through, in the units it read: lines of logs, spans of trace
    files, or both (``"6 span(s) in 1 trace file(s)"``, ``"419 line(s)"``)."""
    parts = []
    if stats.trace_files:
        parts.append(f"{stats.spans:,} span(s) in {stats.trace_files:,} trace file(s)")
    if stats.lines or not stats.trace_files:
        parts.append(f"{stats.lines:,} line(s)")
    return " and ".join(parts)


def stats_lines(stats: ReadStats, *, limit: int = 10) -> list[str]:
    """Human lines about what was not read cleanly (empty when all was)."""
    lines = []
    if stats.damaged_lines:
        lines.append(f"{stats.damaged_lines} damaged line(s):")
        lines.extend(f"  {safe(str(d))}" for d in stats.damaged[:limit])
        if stats.damaged_lines > limit:
            lines.append(f"  ... and {stats.damaged_lines - limit} more")
    if stats.future_schema_lines:
        lines.append(f"{stats.future_schema_lines} line(s) of a newer event schema "
                     "(not read: upgrade cupellation)")
    if stats.late_records:
        lines.append(f"{stats.late_records} record(s) arrived after their run had ended "
                     "(ignored)")
    lines.extend(safe(error) for error in stats.source_errors)
    return lines


_VISIBLE_CONTROL = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def safe(text: str, limit: int | None = None) -> str:
    """``text`` with control and format characters (escape sequences, bidi
    overrides, line separators) shown as escapes, optionally clipped."""
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable() or ch == " ":
            out.append(ch)
        elif ch in _VISIBLE_CONTROL:
            out.append(_VISIBLE_CONTROL[ch])
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else
                       f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out)


def reason_text(wire: Mapping[str, Any], width: int = 60) -> str:
    """A reason's wire mapping as one terminal-safe line: ``Name(field=value, ...)``
    (each value clipped to ``width``), or the bare name when it has no fields."""
    data = ", ".join(f"{k}={safe(str(v), width)}" for k, v in wire.items() if k != "reason")
    return f"{wire['reason']}({data})" if data else safe(str(wire["reason"]))


def is_trace_file(path: str) -> bool:
    """True when ``path`` holds traces (OTLP/JSON with ``resourceSpans``, or Jaeger
    JSON with ``data``) rather than log lines."""
    if path == "-":
        return False
    try:
        with open(path, "rb") as raw:
            head = raw.read(2)
            raw.seek(0)
            if head == b"\x1f\x8b":
                with gzip.open(raw) as unzipped:
                    sample = unzipped.read(1 << 16)
            else:
                sample = raw.read(1 << 16)
    except (OSError, EOFError, zlib.error):
        return False
    text = sample.lstrip()
    if not text.startswith(b"{"):
        return False
    first = text.split(b"\n", 1)[0]
    return (b'"resourceSpans"' in first
            or re.match(rb'\{\s*"(resourceSpans|data)"\s*:\s*\[', text) is not None)
