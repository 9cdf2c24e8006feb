"""The audit log: exact lines, whole lines under threads and processes, rotation
with gzip, crash safety, and the round trip to the in-process report."""

from __future__ import annotations

import gzip
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from cupellation import ContextBudget, ContextItem, Pipeline, PriorityScorer, SelectionReport
from cupellation import settings as spine_settings
from cupellation.events import (
    ContentCapture,
    ItemEventBatch,
    PipelineEvent,
    apply_content_capture,
    event_from_json,
    event_to_json,
)
from cupellation.events._lines import LineEncoder
from cupellation.logs import AuditLog, read_runs
from pipeline._runs import RecordedRun, runs

from ._workload import run_once

WORKLOAD = Path(__file__).with_name("_workload.py")
ROOT = Path(__file__).resolve().parents[2]


def _entries(run: RecordedRun) -> list[Sequence[PipelineEvent]]:
    return [e if isinstance(e, ItemEventBatch) else (e,) for e in run.entries]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs)
def test_every_line_is_exactly_event_to_json_under_each_policy(run: RecordedRun) -> None:
    """For random runs, the fast batch encoder writes, byte for byte, the line the events module's
    event_to_json gives for the event after apply_content_capture, for every policy."""
    for capture in ContentCapture:
        encoder = LineEncoder(capture)
        for entry in _entries(run):
            expected = "".join(event_to_json(apply_content_capture(e, capture)) + "\n"
                               for e in entry)
            assert encoder.lines(entry).decode() == expected
            assert encoder.lines(entry).decode() == expected  # cached fragments too


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs)
def test_the_report_rebuilt_from_the_audit_log_equals_the_in_process_report(
        tmp_path_factory: pytest.TempPathFactory, run: RecordedRun) -> None:
    """Random runs (failed ones included) written by AuditLog and read back by
    read_runs give the very report the DiagnosticTraceCollector folded."""
    path = tmp_path_factory.mktemp("audit") / "a.jsonl"
    with AuditLog(path) as audit:
        for entry in _entries(run):
            audit.record(entry)
    rebuilt = list(read_runs(path))
    assert len(rebuilt) == 1
    assert rebuilt[0].report == run.report
    assert rebuilt[0].finished


def test_nothing_is_written_before_a_run_ends_and_everything_after(tmp_path: Path) -> None:
    """A run's lines are held until run_completed and then written in one piece, so a
    reader never sees half a run from a live process; flush() writes what is held."""
    path = tmp_path / "a.jsonl"
    audit = AuditLog(path)
    collector_events: list[bytes] = []
    pipeline = Pipeline(scorer=PriorityScorer())
    items = [ContextItem(f"c{k}", 5) for k in range(4)]

    class Spy:
        is_enabled = True
        detail_level = audit.detail_level

        def record(self, events: object) -> None:
            audit.record(events)  # type: ignore[arg-type]
            collector_events.append(path.read_bytes())

    pipeline.run(items, ContextBudget(100, 10), Spy())
    assert all(size == b"" for size in collector_events[:-1])
    lines = collector_events[-1].splitlines()
    assert [event_from_json(line).seq for line in lines] == list(range(len(lines)))
    audit.close()


