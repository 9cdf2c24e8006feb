"""Fixtures for every test: special files made in a temporary folder, a full disk made
by injection, and a guard that stops the run if the real /dev/null or /dev/full stops
being a device.

We run as root, so a test that renames a file over ``/dev/null`` would replace the
machine's own (this happened during a probe). Tests never name the real device files
as targets: they write to ``null_device`` / ``full_device`` (character devices 1,3 and
1,7 made with mknod in ``tmp_path``), read FIFOs made with ``fifo``, and fill a disk
with ``full_disk`` rather than by mounting one (CI may not be able to mount).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

#: The machine's device files the guard watches: (path, major, minor).
REAL_DEVICES = (("/dev/null", 1, 3), ("/dev/full", 1, 7))


def _make_device(folder: Path, name: str, major: int, minor: int) -> Path:
    """A character device ``major,minor`` at ``folder/name``; fails (never skips) when
    mknod is refused: these tests run as root, as CI does."""
    path = folder / name
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    except PermissionError as error:
        pytest.fail(f"cannot make a {major},{minor} character device with mknod ({error}): "
                    "the special-file tests run as root, as CI does", pytrace=False)
    return path


@pytest.fixture
def null_device(tmp_path: Path) -> Path:
    """A null device (character device 1,3, what /dev/null is) of this test's own:
    writes vanish, reads give nothing, and replacing it harms nothing."""
    return _make_device(tmp_path, "null", 1, 3)


@pytest.fixture
def full_device(tmp_path: Path) -> Path:
    """A full device (character device 1,7, what /dev/full is) of this test's own:
    every write fails with ENOSPC."""
    return _make_device(tmp_path, "full", 1, 7)


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    """A named pipe (FIFO) in this test's folder."""
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


class FullDisk:
    """``os.write`` on descriptors of files under ``folder`` behaves as on a full
    filesystem: the remaining ``room`` bytes are written (a buffer that does not fit is
    a short write), then each write raises ENOSPC, until :meth:`free`.

    Only ``os.write`` is patched (what AuditLog uses): buffered file objects write
    through C and need their own injection."""

    def __init__(self, folder: Path, room: int,
                 real_write: Callable[[int, ReadableBuffer], int]) -> None:
        self.folder = folder.resolve()
        self.room: int | None = room
        self.refused = 0
        """How many writes raised ENOSPC."""
        self._real_write = real_write

    def free(self) -> None:
        """Space is back: writes succeed again."""
        self.room = None

    def _on_this_disk(self, fd: int) -> bool:
        try:
            target = Path(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            return False
        return target.is_relative_to(self.folder)

    def write(self, fd: int, data: ReadableBuffer) -> int:
        """The patched ``os.write``."""
        if self.room is None or not self._on_this_disk(fd):
            return self._real_write(fd, data)
        if self.room == 0:
            self.refused += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written = self._real_write(fd, memoryview(data).cast("B")[:self.room])
        self.room -= written
        return written


@pytest.fixture
def full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FullDisk:
    """``tmp_path`` on a full disk (no room left; set ``.room`` to leave some, call
    ``.free()`` to give the space back). See :class:`FullDisk`."""
    disk = FullDisk(tmp_path, room=0, real_write=os.write)
    monkeypatch.setattr(os, "write", disk.write)
    return disk


def broken_devices(devices: tuple[tuple[str, int, int], ...] = REAL_DEVICES) -> list[str]:
    """The listed paths that are not (or no longer) the character device they should be."""
    broken = []
    for path, major, minor in devices:
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            broken.append(f"{path} is missing")
            continue
        if not stat.S_ISCHR(info.st_mode) or info.st_rdev != os.makedev(major, minor):
            broken.append(f"{path} is no longer the {major},{minor} character device")
    return broken


@pytest.fixture(autouse=True)
def _real_devices_stay_devices(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test: if /dev/null or /dev/full is no longer its device, stop the
    whole run at once, naming the test and how to restore the device."""
    yield
    broken = broken_devices()
    if broken:
        restore = " && ".join(f"rm -f {path} && mknod -m 666 {path} c {major} {minor}"
                              for path, major, minor in REAL_DEVICES)
        pytest.exit(f"{request.node.nodeid} broke a device file: {'; '.join(broken)}. "
                    f"Restore it as root: {restore}", returncode=3)


@pytest.fixture(autouse=True)
def _no_span_left_current(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test: no OpenTelemetry span may be left current. A context left
    attached (a run whose spans were not closed in order) would make every later run
    a child of that span and carry its ids, failing unrelated tests far away; this
    fails the test that left it, and clears it for the next."""
    from opentelemetry import context, trace  # noqa: PLC0415 - only here

    yield
    span = trace.get_current_span()
    if span.get_span_context().is_valid:
        context.attach(context.Context())
        pytest.fail(f"{request.node.nodeid} left a span current: {span!r}", pytrace=False)


@pytest.fixture(autouse=True)
def _environment_reading_restored() -> Iterator[None]:
    """cupellation.settings' switch is process-wide: a test (or a documentation code
    block run by test_code_blocks) that turns environment reading off must not leave it
    off for the tests after it in the same worker."""
    from cupellation import settings  # noqa: PLC0415 - imported where it is restored

    used = settings.environment_used()
    yield
    settings.use_environment(used)
