"""The audit log: the event stream as JSON lines in a file, safe for many
threads and processes, with size-based rotation and gzip."""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import gzip
import logging
import os
import shutil
import stat
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path

from opentelemetry import trace

from ..events import (
    ContentCapture,
    PipelineEvent,
    RunCompleted,
    RunFailed,
    TraceDetailLevel,
    resolve_capture,
    stamp_service,
)
from ..events._lines import RunLineEncoder
from ..exceptions import InvalidTypeError, InvalidValueError
from ..settings import check_service, resolve_digest_key, resolve_service

__all__ = ["AuditLog"]

_logger = logging.getLogger("cupellation")

#: A run's lines are held back until its end, or until they reach this size.
_PENDING_LIMIT = 1 << 20
_APPEND = os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
#: Read access too, to see whether the file ends with a whole line; write-only
#: when the file's permissions allow no more.
_OPEN_FLAGS = os.O_RDWR | _APPEND
_WRITE_ONLY_FLAGS = os.O_WRONLY | _APPEND
_ALL_LOGS: weakref.WeakSet[AuditLog] = weakref.WeakSet()


def _open_log(path: str) -> int:
    try:
        return os.open(path, _OPEN_FLAGS, 0o644)
    except PermissionError:
        return os.open(path, _WRITE_ONLY_FLAGS, 0o644)


