"""``cupellation demo``: bundled data only, the six files it writes and what it prints,
its trace file read back by ``cupellation report``, and the pinned prompt placed first."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from _cli_support import cli, files_in

from cupellation import SelectionReport
from cupellation.cli import _telemetry, main
from cupellation.otel import read_trace_file
from cupellation.policy import load_policy

DEMO_FILES = ["candidates.json", "events.jsonl", "policy.toml", "report.html", "report.json",
              "trace.jsonl"]


def test_demo_runs_anywhere_and_prints_each_file(tmp_path: Path) -> None:
    """From an empty folder (no repository around it, nothing beside it) the demo writes its
    six files in out/demo, prints the decisions, one line per file written and the
    commands to try next, and exits 0 with nothing on stderr."""
    result = cli("demo", cwd=tmp_path)
    assert result.code == 0, result.err
    assert result.err == ""
    assert files_in(tmp_path / "out" / "demo") == DEMO_FILES
    out = result.out
    for reason in ("Pinned", "BudgetExceeded", "Deduplicated", "NegativeTokens"):
        assert reason in out
    wrote = out[out.index("Wrote:"):]
    for name in DEMO_FILES:
        assert f"out/demo/{name}" in wrote
    assert "-m cupellation.cli report out/demo/trace.jsonl" in out
    assert ("-m cupellation.cli select out/demo/candidates.json --policy "
            "out/demo/policy.toml" in out)


def test_the_next_hints_run_as_printed_from_the_venv_script(tmp_path: Path) -> None:
    """Started as the venv's ``cupellation`` script with that folder not on PATH (as
    after ``bash scripts/demo.sh``), the demo's "Next:" hints name the script by its
    path, never a bare ``cupellation``; each hint, run as printed, exits 0."""
    script = Path(sys.executable).parent / "cupellation"
    assert script.is_file()
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    done = subprocess.run([str(script), "demo"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    hints = done.stdout[done.stdout.index("Next:"):].splitlines()[1:]
    assert len(hints) == 4
    for hint in hints:
        argv = shlex.split(hint)
        assert argv[0] == str(script)
        ran = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                             check=False, timeout=120)
        assert ran.returncode == 0, (hint, ran.stderr)


def test_demo_places_the_pinned_system_prompt_first(tmp_path: Path) -> None:
    """The demo's policy is U-shaped: the pinned system prompt is the first item."""
    assert main(["demo", "--quiet", "--out", str(tmp_path)]) == 0
    report = SelectionReport.from_json((tmp_path / "report.json").read_text())
    first = report.included[0]
    assert first.item.pinned
    assert first.item.kind.value == "SystemPrompt"
    assert load_policy(tmp_path / "policy.toml").placer.__class__.__name__ == "UShapedPlacer"


