"""The ``demo`` and ``select`` subcommands: outputs, round trips and input errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cupellation import SelectionReport, build_report
from cupellation.cli import main
from cupellation.events import event_from_json


def test_demo_writes_a_report_equal_to_the_fold_of_its_event_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's report.json equals the report rebuilt from its events.jsonl (one
    flat event per line, numbered 0, 1, 2, ... under one run id), and the
    summary names each exclusion reason the bundled data is built to show."""
    assert main(["demo", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    for reason in ("BudgetExceeded", "Deduplicated", "NegativeTokens", "Pinned"):
        assert reason in printed
    report = SelectionReport.from_json((tmp_path / "report.json").read_text(encoding="utf-8"))
    lines = (tmp_path / "events.jsonl").read_text(encoding="utf-8").splitlines()
    flat = [json.loads(line) for line in lines]
    assert all(isinstance(value, str | int | float | bool | list)
               for row in flat for value in row.values())
    assert [row["seq"] for row in flat] == list(range(len(flat)))
    assert len({row["run_id"] for row in flat}) == 1
    events = [event_from_json(line) for line in lines]
    rebuilt = build_report(events)
    assert rebuilt == report
    assert report.is_complete
    assert report.total_candidates == 22
    used = sum(entry.item.tokens for entry in report.included)
    assert used <= 400


def test_select_reads_json_lines_and_honours_options(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """select takes a JSON Lines file, a weighted scorer list and a budget."""
    rows = [{"content": f"m{k}", "tokens": 10, "priority": k} for k in range(5)]
    source = tmp_path / "c.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    status = main(["select", str(source), "--max-tokens", "100", "--target-tokens", "30",
                   "--scorer", "priority:1", "--out", str(tmp_path / "o"), "--quiet"])
    assert status == 0
    assert capsys.readouterr().out == ""
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert sorted(i["item"]["content"] for i in report["included"]) == ["m2", "m3", "m4"]


def test_select_reports_the_line_of_a_damaged_candidate(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A JSON Lines candidate with a bad field fails with its line number, field and value.

    Changed deliberately: the line is now given compiler-style, ``FILE:2: tokens: ...``
    (it was ``line 2: tokens: ...``), as every select error names its place."""
    source = tmp_path / "c.jsonl"
    source.write_text('{"content": "ok", "tokens": 1}\n{"content": "bad", "tokens": "many"}\n')
    assert main(["select", str(source), "--max-tokens", "10", "--target-tokens", "5"]) == 2
    err = capsys.readouterr().err
    assert f"{source}:2: tokens: " in err
    assert "'many'" in err


def test_select_reports_the_index_of_a_bad_array_entry(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """In a JSON array the offending entry is named by its index."""
    source = tmp_path / "c.json"
    source.write_text('[{"content": "ok", "tokens": 1}, {"content": "", "tokens": 2}]')
    assert main(["select", str(source), "--max-tokens", "10", "--target-tokens", "5"]) == 2
    assert "[1].content" in capsys.readouterr().err


def test_select_failed_run_exits_1_and_still_writes_the_events(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run that fails (pinned items over the window) exits 1, and its event file
    ends with run_failed, naming the error's type and text, so the failure is
    visible in telemetry."""
    source = tmp_path / "c.json"
    source.write_text('[{"content": "sys", "tokens": 50, "pinned": true}]')
    status = main(["select", str(source), "--max-tokens", "40", "--target-tokens", "30",
                   "--out", str(tmp_path / "o")])
    assert status == 1
    assert "Pinned items require 50 tokens" in capsys.readouterr().err
    last = json.loads((tmp_path / "o" / "events.jsonl").read_text().splitlines()[-1])
    assert last["type"] == "run_failed"
    assert last["error_type"] == "PinnedBudgetError"
    assert "Pinned items require 50 tokens" in last["error_text"]


def test_select_missing_file_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    """A missing candidates file is an error naming the path."""
    assert main(["select", "no/such.json", "--max-tokens", "1", "--target-tokens", "1"]) == 2
    assert "no/such.json" in capsys.readouterr().err


def test_console_script_module_runs_the_demo(tmp_path: Path) -> None:
    """``python -m cupellation.cli demo`` works as a separate process."""
    done = subprocess.run([sys.executable, "-m", "cupellation.cli", "demo", "--quiet",
                           "--out", str(tmp_path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "events.jsonl").stat().st_size > 0


def test_conformance_command_passes_all_58_required_vectors(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``cupellation conformance tests/data/conformance/required`` (the vendored
    vectors) prints only the summary line '58 passed, 0 failed' and exits 0."""
    required = Path(__file__).resolve().parents[1] / "data" / "conformance" / "required"
    assert main(["conformance", str(required)]) == 0
    assert capsys.readouterr().out.splitlines() == ["58 passed, 0 failed"]
