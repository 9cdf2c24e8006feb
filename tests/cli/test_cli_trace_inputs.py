"""The commands that read runs (``why``, ``audit``, ``replay``, ``diff --log``,
``report``) take trace files as they take logs: the demo's trace.jsonl gives what its
audit log gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _cli_support import cli

from cupellation.logs import read_runs


@pytest.fixture(scope="module")
def demos(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two demo runs (targets 400 and 200), each with its trace file and audit log."""
    root = tmp_path_factory.mktemp("demos")
    for target in ("400", "200"):
        result = cli("demo", "--quiet", "--out", root / target, "--audit-log",
                     root / target / "audit.jsonl", "--target-tokens", target)
        assert result.code == 0, result.err
    return root / "400", root / "200"


@pytest.mark.parametrize("argv", [
    ["why", "{trace}", "--match", "Billing FAQ"],
    ["audit", "{trace}"],
    ["replay", "{trace}", "--policy", "chat"],
], ids=["why", "audit", "replay"])
def test_a_trace_file_reads_as_its_audit_log(demos: tuple[Path, Path],
                                             argv: list[str]) -> None:
    """Each command prints the same for the demo's trace file as for its audit log
    (but audit's count of log lines: a trace file has none), and exits 0 (it said "no
    run found" for the trace file before)."""
    demo = demos[0]
    from_trace = cli(*[a.format(trace=demo / "trace.jsonl") for a in argv])
    from_log = cli(*[a.format(trace=demo / "audit.jsonl") for a in argv])
    assert from_trace.code == from_log.code == 0, from_trace.err

    def shown(text: str) -> list[str]:
        return [line for line in text.splitlines()
                if not line.startswith(("Lines: ", "Trace files: "))]

    assert shown(from_trace.out) == shown(from_log.out)
    assert from_trace.out.strip()


def test_audit_counts_a_trace_file_in_spans_not_lines(demos: tuple[Path, Path]) -> None:
    """audit of a trace file counts what it read in the unit it read: "Trace files: 1
    read, 6 spans" (the demo's root and five stage spans), not "Lines: 0 read"; its JSON
    says the same under "traces"; given a log too, both counts are printed."""
    demo = demos[0]
    text = cli("audit", demo / "trace.jsonl")
    assert text.code == 0, text.err
    assert "Trace files: 1 read, 6 spans" in text.out
    assert "Lines: " not in text.out
    data = json.loads(cli("audit", demo / "trace.jsonl", "--format", "json").out)
    assert data["traces"] == {"files": 1, "spans": 6}
    assert data["lines"]["read"] == 0
    both = cli("audit", demo / "trace.jsonl", demo / "audit.jsonl")
    assert "Trace files: 1 read, 6 spans" in both.out
    assert "Runs: 2 " in both.out
    lines = int(both.out.split("Lines: ")[1].split(" ")[0])
    assert lines == len((demo / "audit.jsonl").read_text(encoding="utf-8").splitlines())


def test_diff_takes_runs_from_trace_files(demos: tuple[Path, Path]) -> None:
    """``diff A B --log T1 --log T2`` finds both runs in trace files, as in logs."""
    (first,), (second,) = (list(read_runs(d / "audit.jsonl")) for d in demos)
    from_traces = cli("diff", first.run_id, second.run_id, "--log", demos[0] / "trace.jsonl",
                      "--log", demos[1] / "trace.jsonl")
    from_logs = cli("diff", first.run_id, second.run_id, "--log", demos[0] / "audit.jsonl",
                    "--log", demos[1] / "audit.jsonl")
    assert from_traces.code == from_logs.code, from_traces.err  # (1: they differ)
    assert from_traces.out == from_logs.out
    assert "Lost (included by A, excluded by B): 6" in from_traces.out


def test_run_filters_choose_among_trace_runs_as_among_logged_ones(
        demos: tuple[Path, Path]) -> None:
    """The run filters keep the same runs of a trace file as of its audit log (the run
    and none), and report refuses them for a trace or report file: exit 2, one line."""
    demo = demos[0]
    (run,) = read_runs(demo / "audit.jsonl")
    assert run.started is not None
    # The slicer's type name, in other case: text of its pipeline description.
    slicer = json.loads(str(run.started.pipeline["slicer"]))["type"].upper()
    for filters, code in ((["--policy", slicer], 0), (["--session", "nobody"], 1),
                          (["--kind", "NoSuchKind"], 1)):
        from_trace = cli("audit", demo / "trace.jsonl", *filters)
        from_log = cli("audit", demo / "audit.jsonl", *filters)
        assert from_trace.code == from_log.code == code, (filters, from_trace.err)
        assert ("Runs: 1 " in from_trace.out) == (code == 0)
    for source in ("trace.jsonl", "report.json"):
        refused = cli("report", demo / source, "--user", "u-1")
        assert refused.code == 2
        assert refused.err.count("\n") == 1
        assert "--user" in refused.err
