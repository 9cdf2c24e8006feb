"""Where log lines come from: files (plain or gzip, with their rotated backups),
standard input and open streams, read line by line with bounded memory."""

from __future__ import annotations

import gzip
import io
import os
import re
import sys
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import IO, Any, Final

from ..exceptions import InvalidTypeError, InvalidValueError
from ._runs import ReadStats

__all__ = ["MAX_LINE_BYTES", "Source", "as_datetime", "describe_error", "expand_rotated",
           "open_source", "read_blocks"]

Source = str | os.PathLike[str] | IO[bytes] | IO[str]

#: Lines longer than this are not decoded (counted as damaged or other).
MAX_LINE_BYTES: Final = 16 << 20
_GZIP_MAGIC: Final = b"\x1f\x8b"
_BACKUP: Final = re.compile(r"\.(\d+)(\.gz)?$")


def expand_rotated(path: str) -> list[str]:
    """``path`` preceded by its rotated backups, oldest first.

    Backups are ``<path>.N`` and ``<path>.N.gz`` (N = 1, 2, ...; the highest
    is the oldest). When both forms of one number exist (a rotation stopped
    between compressing and removing), only the ``.gz`` is read.
    """
    directory, base = os.path.split(os.path.abspath(path))
    numbered: dict[int, str] = {}
    try:
        names = os.listdir(directory or ".")
    except OSError:
        names = []
    for name in names:
        if not name.startswith(base + "."):
            continue
        match = _BACKUP.fullmatch(name[len(base):])
        if match is None:
            continue
        number = int(match.group(1))
        if match.group(2) or number not in numbered:
            numbered[number] = os.path.join(directory, name)
    ordered = [numbered[n] for n in sorted(numbered, reverse=True)]
    if os.path.exists(path) or not ordered:
        ordered.append(path)
    return ordered



def open_source(source: Source, stats: ReadStats) -> tuple[str, Any, bool]:
    """(name, binary handle or None when it cannot be opened, whether we own it)."""
    if isinstance(source, str | os.PathLike):
        path = os.fspath(source)
        if path == "-":
            return "<stdin>", _binary(sys.stdin), False
        try:
            return path, open(path, "rb"), True
        except OSError as exc:
            stats.source_errors.append(f"{path}: cannot open: {describe_error(exc)}")
            return path, None, False
    name = str(getattr(source, "name", "<stream>"))
    return name, _binary(source), False


#: How much of a source is read at once.
_BLOCK: Final = 1 << 16


def _blocks(stream: Any) -> Iterator[list[bytes | None]]:
    """The lines of a binary stream, a block at a time: each line whole, with its
    newline (the last one may have none); None for a line longer than
    :data:`MAX_LINE_BYTES`, of which no more than that is held."""
    pending = b""
    overlong = False
    while True:
        block = stream.read(_BLOCK)
        if not block:
            break
        lines: list[Any] = io.BytesIO(pending + block).readlines()
        pending = lines.pop() if lines else b""
        if pending.endswith(b"\n"):
            lines.append(pending)
            pending = b""
        if overlong and lines:  # the rest of an overlong line ends here
            lines[0] = None
            overlong = False
        if len(pending) > MAX_LINE_BYTES:
            pending = b""
            overlong = True
        if lines:
            yield lines
    if overlong:
        yield [None]
    elif pending:
        yield [pending]


def read_blocks(name: str, handle: Any, stats: ReadStats,
                progress: Callable[[ReadStats], object] | None
                ) -> Iterator[list[bytes | None]]:
    """The lines of an open source (gzip recognised by its magic bytes), a block of
    them at a time; a None line marks an overlong line that was not read whole. A
    source that breaks off is noted in ``stats.source_errors``; ``progress`` is
    told after each block."""
    stats.sources.append(name)
    try:
        head = handle.peek(2)[:2] if hasattr(handle, "peek") else b""
        stream = gzip.GzipFile(fileobj=handle, mode="rb") if head == _GZIP_MAGIC else handle
        position = handle.tell() if handle.seekable() else 0
        for lines in _blocks(stream):
            yield lines
            if handle.seekable():
                now = handle.tell()
                stats.bytes_read += now - position
                position = now
            if progress is not None:
                progress(stats)
    except (OSError, EOFError, zlib.error) as exc:
        stats.source_errors.append(f"{name}: stopped reading: {describe_error(exc)}")
    finally:
        if progress is not None:
            progress(stats)


def as_datetime(value: datetime | str | None, name: str) -> datetime | None:
    """A ``since``/``until`` bound: a datetime (aware) or ISO 8601 text (naive is UTC)."""
    if value is None or isinstance(value, datetime):
        if isinstance(value, datetime) and value.tzinfo is None:
            raise InvalidValueError(name, value, "must be timezone-aware")
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z"))
                                            else text)
        except ValueError:
            raise InvalidValueError(name, value, "is not an ISO 8601 date or time") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed
    raise InvalidTypeError(name, value, "a datetime or ISO 8601 text")



def _binary(stream: Any) -> Any:
    if isinstance(stream, io.TextIOBase) or hasattr(stream, "buffer"):
        buffer = getattr(stream, "buffer", None)
        if buffer is not None:
            return buffer
        return io.BytesIO(stream.read().encode("utf-8", "surrogateescape"))
    if not hasattr(stream, "peek"):
        return io.BufferedReader(stream) if hasattr(stream, "readinto") else stream
    return stream


def describe_error(exc: BaseException) -> str:
    """An I/O or decompression error in a few words."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, EOFError):
        return "the compressed stream ends early (truncated gzip)"
    return f"{type(exc).__name__}: {exc}"