def test_trace_file_is_read_back_by_report(tmp_path: Path) -> None:
    """trace.jsonl (OTLP/JSON lines) rebuilds, through cupellation.otel.read_trace_file,
    to the report the demo wrote; ``cupellation report out/demo/trace.jsonl`` (no
    --run: the file's one run) prints it, as a table or as JSON."""
    assert cli("demo", "--quiet", cwd=tmp_path).code == 0
    demo = tmp_path / "out" / "demo"
    written = SelectionReport.from_json((demo / "report.json").read_text())
    runs = read_trace_file(demo / "trace.jsonl")
    assert len(runs) == 1
    assert runs[0].report == written
    assert runs[0].report.is_complete
    first_line = json.loads((demo / "trace.jsonl").read_text().splitlines()[0])
    span = first_line["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(span["traceId"]) == 32
    int(span["traceId"], 16)  # hex, as OTLP/JSON wants
    table = cli("report", "out/demo/trace.jsonl", cwd=tmp_path)
    assert table.code == 0, table.err
    assert f"Run {runs[0].run_id}; budget: max 1024, target 400" in table.out
    as_json = cli("report", "out/demo/trace.jsonl", "--format", "json", cwd=tmp_path)
    assert SelectionReport.from_json(as_json.out) == written


def test_select_on_the_demo_files_reproduces_the_demo(tmp_path: Path) -> None:
    """``select out/demo/candidates.json --policy out/demo/policy.toml`` (the command the
    demo suggests) places exactly what the demo placed."""
    assert cli("demo", "--quiet", cwd=tmp_path).code == 0
    demo = tmp_path / "out" / "demo"
    result = cli("select", demo / "candidates.json", "--policy", demo / "policy.toml")
    assert result.code == 0, result.err
    report = SelectionReport.from_json((demo / "report.json").read_text())
    assert [row["content"] for row in json.loads(result.out)] == [
        entry.item.content for entry in report.included]


def test_demo_takes_a_preset_and_budget_flags(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """``demo --policy chat --target-tokens 200`` runs the Chat preset on the demo data
    with the demo's other budget values, and writes that policy and budget."""
    assert main(["demo", "--out", str(tmp_path), "--policy", "chat",
                 "--target-tokens", "200"]) == 0
    assert "The demo with the Chat policy" in capsys.readouterr().out
    policy = load_policy(tmp_path / "policy.toml")
    assert policy.name == "Chat"
    assert policy.budget is not None
    assert (policy.budget.max_tokens, policy.budget.target_tokens) == (1024, 200)


class _FakeSpanFileExporter:
    """Stands in for a span file exporter that cupellation_exporters may offer."""

    calls: ClassVar[list[int]] = []

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def export(self, spans: Sequence[Any]) -> Any:
        type(self).calls.append(len(spans))
        self.stream.write(_telemetry._otlp_json_line(spans))
        return type("Result", (), {"name": "SUCCESS"})()

    def shutdown(self) -> None:
        """Nothing to release."""


def test_trace_file_uses_the_exporters_span_file_exporter_when_offered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When cupellation_exporters lists a span file exporter in __all__, the demo's
    trace file is written through it (here a stand-in), once, with all the spans."""
    exporters = importlib.import_module("cupellation_exporters")
    monkeypatch.setattr(exporters, "__all__", ["FakeSpanFileExporter", *exporters.__all__])
    monkeypatch.setattr(exporters, "FakeSpanFileExporter", _FakeSpanFileExporter,
                        raising=False)
    _FakeSpanFileExporter.calls = []
    assert main(["demo", "--quiet", "--out", str(tmp_path)]) == 0
    assert len(_FakeSpanFileExporter.calls) == 1
    assert _FakeSpanFileExporter.calls[0] >= 6  # the root and five stage spans
    assert read_trace_file(tmp_path / "trace.jsonl")[0].report.is_complete


def test_trace_file_through_the_real_otlp_json_file_exporter(tmp_path: Path) -> None:
    """The demo writes its trace file with cupellation-exporters' own
    OtlpJsonFileSpanExporter (found through the ``cupellation.exporters`` entry
    point), and the file reads back to the demo's report."""
    assert "OtlpJsonFileSpanExporter" in importlib.import_module("cupellation_exporters").__all__
    assert main(["demo", "--quiet", "--out", str(tmp_path)]) == 0
    written = SelectionReport.from_json((tmp_path / "report.json").read_text())
    assert read_trace_file(tmp_path / "trace.jsonl")[0].report == written


def test_demo_again_replaces_its_files(tmp_path: Path) -> None:
    """A second demo into the same folder replaces every file (the trace holds one run,
    the new one), leaving no temporary files."""
    for _ in range(2):
        assert main(["demo", "--quiet", "--out", str(tmp_path)]) == 0
    assert files_in(tmp_path) == DEMO_FILES
    events = (tmp_path / "events.jsonl").read_text().splitlines()
    run_id = json.loads(events[0])["run_id"]
    assert [run.run_id for run in read_trace_file(tmp_path / "trace.jsonl")] == [run_id]


def test_demo_without_the_sdk_skips_only_the_trace_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Without the OpenTelemetry SDK (only the API is a core dependency) the demo still
    writes its other five files and says why there is no trace file."""
    monkeypatch.setitem(__import__("sys").modules, "opentelemetry.sdk.trace", None)
    assert main(["demo", "--out", str(tmp_path)]) == 0
    assert files_in(tmp_path) == [name for name in DEMO_FILES if name != "trace.jsonl"]
    out = capsys.readouterr().out
    assert "(no trace file: the trace file needs opentelemetry.sdk.trace" in out
    assert "cupellation report" not in out


def test_report_shows_the_demos_own_report_file(tmp_path: Path) -> None:
    """``report out/demo/report.json`` (the SelectionReport the demo writes) shows it,
    with the same counts as the trace file's report, and as JSON gives it back equal;
    mixing it with a log file is one line naming each file's kind, exit 2."""
    assert cli("demo", "--quiet", cwd=tmp_path).code == 0
    demo = tmp_path / "out" / "demo"
    shown = cli("report", demo / "report.json")
    assert shown.code == 0, shown.err
    assert "Selected 16 of 22 candidates" in shown.out
    as_json = cli("report", demo / "report.json", "--format", "json")
    assert SelectionReport.from_json(as_json.out) == SelectionReport.from_json(
        (demo / "report.json").read_text())
    mixed = cli("report", demo / "report.json", demo / "events.jsonl")
    assert mixed.code == 2
    assert mixed.err_lines == [
        f"cupellation report: error: give log files, trace files or report files, one "
        f"kind at a time ({demo / 'report.json'} holds reports, {demo / 'events.jsonl'} "
        "holds logs)"]


def test_without_the_cli_extra_the_demo_says_so_before_writing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Without rich (``pip install .`` with no ``[cli]``), ``demo`` exits 2 with one line
    naming the extra, and has written nothing; ``--quiet`` (no table) still runs."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "rich" else real(name, *a))
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        "cupellation: this command prints tables, which needs the cli extra: "
        "pip install 'cupellation[cli]' (in a checkout: pip install -e '.[cli]')\n")
    assert not out.exists()
    assert main(["demo", "--quiet", "--out", str(out)]) == 0


def test_demo_help_gives_one_output_reserve_default(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``demo --help`` states the output reserve's default once (256, the demo's), not
    also as 0 beside the flag."""
    assert main(["demo", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "output reserve 256" in text
    assert "default 0" not in text


def test_one_table_style_in_demo_report_and_html(tmp_path: Path) -> None:
    """The demo's tables, ``report``'s and the HTML page's have the same columns in the
    same order (# score reason kind tokens content), number rows from 1 and show the
    same scores to 3 decimals."""
    shown = cli("demo", "--out", tmp_path, env={"COLUMNS": "200"})
    assert shown.code == 0, shown.err
    again = cli("report", tmp_path / "trace.jsonl", env={"COLUMNS": "200"})
    assert again.code == 0, again.err

    def rows(text: str) -> list[list[str]]:
        return [[cell.strip() for cell in line.strip("┃│").split("┃" if "┃" in line else "│")]
                for line in text.splitlines() if line.startswith(("┃", "│"))]

    for text in (shown.out, again.out):
        table = rows(text)
        assert table[0] == ["#", "score", "reason", "kind", "tokens", "content"]
        assert table[1][:5] == ["1", "1.000", "Pinned", "SystemPrompt", "28"]
    page = (tmp_path / "report.html").read_text()
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", page[page.index('id="included-table"'):])
    assert [h.lower() for h in headers[:6]] == ["#", "score", "reason", "kind", "tokens",
                                               "content"]
    assert '<td class="num">1</td><td class="num">1.000</td>' in page
