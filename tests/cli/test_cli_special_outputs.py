"""Output files that are not regular files: a device is written in place (never
renamed over), a FIFO is written for its reader, a symbolic link keeps being a link
to a replaced target, and a device that fails its writes (ENOSPC) is exit 2 with one
line. Every device here is made with mknod in a temporary folder."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import pytest
from _cli_support import BUDGET, Result, assert_one_line_error, run_main
from _special_files import fifo_reader, is_char_device, make_full, make_null

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    Pipeline,
    RecencyScorer,
    TraceDetailLevel,
)
from cupellation.files import write_whole_file
from cupellation_exporters import ReportFileExporter

ITEMS = '[{"content": "a", "tokens": 1}, {"content": "b", "tokens": 2}]\n'


@pytest.fixture
def items(tmp_path: Path) -> Path:
    """A small, valid items file."""
    path = tmp_path / "items.json"
    path.write_text(ITEMS)
    return path


@pytest.fixture
def log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """An audit log holding one demo run."""
    path = tmp_path / "audit.jsonl"
    assert run_main(capsys, "demo", "-q", "--out", tmp_path / "demo", "--audit-log",
                    path).code == 0
    return path


def _select(capsys: pytest.CaptureFixture[str], items: Path, *options: str | Path) -> Result:
    return run_main(capsys, "select", items, *BUDGET, "-q", *options)


@pytest.mark.parametrize("option", ["-o", "--report", "--events", "--html"])
def test_select_writes_a_null_device_in_place(
        tmp_path: Path, items: Path, option: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``select OPTION DEVICE`` (a null device made with mknod) succeeds and leaves the
    device a character device: it used to be renamed over, turning it into a
    regular file (which, run as root, is what happened to the machine's own null
    device)."""
    device = make_null(tmp_path)
    result = _select(capsys, items, option, device)
    assert result.code == 0, result.err
    assert is_char_device(device)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_select_out_folder_with_device_files_keeps_them(
        tmp_path: Path, items: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--out DIR`` where DIR/report.json is a null device and DIR/events.jsonl a
    symbolic link: the device stays a device, the link a link (to the new events),
    and report.html is a new regular file."""
    out = tmp_path / "out"
    out.mkdir()
    device = make_null(out, "report.json")
    real_events = tmp_path / "events-real.jsonl"
    real_events.write_text("old\n")
    (out / "events.jsonl").symlink_to(real_events)
    assert _select(capsys, items, "--out", out).code == 0
    assert is_char_device(device)
    assert (out / "events.jsonl").is_symlink()
    assert json.loads(real_events.read_text().splitlines()[0])["type"] == "run_started"
    assert (out / "report.html").read_text().startswith("<!DOCTYPE html>")


def test_report_html_and_demo_files_on_devices(
        tmp_path: Path, log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``report --html DEVICE`` and a demo folder whose files are devices leave them
    devices."""
    page = make_null(tmp_path, "page")
    assert run_main(capsys, "report", log, "--html", page).code == 0
    assert is_char_device(page)
    folder = tmp_path / "again"
    folder.mkdir()
    devices = [make_null(folder, name) for name in ("report.json", "report.html",
                                                     "events.jsonl", "candidates.json")]
    assert run_main(capsys, "demo", "-q", "--out", folder).code == 0
    assert all(is_char_device(device) for device in devices)


@pytest.mark.parametrize("option", ["-o", "--report", "--events", "--html"])
def test_a_full_device_is_exit_2_with_one_line(
        tmp_path: Path, items: Path, option: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Writing to a device whose every write fails with ENOSPC (a full device) is exit 2
    and one line naming the file and the error; the device stays a device."""
    device = make_full(tmp_path)
    result = _select(capsys, items, option, device)
    assert_one_line_error(result, 2, "cannot write", str(device), "No space left on device")
    assert is_char_device(device)


@pytest.mark.parametrize("command", ["select", "demo"])
def test_an_audit_log_on_a_full_device_is_exit_2_with_one_line(
        tmp_path: Path, items: Path, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``--audit-log`` on a device where every write fails: the AuditLog keeps going
    (it never raises into a run), but the command was asked to record the run, so it
    ends with exit 2 and one line saying how many lines were lost."""
    device = make_full(tmp_path)
    if command == "select":
        result = _select(capsys, items, "--audit-log", device)
    else:
        result = run_main(capsys, "demo", "-q", "--out", tmp_path / "out", "--audit-log", device)
    assert_one_line_error(result, 2, "--audit-log", "cannot write it whole", "lines lost")
    assert is_char_device(device)


def test_report_html_to_a_full_device_is_exit_2(
        tmp_path: Path, log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``report --html FULL`` is exit 2 with one line."""
    device = make_full(tmp_path)
    result = run_main(capsys, "report", log, "--html", device)
    assert_one_line_error(result, 2, "No space left on device")
    assert is_char_device(device)


def test_a_fifo_output_is_written_for_its_reader(
        tmp_path: Path, items: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``-o FIFO``: the reader at the other end gets the placed items, and the FIFO
    is still a FIFO (not replaced by a regular file)."""
    fifo = tmp_path / "pipe"
    with fifo_reader(fifo) as received:
        result = _select(capsys, items, "-o", fifo)
    assert result.code == 0, result.err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert [item["content"] for item in json.loads(received[0])] == ["a", "b"]


def test_a_symbolic_link_stays_a_link_to_the_replaced_target(
        tmp_path: Path, items: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--report LINK``: the link's target gets the report (replaced whole, its mode
    kept), the link stays a link; a dangling link's target is created."""
    target = tmp_path / "real" / "report.json"
    target.parent.mkdir()
    target.write_text("old")
    target.chmod(0o640)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert _select(capsys, items, "--report", link).code == 0
    assert link.is_symlink()
    assert json.loads(target.read_text())["total_candidates"] == 2
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "real" / "new.json")
    assert _select(capsys, items, "--report", dangling).code == 0
    assert dangling.is_symlink()
    assert json.loads((tmp_path / "real" / "new.json").read_text())["total_candidates"] == 2


def test_a_symbolic_link_loop_is_exit_2(tmp_path: Path, items: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A link that points to itself is refused before the run, in one line."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert_one_line_error(_select(capsys, items, "--report", loop), 2, "--report",
                          "symbolic links")


def test_report_file_exporter_writes_devices_in_place_and_keeps_links(tmp_path: Path) -> None:
    """The exporters' ReportFileExporter uses the same rule: a device path stays a
    device, a link stays a link to the new report."""
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    Pipeline(scorer=RecencyScorer(), budget=ContextBudget(max_tokens=100, target_tokens=50)).run(
        [ContextItem(content="a", tokens=1)], collector=collector)
    report = collector.build_report()
    device = make_null(tmp_path)
    assert ReportFileExporter(device).export(report).name == "SUCCESS"
    assert is_char_device(device)
    target = tmp_path / "target.json"
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert ReportFileExporter(link).export(report).name == "SUCCESS"
    assert link.is_symlink()
    assert json.loads(target.read_text())["total_candidates"] == 1
    full = make_full(tmp_path)
    exporter = ReportFileExporter(full)
    assert exporter.export(report).name == "FAILURE"
    assert exporter.failed_exports == 1
    assert is_char_device(full)


def test_write_whole_file_refuses_a_folder_and_leaves_a_file_whole_on_enospc(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder is IsADirectoryError. A full disk (os.write raising ENOSPC, or making
    no progress) leaves the old file whole and no temporary file behind."""
    with pytest.raises(IsADirectoryError):
        write_whole_file(tmp_path, b"x")
    target = tmp_path / "doc.json"
    target.write_bytes(b"old content")

    def no_space(descriptor: int, data: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def no_progress(descriptor: int, data: object) -> int:
        return 0

    for failing in (no_space, no_progress):
        with monkeypatch.context() as patch:
            patch.setattr(os, "write", failing)
            with pytest.raises(OSError, match="No space left") as caught:
                write_whole_file(target, b"new content")
        assert caught.value.errno == errno.ENOSPC
        assert target.read_bytes() == b"old content"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["doc.json"]
