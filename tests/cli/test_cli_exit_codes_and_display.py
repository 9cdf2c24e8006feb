"""The exit statuses every command promises (0, 1, 2, 3, 130, 141), ``report``'s 3 for
an incomplete rebuild, and what the demo and a bare ``cupellation`` print."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest
from _cli_support import BUDGET, assert_one_line_error, cli, run_main
from _special_files import make_full

from cupellation.cli import SUBCOMMANDS, main
from cupellation.events import StageCompleted, event_from_json
from cupellation.logs import read_runs


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo folder and an audit log of its one run."""
    folder = tmp_path_factory.mktemp("demo")
    assert main(["demo", "-q", "--out", str(folder), "--audit-log",
                 str(folder / "audit.jsonl")]) == 0
    return folder


def test_no_command_prints_one_line() -> None:
    """``cupellation`` alone: exit 2 and exactly one line, naming the commands (it
    printed the usage and then the error)."""
    result = cli()
    assert_one_line_error(result, 2, "a command is required", "select", "--help")


def test_report_of_an_incomplete_run_exits_3_unless_allowed(
        demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A log cut before the run's end rebuilds an incomplete report: report still
    prints it, says so in one line on stderr, and exits 3 (it exited 0);
    --allow-incomplete exits 0 with nothing on stderr. A complete run exits 0."""
    lines = (demo / "audit.jsonl").read_text().split("\n")
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:-3]) + "\n")
    for fmt in ("json", "text"):
        result = run_main(capsys, "report", cut, "--format", fmt)
        assert result.code == 3
        assert len(result.err_lines) == 1
        assert "the rebuilt report is incomplete" in result.err
        assert "--allow-incomplete" in result.err
        assert result.out
    result = run_main(capsys, "report", cut, "--format", "json", "--allow-incomplete")
    assert result.code == 0
    assert result.err == ""
    assert json.loads(result.out)["incomplete"]
    page = tmp_path / "page.html"
    assert run_main(capsys, "report", cut, "--html", page).code == 3
    assert page.is_file()
    assert run_main(capsys, "report", demo / "audit.jsonl").code == 0


def test_every_help_names_only_the_promised_statuses(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Every command's --help documents its exit statuses, each one of 0, 1, 2, 3,
    130, 141, and never 70 (the internal-error status is no longer promised)."""
    for name in ["", *SUBCOMMANDS]:
        argv = [name, "--help"] if name else ["--help"]
        result = run_main(capsys, *argv)
        assert result.code == 0
        text = " ".join(result.out.split())
        assert "exit status" in text, name
        tail = text[text.index("exit status"):]
        statuses = {int(n) for n in re.findall(r"(?<![\w.-])(\d{1,3})(?= [a-z])", tail)}
        assert statuses, name
        assert statuses <= {0, 1, 2, 3, 130, 141}, (name, statuses)
        assert "70" not in tail, name


def test_the_demo_stage_line_says_items_in_and_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's stage line gives each stage's items in and items out, equal to the
    run's stage_completed events (it labelled the items in as 'items out')."""
    result = run_main(capsys, "demo", "--out", tmp_path)
    assert result.code == 0
    line = next(line for line in result.out.splitlines() if line.startswith("Stages"))
    events = [event_from_json(text) for text in
              (tmp_path / "events.jsonl").read_text().split("\n") if text]
    stages = [e for e in events if isinstance(e, StageCompleted)]
    shown = re.findall(r"(\w+) [\d.]+ ms \((\d+) in, (\d+) out\)", line)
    assert shown == [(str(e.stage), str(e.items_in), str(e.items_out)) for e in stages]
    assert any(e.items_in != e.items_out for e in stages)


def test_demo_audit_log_inside_a_new_out_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``demo --out NEW --audit-log NEW/a.log`` with NEW not yet there: exit 0, the log
    holds the run (it failed: the log was opened before --out was made)."""
    new = tmp_path / "new" / "deeper"
    result = run_main(capsys, "demo", "-q", "--out", new, "--audit-log", new / "a.log")
    assert result.code == 0, result.err
    runs = list(read_runs(new / "a.log"))
    assert len(runs) == 1
    assert runs[0].is_complete
    assert (new / "report.json").is_file()


def test_warnings_are_shown_at_the_end_and_never_join_the_line_of_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Warnings raised on the way (an unknown CUPELLATION_CAPTURE_CONTENT, an --otlp
    export nobody takes) are printed once each when the command succeeds; when it then
    fails with bad input (a report to a device that is full), exit 2 is the error's
    one line alone (the warnings used to come first, two or three lines in all)."""
    items = tmp_path / "items.json"
    items.write_text('[{"content": "a", "tokens": 1}]')
    with socket.socket() as held:  # bound, never listening: every connection refused
        held.bind(("127.0.0.1", 0))
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT",
                           f"http://127.0.0.1:{held.getsockname()[1]}")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0.2")
        monkeypatch.setenv("CUPELLATION_CAPTURE_CONTENT", "bogus")
        argv: list[str | Path] = ["select", items, *BUDGET, "-q", "--otlp"]
        ok = run_main(capsys, *argv)
        assert ok.code == 0
        assert len(ok.err_lines) >= 2
        assert all(line.startswith("cupellation: warning: ") for line in ok.err_lines)
        failed = run_main(capsys, *argv, "--report", make_full(tmp_path))
    assert_one_line_error(failed, 2, "No space left on device")
