"""Files in and out, safely with what is not a regular file.

:func:`write_whole_file` is the one way the command line and the exporters write a
document (a report, an HTML page, an event file): a reader never sees half of it,
and a device, a FIFO or a symbolic link stays what it is.

:func:`read_prefix` tells what an input holds from its first bytes without
reading it twice: a pipe or a FIFO can be read only once.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import secrets
import stat
from typing import IO, Any

__all__ = ["read_prefix", "write_whole_file"]

#: Attempts at a fresh temporary name before giving up (each is 64 random bits).
_NAME_ATTEMPTS = 100


def _write_all(descriptor: int, data: bytes, name: str) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(descriptor, view)
        except InterruptedError:
            continue
        if written <= 0:  # a short write that makes no progress: the device is full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), name)
        view = view[written:]


def _write_in_place(path: str, data: bytes) -> None:
    """A device or a FIFO: opened for writing as ``>`` would, never renamed over."""
    descriptor = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        _write_all(descriptor, data, path)
    finally:
        os.close(descriptor)


def _temporary_beside(target: str) -> tuple[int, str]:
    """A new file in ``target``'s folder, created with mode 0o666 so that the
    process's umask applies (``tempfile.mkstemp`` would make it 0o600)."""
    folder, name = os.path.split(target)
    for _ in range(_NAME_ATTEMPTS):
        temporary = os.path.join(folder, f".{name}.{secrets.token_hex(8)}.tmp")
        try:
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                                 | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666)
        except FileExistsError:
            continue
        return descriptor, temporary
    raise FileExistsError(errno.EEXIST, "no free temporary name", target)


def _replace_atomically(target: str, data: bytes, existing: os.stat_result | None,
                        mode: int | None, fsync: bool) -> None:
    descriptor, temporary = _temporary_beside(target)
    try:
        try:
            _write_all(descriptor, data, target)
            if mode is not None:
                os.fchmod(descriptor, mode)
            elif existing is not None:  # keep the replaced file's permissions and owner
                os.fchmod(descriptor, stat.S_IMODE(existing.st_mode))
                with contextlib.suppress(OSError):
                    os.fchown(descriptor, existing.st_uid, existing.st_gid)
            if fsync:
                os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    if fsync:  # the rename itself survives a crash once the folder is synced
        folder = os.open(os.path.dirname(target) or ".", os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def write_whole_file(path: str | os.PathLike[str], data: bytes, *, mode: int | None = None,
                     fsync: bool = False) -> None:
    """Make ``data`` the content of ``path``.

    - A regular file or a new path: ``data`` goes to a temporary file in the same
      folder, renamed over ``path`` (a reader sees the old content or the new,
      never part of one; an interrupted write leaves the old file whole).
    - A symbolic link: the file it finally points to is replaced that way, so
      the link stays a link.
    - A character or block device, a FIFO (or anything else that is not a
      regular file): opened for writing and written in place, as the shell's
      ``>`` does; it is never renamed over (``-o /dev/null`` run as root must
      leave ``/dev/null`` a device). A FIFO waits for its reader.
    - A folder: ``IsADirectoryError``.

    ``mode`` sets the new file's permissions; by default a replaced file keeps
    its own (and, where allowed, its owner) and a new one gets ``0o666`` less
    the umask. ``fsync=True`` forces the file and the rename to disk. Raises
    ``OSError`` (``ENOSPC`` for a full device or disk, ...); the target is left
    as it was when the temporary file could not be written whole.
    """
    name = os.fspath(path)
    try:
        existing: os.stat_result | None = os.stat(name)  # follows symbolic links
    except FileNotFoundError:
        existing = None
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name)
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        _write_in_place(name, data)
        return
    # A new path, a regular file, or a (possibly dangling) link to one: replace
    # the real file, in its own folder, so a link is kept and the rename stays
    # on one file system.
    target = os.path.realpath(name) if os.path.islink(name) else name
    _replace_atomically(target, data, existing, mode, fsync)


# -- reading once -------------------------------------------------------------------------


class _Prefixed(io.RawIOBase):
    """``prefix`` (bytes already read from ``rest``), then the rest of ``rest``."""

    def __init__(self, prefix: bytes, rest: IO[bytes], close_rest: bool) -> None:
        super().__init__()
        self._prefix = memoryview(prefix)
        self._rest = rest
        self._close_rest = close_rest
        #: The original stream's name (a path, ``<stdin>``), for messages.
        self.name = getattr(rest, "name", "<stream>")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        target = memoryview(buffer).cast("B")
        if self._prefix:
            count = min(len(target), len(self._prefix))
            target[:count] = self._prefix[:count]
            self._prefix = self._prefix[count:]
            return count
        data = self._rest.read(len(target))
        target[:len(data)] = data
        return len(data)

    def close(self) -> None:
        if self._close_rest and not self.closed:
            with contextlib.suppress(OSError):
                self._rest.close()
        super().close()


def read_prefix(stream: IO[bytes], size: int, *, close: bool = True
                ) -> tuple[bytes, io.BufferedReader]:
    """The first ``size`` bytes of ``stream`` (fewer at its end), and a stream that
    gives those bytes again and then the rest of ``stream``: a format can be told
    from the start of a pipe, a FIFO or standard input, and the whole read once.

    Closing the returned stream closes ``stream`` unless ``close=False`` (standard
    input belongs to the process).
    """
    chunks: list[bytes] = []
    count = 0
    while count < size:
        chunk = stream.read(size - count)
        if not chunk:
            break
        chunks.append(chunk)
        count += len(chunk)
    prefix = b"".join(chunks)
    return prefix, io.BufferedReader(_Prefixed(prefix, stream, close))
