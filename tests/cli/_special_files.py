"""Special files for tests, made in a temporary folder: never the machine's own null
or full device (the tests run as root, and a rename over a real device would break
the machine for everything run after it)."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

#: Linux's character device numbers: (1, 3) discards writes, (1, 7) fails them with ENOSPC.
NULL_DEVICE = (1, 3)
FULL_DEVICE = (1, 7)


def make_device(folder: Path, name: str, numbers: tuple[int, int]) -> Path:
    """A character device ``name`` in ``folder`` (``mknod``; the suite runs as root,
    as the README's test command does)."""
    path = folder / name
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(*numbers))
    except PermissionError:
        pytest.fail("these tests make device files with mknod and must run as root "
                    "(the README's test command does)")
    return path


def make_null(folder: Path, name: str = "null") -> Path:
    """A device that discards what is written to it (a null device)."""
    return make_device(folder, name, NULL_DEVICE)


def make_full(folder: Path, name: str = "full") -> Path:
    """A device whose every write fails with ENOSPC (a full device)."""
    return make_device(folder, name, FULL_DEVICE)


def is_char_device(path: Path) -> bool:
    """True when ``path`` itself is still a character device."""
    return stat.S_ISCHR(os.lstat(path).st_mode)


def _release(thread: threading.Thread, path: Path, flags: int) -> None:
    """Unblock ``thread`` if it still waits in ``open`` on the FIFO ``path``: open the
    other end without blocking (``flags``) and, for a reader's end, drain what the
    writer sends until the thread ends. Opening with O_NONBLOCK never waits for a
    partner, so a thread that has just finished cannot leave this waiting."""
    for _ in range(3000):
        if not thread.is_alive():
            return
        try:
            descriptor = os.open(path, flags | os.O_NONBLOCK)
        except OSError:  # ENXIO: no reader has it open yet
            thread.join(0.01)
            continue
        try:
            while flags == os.O_RDONLY and thread.is_alive():
                with suppress(BlockingIOError):
                    os.read(descriptor, 1 << 16)
                thread.join(0.01)
        finally:
            os.close(descriptor)  # a writer's end: closed at once, the reader sees EOF
        return


@contextmanager
def fifo_reader(path: Path) -> Iterator[list[bytes]]:
    """A FIFO at ``path`` with a thread reading it to its end; the list holds what
    was read once the block exits."""
    os.mkfifo(path)
    received: list[bytes] = []

    def read() -> None:
        with open(path, "rb") as handle:
            received.append(handle.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    try:
        yield received
    finally:
        _release(thread, path, os.O_WRONLY)  # nobody opened it for writing
        thread.join(timeout=30)


@contextmanager
def fifo_writer(path: Path, data: bytes) -> Iterator[None]:
    """A FIFO at ``path`` with a thread writing ``data`` into it once a reader opens it."""
    os.mkfifo(path)

    def write() -> None:
        try:
            with open(path, "wb") as handle:
                handle.write(data)
        except BrokenPipeError:  # the reader stopped early: fine for these tests
            pass

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    try:
        yield
    finally:
        _release(thread, path, os.O_RDONLY)  # nobody opened it for reading
        thread.join(timeout=30)
