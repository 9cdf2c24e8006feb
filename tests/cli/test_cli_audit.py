"""``cupellation audit``, ``report`` and ``why`` on a log written by ``demo --audit-log``."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from cupellation import ContextBudget, ContextItem, Pipeline, PriorityScorer, SelectionReport
from cupellation.cli import main
from cupellation.logs import AuditLog, read_runs


@pytest.fixture
def demo_log(tmp_path: Path) -> Path:
    """Two demo runs (two budgets) appended to one audit log."""
    log = tmp_path / "audit.jsonl"
    assert main(["demo", "--quiet", "--out", str(tmp_path / "o"), "--audit-log", str(log)]) == 0
    assert main(["demo", "--quiet", "--out", str(tmp_path / "o2"), "--audit-log", str(log),
                 "--target-tokens", "200"]) == 0
    return log


def test_demo_audit_log_rebuilds_the_demo_report(demo_log: Path, tmp_path: Path) -> None:
    """The run demo wrote to its audit log rebuilds to the report.json it wrote."""
    runs = list(read_runs(demo_log))
    assert len(runs) == 2
    written = SelectionReport.from_json((tmp_path / "o" / "report.json").read_text())
    assert runs[0].report == written


def test_audit_summarises_runs_reasons_and_utilisation_in_json(
        demo_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """audit --format json counts both runs, their candidates, the exclusion reasons by
    count and tokens (matching the reports), and the utilisation of the target."""
    assert main(["audit", str(demo_log), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    runs = list(read_runs(demo_log))
    assert data["runs"]["total"] == 2
    assert data["runs"]["complete"] == 2
    assert data["candidates"]["considered"] == sum(r.report.total_candidates for r in runs)
    reasons = {row["reason"]: (row["count"], row["tokens"]) for row in data["exclusion_reasons"]}
    expected: dict[str, tuple[int, int]] = {}
    for run in runs:
        for entry in run.report.excluded:
            count, tokens = expected.get(entry.reason.name, (0, 0))
            expected[entry.reason.name] = (count + 1, tokens + entry.item.tokens)
    assert reasons == expected
    assert data["utilisation"]["runs"] == 2
    assert data["utilisation"]["min"] == pytest.approx(min(r.utilisation or 0 for r in runs))
    assert data["lines"]["damaged"] == 0


def test_audit_text_and_time_window(demo_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The text summary names the reasons; a window before the runs finds nothing (1)."""
    assert main(["audit", str(demo_log)]) == 0
    out = capsys.readouterr().out
    assert "BudgetExceeded" in out
    assert "Runs: 2" in out
    assert main(["audit", str(demo_log), "--until", "2000-01-01T00:00:00Z"]) == 1
    assert "no runs found in that time window" in capsys.readouterr().err


