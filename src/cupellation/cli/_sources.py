"""Input paths read exactly once: a pipe (``<(cat events.jsonl)``), a FIFO or standard
input is opened once, its format is told from a prefix kept in a buffer, and the
same stream (prefix first) is handed to the reader. Reopening a pipe would find
it drained (the run's start lost) or, for a FIFO, wait for a writer that never
comes. A regular file is handed on by name, so that its rotated backups are
read with it."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import sys
import zlib
from dataclasses import dataclass
from typing import IO, Literal

from ..files import read_prefix
from ._logread import UsageError, safe

__all__ = ["InputSource", "SourceKind", "close_sources", "open_sources", "read_whole"]

#: How much of an input is looked at to tell a trace from log lines.
SNIFF_BYTES = 1 << 16
_GZIP_MAGIC = b"\x1f\x8b"
_TRACE_START = re.compile(
    rb'\[?\s*\{\s*"(resourceSpans|data|batches|traces)"\s*:\s*\['  # OTLP, Jaeger, Phoenix, MLflow
    rb'|\[?\s*\{\s*"(trace|result|info)"\s*:\s*\{')  # Tempo v2, Jaeger v3, Trace.to_json()

_REPORT_START = re.compile(rb'\{\s*"events"\s*:\s*\[')  # a SelectionReport's JSON

#: What an input holds.
SourceKind = Literal["log", "trace", "report"]


@dataclass(frozen=True, slots=True)
class InputSource:
    """One input named on the command line.

    ``source`` is what to give the log reader: the path itself for a regular
    file (read again from its start, with its rotated backups), else the open
    stream, its sniffed prefix first. ``name`` is how messages name it.
    """

    name: str
    kind: SourceKind
    source: str | IO[bytes]
    owned: bool


def _looks_like_protobuf(head: bytes) -> bool:
    """True for the start of OTLP protobuf (a TracesData: field 1, resource_spans,
    whose first member is a resource or scope_spans) holding bytes no text has."""
    if len(head) < 3 or head[0] != 0x0A:
        return False
    at = 1
    while at < len(head) and head[at] & 0x80:  # the length's varint
        at += 1
    if at + 1 >= len(head) or head[at + 1] not in (0x0A, 0x12):
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return any(byte < 0x09 for byte in head)


def _looks_like_trace(head: bytes) -> bool:
    """True for the start of a trace: OTLP/JSON (``resourceSpans``), Jaeger's JSON
    (``data``; v3's ``result``), Tempo's (``batches``, ``trace``), Phoenix's pages
    (``data``), MLflow's (``traces``, ``info``), or OTLP protobuf."""
    if head[:2] == _GZIP_MAGIC:
        try:
            head = zlib.decompressobj(wbits=31).decompress(head, SNIFF_BYTES)
        except zlib.error:  # corrupt: the log reader names the file and the problem
            return False
    if _looks_like_protobuf(head):
        return True
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text.startswith((b"{", b"[")):
        return False
    first = text.split(b"\n", 1)[0]
    return b'"resourceSpans"' in first or _TRACE_START.match(text) is not None


def _kind(head: bytes) -> SourceKind:
    """What a source holds, from its first bytes."""
    if _looks_like_trace(head):
        return "trace"
    if _REPORT_START.match(head.lstrip(b"\xef\xbb\xbf \t\r\n")) is not None:
        return "report"
    return "log"


def _open_once(path: str) -> tuple[str, IO[bytes], bool]:
    if path == "-":
        stdin = sys.stdin
        buffer = getattr(stdin, "buffer", None) if stdin is not None else None
        if buffer is None:
            raise UsageError("cannot read standard input: it is closed")
        return "<stdin>", buffer, False
    try:
        return path, open(path, "rb"), True
    except FileNotFoundError:
        raise UsageError(f"cannot read {safe(path)}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{safe(path)} is a directory, not a log file") from None
    except OSError as exc:
        raise UsageError(f"cannot read {safe(path)}: {safe(exc.strerror or str(exc))}") \
            from None


def _open_source(path: str) -> InputSource:
    if path != "-":
        try:
            regular = stat.S_ISREG(os.stat(path).st_mode)
        except OSError:
            regular = False  # missing (rotated backups only) or unreadable: the reader says
        if regular or not os.path.exists(path):
            try:
                with open(path, "rb") as handle:
                    head = handle.read(SNIFF_BYTES)
            except OSError:
                head = b""
            return InputSource(path, _kind(head), path, owned=False)
    name, stream, owned = _open_once(path)
    try:
        # Standard input belongs to the process: closing the replay must not close it.
        head, replay = read_prefix(stream, SNIFF_BYTES, close=owned)
    except OSError as exc:
        if owned:
            stream.close()
        raise UsageError(f"cannot read {safe(name)}: {safe(exc.strerror or str(exc))}") \
            from None
    return InputSource(name, _kind(head), replay, owned=True)


def open_sources(paths: list[str]) -> list[InputSource]:
    """Each path opened (when it is not a regular file) and sniffed, once. Raises
    :class:`UsageError` for a path that cannot be opened; the caller closes the
    sources with :func:`close_sources`."""
    if paths.count("-") > 1:
        raise UsageError("standard input ('-') can be read once")
    opened: list[InputSource] = []
    try:
        for path in paths:
            opened.append(_open_source(path))
    except BaseException:
        close_sources(opened)
        raise
    return opened


def close_sources(sources: list[InputSource]) -> None:
    """Close the streams :func:`open_sources` opened."""
    for source in sources:
        if source.owned and not isinstance(source.source, str):
            with contextlib.suppress(OSError):
                source.source.close()


def read_whole(source: InputSource) -> bytes:
    """All of a source's bytes, gunzipped when they are gzip. Raises
    :class:`UsageError` naming the source when it cannot be read or unzipped."""
    try:
        if isinstance(source.source, str):
            with open(source.source, "rb") as handle:
                data = handle.read()
        else:
            data = source.source.read()
        if data[:2] == _GZIP_MAGIC:
            import gzip  # noqa: PLC0415 - only for gzip input

            data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        problem = ("the compressed data ends early (truncated gzip)"
                   if isinstance(exc, EOFError) else
                   getattr(exc, "strerror", None) or str(exc) or type(exc).__name__)
        raise UsageError(f"cannot read {safe(source.name)}: {safe(problem)}") from None
    return data