def test_threads_sharing_one_audit_log_write_whole_lines_and_equal_reports(
        tmp_path: Path) -> None:
    """Eight threads running random pipelines into one AuditLog (rotating at 64 KiB)
    leave only whole lines, and every rebuilt report equals its in-process report."""
    path = tmp_path / "a.jsonl"
    audit = AuditLog(path, max_bytes=64_000, backup_count=100)
    expected: dict[str, SelectionReport] = {}
    lock = threading.Lock()

    def work(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(40):
            run_id, report = run_once(rng, audit)
            with lock:
                expected[run_id] = report

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    audit.close()
    assert len(list(tmp_path.glob("a.jsonl.*.gz"))) > 1
    reader = read_runs(path)
    rebuilt = {run.run_id: run.report for run in reader}
    assert reader.stats.damaged_lines == 0
    assert reader.stats.lines == reader.stats.records
    assert rebuilt == expected


@pytest.mark.slow
def test_processes_and_threads_share_one_rotating_log(tmp_path: Path) -> None:
    """Four real processes of three threads each append to one log that rotates every
    32 KiB under the flock protocol: no line is torn or lost, no backup is clobbered,
    and every run's rebuilt report equals the report its own process folded."""
    log, reports = tmp_path / "shared.jsonl", tmp_path / "reports.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    procs = [subprocess.Popen([sys.executable, str(WORKLOAD), str(log), str(reports),
                               str(seed), "25", "3", "32000"], env=env)
             for seed in range(4)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0, 0, 0]
    expected = {row["run_id"]: SelectionReport.from_json(row["report"])
                for row in map(json.loads, reports.read_text().splitlines())}
    assert len(expected) == 4 * 3 * 25
    reader = read_runs(log)
    rebuilt = {run.run_id: run.report for run in reader}
    assert reader.stats.damaged_lines == 0
    assert reader.stats.source_errors == []
    assert len(list(tmp_path.glob("shared.jsonl.*.gz"))) > 3
    assert rebuilt == expected


def test_rotation_keeps_backup_count_gzipped_backups_oldest_highest(tmp_path: Path) -> None:
    """Past max_bytes the file moves to .1.gz and older backups shift up; only
    backup_count backups remain, each a gzip of whole lines, and reading the base
    path reads the backups oldest first, then the live file."""
    path = tmp_path / "r.jsonl"
    audit = AuditLog(path, max_bytes=3_000, backup_count=3)
    rng = random.Random(7)
    order = [run_once(rng, audit, count=6)[0] for _ in range(60)]
    audit.close()
    backups = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("r.jsonl."))
    assert backups == ["r.jsonl.1.gz", "r.jsonl.2.gz", "r.jsonl.3.gz", "r.jsonl.lock"]
    for name in backups[:3]:
        text = gzip.decompress((tmp_path / name).read_bytes()).decode()
        assert text.endswith("\n")
        assert all(event_from_json(line) for line in text.split("\n")[:-1])
    assert path.stat().st_size <= 3_000 + 2_000
    seen = [run.run_id for run in read_runs(path)]
    assert seen == order[-len(seen):]  # the oldest runs were rotated away
    first = next(iter(read_runs(path)))
    assert first.is_complete or "no run_started" in " ".join(first.report.incomplete)


def test_an_externally_renamed_file_is_followed(tmp_path: Path) -> None:
    """Without its own rotation, the log reopens when its path names another file (a
    logrotate-style rename), so later runs land in the new file."""
    path = tmp_path / "x.jsonl"
    audit = AuditLog(path)
    rng = random.Random(3)
    first, _ = run_once(rng, audit)
    os.rename(path, tmp_path / "x.jsonl.old")
    second, _ = run_once(rng, audit)
    audit.close()
    assert [r.run_id for r in read_runs(path, rotated=False)] == [second]
    assert [r.run_id for r in read_runs(tmp_path / "x.jsonl.old", rotated=False)] == [first]


CRASHER = """
import random, sys
sys.path.insert(0, {tests!r})
from logs._workload import run_once
from cupellation.logs import AuditLog
audit = AuditLog(sys.argv[1], max_bytes=20000, backup_count=1000)
rng = random.Random(1)
run_once(rng, audit, count=rng.randint(0, 200))
print("ready", flush=True)  # one run is whole in the log, however slow the machine
while True:
    run_once(rng, audit, count=rng.randint(0, 200))
"""