def test_audit_lists_an_incomplete_run_and_a_damaged_line_and_exits_0(
        demo_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """audit is a summary (as the README's exit codes say): a run missing an event and a
    line cut short are listed (incomplete runs, damaged lines) and it exits 0,
    where report on the same log exits 3 for the incomplete run."""
    lines = demo_log.read_text(encoding="utf-8").splitlines()
    at = next(k for k, line in enumerate(lines) if '"item_included"' in line)
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text("\n".join([*lines[:at], lines[at][:60], *lines[at + 1:]]) + "\n",
                       encoding="utf-8")
    assert main(["audit", str(damaged)]) == 0
    out = capsys.readouterr().out
    assert "Incomplete runs (1)" in out
    assert "1 damaged line(s)" in out
    run_id = json.loads(lines[at])["run_id"]
    assert main(["report", str(damaged), "--run", run_id]) == 3


def test_audit_strict_exits_3_for_a_log_that_is_not_whole(
        demo_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """audit --strict prints the same summary and exits 3, with one line saying why,
    when a line is damaged (a run then incomplete); a whole log exits 0."""
    assert main(["audit", str(demo_log), "--strict"]) == 0
    lines = demo_log.read_text(encoding="utf-8").splitlines()
    at = next(k for k, line in enumerate(lines) if '"item_included"' in line)
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text("\n".join([*lines[:at], lines[at][:60], *lines[at + 1:]]) + "\n",
                       encoding="utf-8")
    capsys.readouterr()
    assert main(["audit", str(damaged), "--strict", "--format", "json"]) == 3
    captured = capsys.readouterr()
    assert json.loads(captured.out)["runs"]["incomplete"] == 1
    assert captured.err.strip().splitlines() == [
        "cupellation audit: not whole: 1 incomplete run(s), 1 damaged line(s), "
        "0 unreadable source(s) (--strict)"]


def test_report_prints_a_table_or_the_seeds_json(demo_log: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """report --run prints the run's tables; --format json is report.to_json(indent=2)
    of the rebuilt report; an unknown run id exits 1."""
    run = next(iter(read_runs(demo_log)))
    assert main(["report", str(demo_log), "--run", run.run_id]) == 0
    out = capsys.readouterr().out
    assert "Included, in placed order" in out
    assert "Excluded" in out
    assert main(["report", str(demo_log), "--run", run.run_id, "--format", "json"]) == 0
    assert capsys.readouterr().out == run.report.to_json(indent=2) + "\n"
    assert main(["report", str(demo_log), "--run", "nope"]) == 1
    assert "run nope not found" in capsys.readouterr().err


def test_why_explains_exclusions_with_what_beat_the_item(
        demo_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """why --match answers per run; an excluded item names its reason with data and the
    higher-scored included items that took the budget; --content with no match exits 1."""
    assert main(["why", str(demo_log), "--match", "Billing FAQ", "--format", "json"]) == 0
    answers = json.loads(capsys.readouterr().out)["matches"]
    assert len(answers) == 2
    for answer in answers:
        assert answer["included"] is False
        assert answer["reason"]["reason"] == "BudgetExceeded"
        beaten = answer["beaten_by"]
        assert beaten["count"] > 0
        assert all(other["score"] >= answer["score"] for other in beaten["items"])
    assert main(["why", str(demo_log), "--match", "Billing FAQ"]) == 0
    assert "EXCLUDED, BudgetExceeded(item_tokens=" in capsys.readouterr().out
    assert main(["why", str(demo_log), "--content", "not in any run"]) == 1


def test_why_names_the_pinned_item_that_displaced_a_candidate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A PinnedOverride exclusion is answered with the pinned item's content."""
    log = tmp_path / "p.jsonl"
    items = [ContextItem("the pinned system prompt", 60, pinned=True),
             ContextItem("fits only without the pin", 50, priority=1)]
    with AuditLog(log) as audit:
        Pipeline(scorer=PriorityScorer()).run(items, ContextBudget(200, 100), audit)
    assert main(["why", str(log), "--content", "fits only without the pin"]) == 0
    out = capsys.readouterr().out
    assert "PinnedOverride" in out
    assert "displaced by the pinned item: the pinned system prompt" in out


def test_terminal_output_escapes_control_characters(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Content with an escape sequence, a carriage return and a bidi override is shown
    escaped, never sent raw to the terminal."""
    log = tmp_path / "c.jsonl"
    nasty = "evil\x1b[2Jclear\rback\u202eright"
    with AuditLog(log) as audit:
        Pipeline(scorer=PriorityScorer()).run([ContextItem(nasty, 500)],
                                              ContextBudget(200, 100), audit)
    run = next(iter(read_runs(log)))
    assert main(["report", str(log), "--run", run.run_id]) == 0
    out = capsys.readouterr().out
    assert main(["why", str(log), "--match", "evil"]) == 0
    out += capsys.readouterr().out
    assert "\x1b" not in out
    assert "\r" not in out
    assert "\u202e" not in out
    assert "\\x1b[2J" in out
    assert "\\u202e" in out


def test_bad_input_is_one_line_on_stderr_with_status_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], demo_log: Path) -> None:
    """A missing file, a bad time, a bad regex and a directory each give exit status 2
    and one line of error, never a traceback."""
    cases = [["audit", str(tmp_path / "missing.jsonl")],
             ["audit", str(demo_log), "--since", "someday"],
             ["why", str(demo_log), "--match", "("],
             ["report", str(tmp_path), "--run", "x"]]
    for argv in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1, err
        assert "Traceback" not in err


def test_a_piped_read_shows_no_progress_bar(demo_log: Path) -> None:
    """Run as a real command with its output in a pipe: stdout holds only the JSON and
    stderr stays empty (no progress bar, no escape sequences)."""
    done = subprocess.run([sys.executable, "-m", "cupellation.cli", "audit", str(demo_log),
                           "--format", "json"], capture_output=True, check=True)
    assert done.stderr == b""
    assert json.loads(done.stdout)["runs"]["total"] == 2


def test_report_detects_trace_files_and_reads_them_through_otel(
        tmp_path: Path, demo_log: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """report recognises OTLP/JSON lines and Jaeger JSON by their content and hands
    their bytes (read once) to cupellation.otel.read_trace (here a stand-in returning
    objects with run_id, report and events), printing the run it returns; log files
    are never sent there."""
    runs = list(read_runs(demo_log))
    calls: list[bytes] = []

    class Rebuilt:
        def __init__(self, run_id: str, report: SelectionReport) -> None:
            self.run_id, self.report, self.events = run_id, report, ()

    def fake(data: bytes) -> list[Rebuilt]:
        calls.append(data)
        return [Rebuilt(r.run_id, r.report) for r in runs]

    monkeypatch.setitem(sys.modules, "cupellation.otel",
                        types.SimpleNamespace(read_trace=fake))
    otlp = tmp_path / "t.jsonl"
    otlp.write_text('{"resourceSpans": [{"scopeSpans": []}]}\n')
    jaeger = tmp_path / "j.json"
    jaeger.write_text('{\n  "data": [ {"traceID": "ab", "spans": []} ]\n}\n')
    for trace in (otlp, jaeger):
        assert main(["report", str(trace), "--run", runs[1].run_id, "--format", "json"]) == 0
        assert capsys.readouterr().out == runs[1].report.to_json(indent=2) + "\n"
    assert calls == [otlp.read_bytes(), jaeger.read_bytes()]
    assert main(["report", str(demo_log), "--run", runs[1].run_id]) == 0
    assert len(calls) == 2


def test_report_on_a_real_trace_file_without_runs_fails_cleanly(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With the real read_trace_file, a trace file holding no cupellation run gives one
    line on stderr naming the file, and status 2."""
    otel = importlib.import_module("cupellation.otel")
    assert callable(getattr(otel, "read_trace_file", None))
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"resourceSpans": []}\n')
    assert main(["report", str(trace), "--run", "x"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "trace.jsonl" in err
