"""The special files tests use instead of the machine's own (tests/conftest.py): a null
and a full device made with mknod, a FIFO, a full disk made by injecting ENOSPC and
short writes, and the guard that stops a run that broke the machine's own devices."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from conftest import FullDisk, broken_devices


def test_the_null_device_discards_writes_and_stays_a_device(null_device: Path) -> None:
    """null_device is the 1,3 character device inside the test's folder: writing to it
    keeps nothing, reading it gives nothing, and it is still that device after."""
    assert null_device.parent.name.startswith("test_the_null_device")
    null_device.write_text("gone")
    assert null_device.read_bytes() == b""
    info = null_device.lstat()
    assert stat.S_ISCHR(info.st_mode)
    assert info.st_rdev == os.makedev(1, 3)


def test_the_full_device_refuses_every_write(full_device: Path) -> None:
    """full_device is the 1,7 character device: a write fails with ENOSPC."""
    assert full_device.lstat().st_rdev == os.makedev(1, 7)
    with full_device.open("wb", buffering=0) as handle, pytest.raises(
            OSError, match="No space left") as caught:
        handle.write(b"x")
    assert caught.value.errno == errno.ENOSPC


def test_the_fifo_is_a_named_pipe(fifo: Path) -> None:
    """fifo is a named pipe in the test's own folder."""
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_full_disk_takes_what_fits_then_refuses_until_freed(
        full_disk: FullDisk, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """On the full disk, os.write takes the bytes that fit (a short write), then raises
    ENOSPC and counts it; after free() writes succeed again. Files elsewhere are
    unaffected throughout."""
    full_disk.room = 5
    fd = os.open(tmp_path / "log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    elsewhere = os.open(tmp_path_factory.mktemp("other") / "log", os.O_WRONLY | os.O_CREAT)
    try:
        assert os.write(fd, b"abcdefgh") == 5
        with pytest.raises(OSError, match="No space left") as caught:
            os.write(fd, b"ijk")
        assert caught.value.errno == errno.ENOSPC
        assert full_disk.refused == 1
        assert os.write(elsewhere, b"fine") == 4
        full_disk.free()
        assert os.write(fd, b"XY") == 2
    finally:
        os.close(fd)
        os.close(elsewhere)
    assert (tmp_path / "log").read_bytes() == b"abcdeXY"


def test_the_guard_names_a_device_that_is_gone_or_no_longer_a_device(
        tmp_path: Path, null_device: Path) -> None:
    """broken_devices says nothing about a healthy device, and names a path that became
    a regular file, one that is the wrong device, and one that is missing."""
    regular = tmp_path / "was-null"
    regular.write_text("")
    assert broken_devices(((str(null_device), 1, 3),)) == []
    assert broken_devices(((str(regular), 1, 3), (str(null_device), 1, 7),
                           (str(tmp_path / "gone"), 1, 3))) == [
        f"{regular} is no longer the 1,3 character device",
        f"{null_device} is no longer the 1,7 character device",
        f"{tmp_path / 'gone'} is missing"]
    assert broken_devices() == []
