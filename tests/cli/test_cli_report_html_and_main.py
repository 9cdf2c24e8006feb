"""``cupellation report --html`` (from an audit log or a trace file), ``report`` without
``--run``, and the top-level handler: internal errors, the debug switch, the help."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from _cli_support import assert_one_line_error, cli, files_in

from cupellation.cli import SUBCOMMANDS, main
from cupellation.logs import read_runs


@pytest.fixture
def two_runs(tmp_path: Path) -> Path:
    """An audit log with two demo runs (targets 400 and 200)."""
    log = tmp_path / "audit.jsonl"
    for target in ("400", "200"):
        assert main(["demo", "--quiet", "--out", str(tmp_path / f"d{target}"),
                     "--audit-log", str(log), "--target-tokens", target]) == 0
    return log


def _count(page: str, name: str) -> int:
    found = re.search(rf'id="{name}" data-count="(\d+)"', page)
    assert found is not None, name
    return int(found.group(1))


def test_report_html_from_a_log_and_from_a_trace_file(
        two_runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``report LOG --run ID --html FILE`` writes the run's page and says so in one line
    (no table); from the demo's trace file the page shows the same counts; ``--html -``
    puts the page on stdout instead."""
    runs = list(read_runs(two_runs))
    page_file = tmp_path / "run.html"
    assert main(["report", str(two_runs), "--run", runs[1].run_id, "--html",
                 str(page_file)]) == 0
    assert capsys.readouterr().out == (f"Wrote {page_file}: the report of run "
                                       f"{runs[1].run_id} as a web page (open it in a "
                                       "browser)\n")
    page = page_file.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert _count(page, "count-included") == len(runs[1].report.included)
    assert _count(page, "count-candidates") == 22
    assert 'id="budget-target" data-tokens="200"' in page  # the run's own budget
    assert main(["report", str(tmp_path / "d400" / "trace.jsonl"), "--html", "-"]) == 0
    from_trace = capsys.readouterr().out
    assert from_trace.startswith("<!DOCTYPE html>")
    assert _count(from_trace, "count-included") == len(runs[0].report.included)
    assert 'id="budget-target" data-tokens="400"' in from_trace


def test_report_without_run_shows_the_last_and_says_how_many(
        two_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --run, report shows the last run read and notes on stderr that there
    were two; a log with no run exits 1."""
    runs = list(read_runs(two_runs))
    assert main(["report", str(two_runs), "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert captured.out == runs[1].report.to_json(indent=2) + "\n"
    assert captured.err.strip() == (f"cupellation report: 2 runs read; showed the last, "
                                    f"{runs[1].run_id} (choose one with --run)")
    empty = two_runs.parent / "empty.jsonl"
    empty.write_text("")
    assert main(["report", str(empty)]) == 1
    assert "no run found" in capsys.readouterr().err


def test_report_html_into_a_folder_is_one_line(two_runs: Path, tmp_path: Path) -> None:
    """``--html`` naming a folder is refused before anything is written."""
    before = files_in(tmp_path)
    result = cli("report", two_runs, "--html", tmp_path)
    assert_one_line_error(result, 2, "is a folder, not a file")
    assert files_in(tmp_path) == before


def _boom(args: argparse.Namespace, /) -> int:
    raise RuntimeError("unexpected")


def test_an_internal_error_is_one_line_with_status_70(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A bug (an exception no input explains) is one line saying so, status 70; with
    CUPELLATION_DEBUG=1 the exception propagates for its traceback."""
    monkeypatch.setattr(SUBCOMMANDS["presets"], "run", _boom)
    monkeypatch.delenv("CUPELLATION_DEBUG", raising=False)
    assert main(["presets"]) == 70
    err = capsys.readouterr().err
    assert err.strip() == ("cupellation: internal error: RuntimeError: unexpected (a bug in "
                           "cupellation; CUPELLATION_DEBUG=1 shows the traceback)")
    monkeypatch.setenv("CUPELLATION_DEBUG", "1")
    with pytest.raises(RuntimeError):
        main(["presets"])


def test_top_level_help_lists_every_command_and_the_exit_statuses() -> None:
    """``cupellation --help`` lists each command (presets, policy and export included)
    and the exit statuses 0, 1, 2, 3, 130 and 141, and no others (70, the last resort
    for a bug, is not a status the command promises)."""
    result = cli("--help")
    assert result.code == 0
    for name in ("audit", "conformance", "demo", "export", "policy", "presets", "report",
                 "select", "why"):
        assert f"    {name}" in result.out
    text = " ".join(result.out.split())
    for status in ("0 success", "1 the selection failed", "2 bad input",
                   "3 the data was not whole", "130 interrupted", "141 standard output"):
        assert status in text
    assert "70" not in text.split("exit status:")[1]