class AuditLog:
    """A collector that appends every event of every run to a JSON-lines file.

    Each line is exactly ``event_to_json(event)`` (after the content-capture
    policy): the events' flat form, readable with :func:`read_runs`, ``jq`` or
    any log shipper. One instance may serve any number of threads, and any
    number of processes may write the same file::

        audit = AuditLog("selections.jsonl", max_bytes=50_000_000, backup_count=9)
        pipeline.run(candidates, budget, audit)   # or FanOutCollector(audit, ...)

    **Whole lines, never torn.** A run's lines are gathered while it runs and
    written with one ``os.write`` on an ``O_APPEND`` descriptor when it ends
    (``run_completed`` or ``run_failed``), or earlier in 1 MiB pieces for very
    large runs, under a per-instance lock and an ``fcntl`` lock on the file
    (on ``<path>.lock`` when rotating) that every AuditLog writing the file
    takes. The kernel appends each write at the end of the file in one piece,
    so lines of concurrent runs, threads and processes never interleave inside
    a line, and nothing is buffered in the process once a run has returned
    (``fsync=True`` also forces it to disk). A process killed mid-write can
    leave at most one unterminated last line, which the reader counts as
    damaged; the next write starts on a new line, so every complete line
    stays readable. Lines of a run whose process died before its end are
    simply absent or partial, and the reader reports such a run as incomplete.

    **A full disk loses lines, never the file's shape.** A write that fails
    (``ENOSPC``, ``EDQUOT``, ``EIO``, a short write) is undone under the same
    lock: the file is cut back to where that write began, so no half line
    stays behind and no other writer's line is touched. The lines are counted
    in :attr:`lost_lines` (and :attr:`lost_bytes`), and the loss is reported
    once, as one warning on the ``cupellation`` logger when writes start to
    fail, never as a traceback per event; the run being recorded is not
    affected, and later writes go through as soon as there is room again.

    **Rotation** (``max_bytes > 0`` and ``backup_count > 0``, as in
    :class:`logging.handlers.RotatingFileHandler`): before a write that would
    take the file past ``max_bytes``, it is renamed to ``<path>.1`` (older
    backups shift to ``.2`` ... ``.<backup_count>``; the oldest is deleted)
    and, with ``compress``, gzipped to ``<path>.1.gz``. Several processes may
    rotate the same file: every write and every rotation holds an ``fcntl``
    lock on ``<path>.lock``, and a writer whose descriptor no longer names
    ``<path>`` (another process rotated it) reopens before writing, so no line
    goes to a renamed file and no two processes rotate at once. The lock is
    advisory and local: other programs writing the file, and network file
    systems without ``flock``, are not covered; compression happens under the
    lock, so writers wait for it (keep ``max_bytes`` moderate). Without
    rotation, external rotation (``logrotate``'s rename) is still followed:
    the file is reopened when ``<path>`` names another file.

    ``content_capture``: ``full`` (the default: the audit log exists to
    rebuild every decision, content included), ``hash`` or ``none``; when not
    given, the ``CUPELLATION_CAPTURE_CONTENT`` environment variable decides (an
    invalid value warns once and ``full`` applies). The policy is recorded in
    each run's ``run_started``.

    **The run digest.** Each run's ``run_completed`` (or ``run_failed``) line
    carries ``digest``: the SHA-256 of the run's lines as written (the end line
    without the member), which :func:`~cupellation.logs.read_runs` recomputes, so
    a changed, lost, repeated or reordered line is reported. It detects
    corruption, not tampering: anyone who can edit the file can recompute a
    SHA-256. With ``digest_key`` (or the ``CUPELLATION_DIGEST_KEY`` environment
    variable) it is an HMAC-SHA256, which only the key's holders can make.

    **The service.** Each run's ``run_started`` line names the service that ran it
    (``service``), as the OpenTelemetry Collector's ``ServiceName`` column would:
    the run's :class:`~cupellation.RunInfo` ``service`` when given, else
    ``service=`` here, else the global SDK tracer provider's resource
    ``service.name``, else ``OTEL_SERVICE_NAME``, else ``service.name`` in
    ``OTEL_RESOURCE_ATTRIBUTES`` (resolved at each run's start; see
    :func:`~cupellation.settings.resolve_service`); with none of them, no service.
    """

    def __init__(self, path: str | os.PathLike[str], *, max_bytes: int = 0,
                 backup_count: int = 5, compress: bool = True,
                 content_capture: ContentCapture | str | None = None,
                 detail_level: TraceDetailLevel | str | int = TraceDetailLevel.FULL,
                 fsync: bool = False, digest_key: bytes | str | None = None,
                 service: str | None = None) -> None:
        for name, value in (("max_bytes", max_bytes), ("backup_count", backup_count)):
            if type(value) is not int:
                raise InvalidTypeError(name, value, "an integer")
            if value < 0:
                raise InvalidValueError(name, value, "must be >= 0")
        if not isinstance(path, str | os.PathLike):
            raise InvalidTypeError("path", path, "a file path")
        if not os.fspath(path):  # Path("") is the current folder, not a file
            raise InvalidValueError("path", path, "must not be empty")
        self._path = os.fspath(Path(path).absolute())
        self._max_bytes = max_bytes
        self._backup_count = backup_count
        self._compress = bool(compress)
        self._fsync = bool(fsync)
        self._encoder = RunLineEncoder(resolve_capture(content_capture, ContentCapture.FULL),
                                       resolve_digest_key(digest_key))
        self._detail_level = TraceDetailLevel.parse(detail_level)
        self._service = check_service(service)
        self._pending: dict[str, list[bytes]] = {}
        self._pending_size: dict[str, int] = {}
        self._lock = threading.Lock()
        self._fd = -1
        self._lock_fd = -1
        self._pid = -1
        self._closed = False
        self._lost_lines = 0
        self._lost_bytes = 0
        self._failing = False
        with self._lock:
            self._open()  # fail now, in the caller, if the file cannot be opened
        _ALL_LOGS.add(self)

    # -- collector ----------------------------------------------------------------------

    @property
    def is_enabled(self) -> bool:
        return not self._closed

    @property
    def detail_level(self) -> TraceDetailLevel:
        return self._detail_level

    @property
    def path(self) -> str:
        """The file written (absolute)."""
        return self._path

    @property
    def content_capture(self) -> ContentCapture:
        """The policy applied to every line."""
        return self._encoder.capture

    @property
    def rotates(self) -> bool:
        """True when the file rotates by size."""
        return self._max_bytes > 0 and self._backup_count > 0

    @property
    def lost_lines(self) -> int:
        """Lines that could not be written (a full disk, an I/O error), in all."""
        return self._lost_lines

    @property
    def lost_bytes(self) -> int:
        """Bytes of the lines counted in :attr:`lost_lines`."""
        return self._lost_bytes

    def record(self, events: Sequence[PipelineEvent], /) -> None:
        """Encode ``events``; write the run's lines when it ends."""
        if not events:
            return
        data = self._encoder.lines(stamp_service(events, self._run_service))
        run_id = events[0].run_id
        last = events[-1]
        pending = self._pending.get(run_id)
        if isinstance(last, RunCompleted | RunFailed):
            if pending is not None:
                pending.append(data)
                data = b"".join(pending)
                del self._pending[run_id]
                self._pending_size.pop(run_id, None)
            self._write(data)
            return
        if pending is None:
            self._pending[run_id] = [data]
            self._pending_size[run_id] = len(data)
            return
        pending.append(data)
        size = self._pending_size[run_id] = self._pending_size[run_id] + len(data)
        if size >= _PENDING_LIMIT:
            del self._pending[run_id]
            del self._pending_size[run_id]
            self._write(b"".join(pending))

    @property
    def service(self) -> str | None:
        """The service a run that names none is recorded under, were it to start now
        (``service=``, else the provider's resource, else the environment)."""
        return self._run_service()

    def _run_service(self) -> str | None:
        """The service recorded for a run that names none (see the class docstring)."""
        return resolve_service(self._service, trace.get_tracer_provider())

    def flush(self) -> None:
        """Write the lines of runs that have not ended yet (they stay correct: the
        run's later lines follow in later writes)."""
        pending = self._pending
        for run_id in list(pending):
            lines = pending.pop(run_id, None)
            self._pending_size.pop(run_id, None)
            if lines:
                self._write(b"".join(lines))

    def close(self) -> None:
        """Flush, then close the file; the collector is disabled afterwards."""
        if self._closed:
            return
        self.flush()
        with self._lock:
            self._closed = True
            self._close_fds()

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        rotation = (f", max_bytes={self._max_bytes}, backup_count={self._backup_count}"
                    if self.rotates else "")
        return (f"AuditLog({self._path!r}{rotation}, "
                f"content_capture={self.content_capture.value!r})")

    # -- writing --------------------------------------------------------------------------

    def _open(self) -> None:
        self._fd = _open_log(self._path)
        if self.rotates:
            self._lock_fd = os.open(self._path + ".lock", _WRITE_ONLY_FLAGS, 0o644)
        self._pid = os.getpid()

    def _close_fds(self) -> None:
        for fd in (self._fd, self._lock_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._fd = self._lock_fd = -1

    def _write(self, data: bytes) -> None:
        with self._lock:
            if self._closed:
                raise InvalidValueError("audit_log", self._path, "is closed")
            try:
                if self._pid != os.getpid():
                    # A forked child: the descriptors (and the flock they carry) are
                    # shared with the parent; take our own.
                    self._fd = self._lock_fd = -1
                    self._open()
                if self.rotates:
                    fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
                    try:
                        self._follow()
                        size = os.fstat(self._fd).st_size
                        if size > 0 and size + len(data) > self._max_bytes:
                            self._rotate()
                        self._append(data)
                    finally:
                        fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                else:
                    self._follow()
                    # The file itself is the lock: another writer's line cannot land
                    # between a failed write and the cut that undoes it.
                    locked = _lock(self._fd)
                    try:
                        self._append(data)
                    finally:
                        if locked:
                            fcntl.flock(self._fd, fcntl.LOCK_UN)
            except OSError as exc:
                self._count_loss(data, exc)
                return
            self._failing = False

    def _count_loss(self, data: bytes, error: OSError) -> None:
        """Count lines that could not be written; warn once when writes start failing."""
        lines = data.count(b"\n")
        self._lost_lines += lines
        self._lost_bytes += len(data)
        if self._failing:
            return
        self._failing = True
        _logger.warning(
            "cupellation: audit log %s: cannot write (%s); %d lines lost so far. Lines are "
            "counted in AuditLog.lost_lines while writes fail, and written again as soon as "
            "there is room; the file holds only whole lines.", self._path,
            error.strerror or type(error).__name__, self._lost_lines)

    def _follow(self) -> None:
        """Reopen when ``path`` no longer names the open file (rotated or removed)."""
        try:
            current = os.stat(self._path)
        except FileNotFoundError:
            current = None
        mine = os.fstat(self._fd)
        if current is None or (current.st_ino, current.st_dev) != (mine.st_ino, mine.st_dev):
            # Open the new one first: a failure leaves the old descriptor valid.
            fd = _open_log(self._path)
            os.close(self._fd)
            self._fd = fd

    def _append(self, data: bytes) -> None:
        """Append ``data`` whole, or leave the file as it was.

        Called with the file locked. On a regular file, a write that fails part
        way is undone by cutting the file back to its size before the write
        (the lock keeps other writers out meanwhile), and a file that does not
        end with a newline (a writer killed mid-line) gets one first, so the
        torn line stays one damaged line and ours are whole.
        """
        fd = self._fd
        info = os.fstat(fd)
        start = info.st_size if stat.S_ISREG(info.st_mode) else None
        if start and _torn_tail(fd, start):
            data = b"\n" + data
        view = memoryview(data)
        try:
            while view:
                try:
                    written = os.write(fd, view)
                except InterruptedError:
                    continue
                if written <= 0:
                    raise OSError(errno.EIO, f"could not append to {self._path}")
                view = view[written:]
        except OSError:
            if start is not None and len(view) < len(data):
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, start)
            raise
        if self._fsync:
            os.fsync(fd)

    def _backup(self, number: int) -> list[str]:
        base = f"{self._path}.{number}"
        return [base, base + ".gz"]

    def _rotate(self) -> None:
        """Shift the backups, move the file to ``.1`` (gzipped), start a new file.
        Called with the rotation lock held."""
        for name in self._backup(self._backup_count):
            _remove(name)
        for number in range(self._backup_count - 1, 0, -1):
            for old, new in zip(self._backup(number), self._backup(number + 1), strict=True):
                if os.path.exists(old):
                    os.replace(old, new)
        first = f"{self._path}.1"
        os.replace(self._path, first)
        fd = _open_log(self._path)
        os.close(self._fd)
        self._fd = fd
        if self._compress:
            temporary = first + ".gz.tmp"
            try:
                with (open(first, "rb") as source,
                      gzip.open(temporary, "wb", compresslevel=6) as out):
                    shutil.copyfileobj(source, out, 1 << 20)
                os.replace(temporary, first + ".gz")
            except OSError as exc:
                # No room to compress: the backup stays whole, uncompressed (the
                # reader takes <path>.1 as well as <path>.1.gz).
                _remove(temporary)
                _logger.warning("cupellation: audit log %s: backup %s left uncompressed (%s)",
                                self._path, first, exc.strerror or type(exc).__name__)
            else:
                os.remove(first)


def _lock(fd: int) -> bool:
    """Take an exclusive ``flock`` on ``fd``; False where the file cannot be locked
    (some special files and network file systems), where the write goes on unlocked."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        return False
    return True


def _torn_tail(fd: int, size: int) -> bool:
    """True when the file of ``size`` bytes does not end with a newline (readable
    descriptors only: a write-only one cannot tell, and is taken as whole)."""
    try:
        return os.pread(fd, 1, size - 1) != b"\n"
    except OSError:
        return False


def _remove(name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(name)


def _reset_after_fork() -> None:
    for log in list(_ALL_LOGS):
        log._lock = threading.Lock()


def _flush_all() -> None:
    for log in list(_ALL_LOGS):
        with contextlib.suppress(Exception):  # at exit there is no one left to tell
            log.flush()


os.register_at_fork(after_in_child=_reset_after_fork)
atexit.register(_flush_all)
