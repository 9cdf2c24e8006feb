"""The audit log on a full disk: a failed or short write never leaves a torn line, the
loss is counted and reported once (not a traceback per event), and later runs are
written normally once there is room again. The disk is filled by injection (a
patched os.write for the log's own descriptor), never by mounting one."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import pytest

from cupellation import ContextBudget, ContextItem, Pipeline, PriorityScorer
from cupellation.logs import AuditLog, read_runs

PIPELINE = Pipeline(scorer=PriorityScorer())
BUDGET = ContextBudget(200, 100)
REAL_WRITE = os.write
REAL_FTRUNCATE = os.ftruncate


def _items(tag: str) -> list[ContextItem]:
    return [ContextItem(content=f"{tag}-{k}", tokens=10 + k, priority=k) for k in range(12)]


class Disk:
    """Fails writes to one file: ``short`` writes only part of the next write and then
    fails with ENOSPC (until ``room`` is set again); ``full`` fails every write
    before a byte is written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.room = True
        self.short = False
        self.zero = False
        self.failed_writes = 0

    def _ours(self, fd: int) -> bool:
        try:
            mine, target = os.fstat(fd), os.stat(self.path)
        except OSError:
            return False
        return (mine.st_ino, mine.st_dev) == (target.st_ino, target.st_dev)

    def write(self, fd: int, data: bytes | memoryview) -> int:
        if self.room or not self._ours(fd):
            return REAL_WRITE(fd, data)
        self.failed_writes += 1
        if self.zero:
            return 0
        if self.short:
            self.short = False  # half of this write lands, the rest finds no room
            return REAL_WRITE(fd, bytes(data)[:len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.fixture
def disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Disk:
    """A disk for ``tmp_path/audit.jsonl`` that can be filled."""
    disk = Disk(tmp_path / "audit.jsonl")
    monkeypatch.setattr(os, "write", disk.write)
    return disk


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "cupellation" and r.levelno >= logging.WARNING]


@pytest.mark.parametrize("rotating", [False, True])
def test_a_short_write_is_cut_back_and_the_next_run_reads_whole(
        disk: Disk, caplog: pytest.LogCaptureFixture, rotating: bool) -> None:
    """Run 1 is written; run 2's write lands half and then meets ENOSPC; run 3 comes
    after room returned. The file holds runs 1 and 3, every line whole (no damaged
    line: run 3's first record is not glued to half a line of run 2); run 2's lines
    are counted as lost, and the loss is one warning without a traceback. The runs
    themselves return normally. Before the fix the half line stayed and run 3 read
    as damaged."""
    caplog.set_level(logging.DEBUG)
    with AuditLog(disk.path, max_bytes=10_000_000 if rotating else 0, backup_count=2) as audit:
        PIPELINE.run(_items("one"), BUDGET, audit)
        size_after_one = disk.path.stat().st_size
        disk.room, disk.short = False, True
        assert len(PIPELINE.run(_items("two"), BUDGET, audit)) > 0
        assert disk.path.stat().st_size == size_after_one
        lost = audit.lost_lines
        assert lost > 10  # run_started, stages, every item, run_completed
        assert audit.lost_bytes > 0
        disk.room = True
        PIPELINE.run(_items("three"), BUDGET, audit)
        assert audit.lost_lines == lost
    reader = read_runs(disk.path, rotated=False)
    runs = list(reader)
    assert reader.stats.damaged_lines == 0
    assert len(runs) == 2
    assert all(run.is_complete for run in runs)
    assert [run.report.included[0].item.content.split("-")[0] for run in runs] == [
        "one", "three"]
    warnings = _warnings(caplog)
    assert len(warnings) == 1
    assert "cannot write" in warnings[0].getMessage()
    assert f"{lost} lines lost" in warnings[0].getMessage()
    assert all(record.exc_info is None for record in caplog.records)


def test_a_long_outage_warns_once_and_counts_every_lost_line(
        disk: Disk, caplog: pytest.LogCaptureFixture) -> None:
    """Five runs during one outage (every write fails before a byte lands, or writes
    nothing at all): one warning, every line counted, the file untouched. A second
    outage after a successful write warns once more."""
    caplog.set_level(logging.WARNING)
    with AuditLog(disk.path) as audit:
        disk.room = False
        for k in range(5):
            disk.zero = k % 2 == 1
            PIPELINE.run(_items(f"lost{k}"), BUDGET, audit)
        assert disk.failed_writes == 5
        assert disk.path.stat().st_size == 0
        first_outage = audit.lost_lines
        assert len(_warnings(caplog)) == 1
        disk.room, disk.zero = True, False
        PIPELINE.run(_items("kept"), BUDGET, audit)
        assert len(_warnings(caplog)) == 1
        disk.room = False
        PIPELINE.run(_items("lost again"), BUDGET, audit)
        assert audit.lost_lines > first_outage
    assert len(_warnings(caplog)) == 2
    runs = list(read_runs(disk.path, rotated=False))
    assert [run.is_complete for run in runs] == [True]


def test_a_line_torn_by_someone_else_stays_one_damaged_line(disk: Disk) -> None:
    """A file that ends in the middle of a line (a writer killed mid-write, or a cut
    that failed): the next write starts on a new line, so the torn line is the only
    damaged one and the next run reads whole."""
    disk.path.write_bytes(b'{"schema":2,"type":"stage_started","run_id":"dead","se')
    with AuditLog(disk.path) as audit:
        PIPELINE.run(_items("after"), BUDGET, audit)
    reader = read_runs(disk.path, rotated=False)
    runs = list(reader)
    assert reader.stats.damaged_lines == 1
    assert reader.stats.damaged[0].line == 1
    assert [run.is_complete for run in runs] == [True]


def test_when_the_cut_itself_fails_the_next_run_still_reads_whole(
        disk: Disk, monkeypatch: pytest.MonkeyPatch) -> None:
    """A short write whose undoing also fails (ftruncate refused) leaves half a line;
    the next write still starts on a new line: one damaged line, the next run whole."""
    def refuse(fd: int, length: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "ftruncate", refuse)
    with AuditLog(disk.path) as audit:
        disk.room, disk.short = False, True
        PIPELINE.run(_items("torn"), BUDGET, audit)
        disk.room = True
        PIPELINE.run(_items("whole"), BUDGET, audit)
    reader = read_runs(disk.path, rotated=False)
    runs = list(reader)
    assert reader.stats.damaged_lines == 1
    complete = [run for run in runs if run.is_complete]
    assert [run.report.included[0].item.content.split("-")[0] for run in complete] == [
        "whole"]


def test_no_room_to_compress_a_backup_leaves_it_whole_and_readable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Rotation whose gzip finds no room: the backup stays uncompressed as <path>.1,
    no partial .gz is left, the run after is written, and the reader reads both."""
    import gzip  # noqa: PLC0415

    real_open = gzip.open

    def no_room(*args: object, **kwargs: object) -> object:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    path = tmp_path / "audit.jsonl"
    caplog.set_level(logging.WARNING)
    with AuditLog(path, max_bytes=3000, backup_count=3) as audit:
        PIPELINE.run(_items("first"), BUDGET, audit)
        monkeypatch.setattr(gzip, "open", no_room)
        PIPELINE.run(_items("second"), BUDGET, audit)
        monkeypatch.setattr(gzip, "open", real_open)
        assert audit.lost_lines == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.lock"]
    runs = list(read_runs(path))
    assert [run.is_complete for run in runs] == [True, True]
    assert any("left uncompressed" in r.getMessage() for r in caplog.records)