@pytest.mark.parametrize("delay", [0.3, 0.7, 1.1])
def test_a_process_killed_while_writing_leaves_every_complete_line_readable(
        tmp_path: Path, delay: float) -> None:
    """A writer killed by SIGKILL at an arbitrary moment (mid-run, maybe mid-write or
    mid-rotation) leaves logs whose complete lines all decode; at most the last line
    of the live file is cut, counted as damaged, and nothing raises. The writer says
    ready once its first run is written, so the run found whole is there under any
    load; the delay after that only varies the moment of the kill."""
    path = tmp_path / "k.jsonl"
    script = tmp_path / "crasher.py"
    script.write_text(CRASHER.format(tests=str(ROOT / "tests")))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, str(script), str(path)], env=env,
                            stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"ready"
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    files = [p for p in tmp_path.iterdir() if p.name.startswith("k.jsonl")
             and not p.name.endswith((".lock", ".tmp"))]
    for file in files:
        data = file.read_bytes()
        data = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
        complete = data.split(b"\n")[:-1]
        for line in complete:
            event_from_json(line)
    reader = read_runs(path)
    found = list(reader)
    assert reader.stats.damaged_lines <= 1
    assert reader.stats.lines == reader.stats.accounted
    assert all(run.finished or not run.is_complete for run in found)
    assert sum(run.is_complete for run in found) >= 1


def test_content_capture_parameter_wins_over_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CUPELLATION_CAPTURE_CONTENT sets the policy when the parameter is absent, the
    parameter wins over it, the default is full, a bad value is refused, and the
    policy reaches run_started (so the rebuilt report says content was hashed)."""
    assert AuditLog(tmp_path / "a").content_capture is ContentCapture.FULL
    monkeypatch.setenv("CUPELLATION_CAPTURE_CONTENT", "hash")
    hashed = AuditLog(tmp_path / "b")
    assert hashed.content_capture is ContentCapture.HASH
    assert AuditLog(tmp_path / "c", content_capture="none").content_capture is (
        ContentCapture.NONE)
    run_once(random.Random(1), hashed, count=3)
    hashed.close()
    run = next(iter(read_runs(tmp_path / "b")))
    assert any("captured as 'hash'" in problem for problem in run.report.incomplete)
    assert all(e.item.content.startswith("sha256:") for e in run.report.excluded)
    monkeypatch.setattr(spine_settings, "_warned", set())
    monkeypatch.setenv("CUPELLATION_CAPTURE_CONTENT", "secret")
    # An invalid variable warns (OpenTelemetry's convention) and the default applies.
    with pytest.warns(RuntimeWarning, match="CUPELLATION_CAPTURE_CONTENT='secret'"):
        assert AuditLog(tmp_path / "d").content_capture is ContentCapture.FULL


def test_a_forked_child_writes_through_its_own_descriptors(tmp_path: Path) -> None:
    """After fork, a child's runs still land as whole lines in the same rotating log
    (it reopens its descriptors and lock rather than sharing the parent's)."""
    path = tmp_path / "f.jsonl"
    audit = AuditLog(path, max_bytes=10_000, backup_count=50)
    rng = random.Random(5)
    run_once(rng, audit)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            child = random.Random(6)
            for _ in range(30):
                run_once(child, audit)
            audit.close()
        finally:
            os._exit(0)
    for _ in range(30):
        run_once(rng, audit)
    os.waitpid(pid, 0)
    audit.close()
    reader = read_runs(path)
    found = list(reader)
    assert reader.stats.damaged_lines == 0
    assert len(found) == 61
    assert all(run.finished for run in found)


def test_bad_arguments_are_refused_in_the_caller() -> None:
    """Negative sizes, non-integers and an unwritable path fail when the log is made."""
    with pytest.raises(ValueError, match="max_bytes"):
        AuditLog("x.jsonl", max_bytes=-1)
    with pytest.raises(TypeError, match="backup_count"):
        AuditLog("x.jsonl", backup_count=1.5)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        AuditLog("/nonexistent-dir/x.jsonl")
