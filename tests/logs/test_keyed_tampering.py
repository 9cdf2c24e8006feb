"""Keyed digests that mean something (issue 22, point 2): with the key at writer and
reader, a run whose keyed digest was stripped, downgraded to a recomputed plain one,
or rewritten as schema 2 by someone without the key is flagged by every reader of
logs and event files (report and audit --strict exit 3); event files written with
the key are signed with it; a keyed run read without the key says so first."""

from __future__ import annotations

import io
import json
import random
from dataclasses import dataclass
from pathlib import Path

import pytest
import structlog

from _tampering import MOVES, run_ids, tamper_lines
from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    Pipeline,
    RecencyScorer,
    TraceDetailLevel,
    build_report,
)
from cupellation.cli import main
from cupellation.events import events_from_json_lines
from cupellation.events._digest import DigestCheck, Verification, digest_verdict
from cupellation.logs import AuditLog, StructlogSink, read_runs

from ._workload import run_once

KEY = "writer-and-reader-key"
BUDGET = ("--max-tokens", "1000", "--target-tokens", "500")


@dataclass(frozen=True)
class _Result:
    code: int
    out: str
    err: str


def run_main(capsys: pytest.CaptureFixture[str], *args: str | Path) -> _Result:
    """``cupellation ARGS`` in this process: exit status, stdout, stderr."""
    capsys.readouterr()
    code = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return _Result(code, captured.out, captured.err)
_FORM = {"strip": "it carries no digest",
         "plain": "it carries a plain sha256: digest",
         "schema 2": "it holds lines written in schema 2, before keyed digests"}


def _keyed_log(tmp_path: Path, count: int = 2) -> Path:
    path = tmp_path / "audit.jsonl"
    with AuditLog(path, digest_key=KEY) as audit:
        for k in range(count):
            run_once(random.Random(k), audit, count=8)
    return path


@pytest.mark.parametrize("move", MOVES)
def test_a_tampered_keyed_log_is_flagged_when_the_reader_holds_the_key(
        tmp_path: Path, move: str) -> None:
    """The attacker's move on one run: with the key, that run is not clean, and the
    note (listed first) names the form it carries; the untouched run still verifies.
    Read without a key the stripped and downgraded runs pass as clean (which is why
    the key must be set at the reader: the documented limit)."""
    path = _keyed_log(tmp_path)
    first, second = run_ids(path.read_bytes())
    path.write_bytes(tamper_lines(path.read_bytes(), move, first))
    runs = {run.run_id: run for run in read_runs(path, digest_key=KEY)}
    tampered = runs[first]
    assert not tampered.is_complete
    assert tampered.report.incomplete[0].startswith(
        f"not signed with the configured key: {_FORM[move]}")
    assert runs[second].verification is Verification.VERIFIED
    assert runs[second].is_complete
    if move != "schema 2":
        (keyless,) = [run for run in read_runs(path) if run.run_id == first]
        assert keyless.is_complete  # what a reader without the key cannot see


@pytest.mark.parametrize("move", MOVES)
def test_report_and_audit_strict_exit_3_for_a_tampered_keyed_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        move: str) -> None:
    """The command line with CUPELLATION_DIGEST_KEY: report exits 3 with the signature
    note as its first line, its JSON lists it in incomplete, and audit --strict exits 3
    listing the run; the untampered log exits 0 both ways."""
    path = _keyed_log(tmp_path, count=1)
    monkeypatch.setenv("CUPELLATION_DIGEST_KEY", KEY)
    assert run_main(capsys, "report", path).code == 0
    assert run_main(capsys, "audit", "--strict", path).code == 0
    path.write_bytes(tamper_lines(path.read_bytes(), move))
    shown = run_main(capsys, "report", path)
    assert shown.code == 3
    assert shown.out.splitlines()[0].startswith(
        "UNVERIFIED: this report may not be the run that was written: not signed with "
        "the configured key")
    as_json = run_main(capsys, "report", path, "--format", "json")
    assert as_json.code == 3
    assert json.loads(as_json.out)["incomplete"][0].startswith(
        "not signed with the configured key")
    audit = run_main(capsys, "audit", "--strict", "--format", "json", path)
    assert audit.code == 3
    (listed,) = json.loads(audit.out)["incomplete_runs"]
    assert listed["problems"][0].startswith("not signed with the configured key")


def test_a_keyed_log_read_without_the_key_says_so_in_its_first_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No key at the reader: the run's keyed digest cannot be checked, and the report's
    first line (text), its JSON's incomplete and report's exit status (3) say so; a
    tampered keyed log is no quieter."""
    path = _keyed_log(tmp_path, count=1)
    shown = run_main(capsys, "report", path)
    assert shown.code == 3
    assert shown.out.splitlines()[0].startswith(
        "UNVERIFIED: this report may not be the run that was written: signature not "
        "checked: the run carries a keyed digest (hmac-sha256:) and no key is configured")
    assert "signature not checked" in shown.err
    as_json = json.loads(run_main(capsys, "report", path, "--format", "json").out)
    assert as_json["incomplete"][0].startswith("signature not checked")
    assert run_main(capsys, "report", "--allow-incomplete", path).code == 0
    lines = path.read_text().split("\n")
    k = next(k for k, line in enumerate(lines) if '"score":' in line)
    lines[k] = lines[k].replace('"score":', '"score":1', 1)
    path.write_text("\n".join(lines))
    assert run_main(capsys, "report", path).out.splitlines()[0].startswith(
        "UNVERIFIED: this report may not be the run that was written: signature not checked")


@pytest.mark.parametrize("where", ["--events", "demo"])
def test_event_files_are_signed_with_the_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        where: str) -> None:
    """select --events and the demo's events.jsonl carry hmac-sha256: when
    CUPELLATION_DIGEST_KEY is set, and read back verified with it; each attacker move
    on them is flagged (report exits 3)."""
    monkeypatch.setenv("CUPELLATION_DIGEST_KEY", KEY)
    if where == "demo":
        assert run_main(capsys, "demo", "--out", tmp_path / "demo").code == 0
        events = tmp_path / "demo" / "events.jsonl"
    else:
        items = tmp_path / "items.json"
        items.write_text(json.dumps([{"content": f"item {k}", "tokens": 10 + k}
                                     for k in range(6)]))
        events = tmp_path / "events.jsonl"
        assert run_main(capsys, "select", items, *BUDGET, "-q", "--events", events).code == 0
    end = json.loads(events.read_text().split("\n")[-2])
    assert end["digest"].startswith("hmac-sha256:")
    (run,) = read_runs(events)
    assert run.verification is Verification.VERIFIED
    assert run.is_complete
    original = events.read_bytes()
    for move in MOVES:
        events.write_bytes(tamper_lines(original, move))
        assert run_main(capsys, "report", events).code == 3, move


def test_structlog_records_are_signed_with_the_key_and_flagged_when_stripped() -> None:
    """StructlogSink with digest_key signs its run_completed record (hmac-sha256:),
    which reads back verified with the key; the same records with the digest stripped
    (and a score changed) are flagged."""
    out = io.StringIO()
    logger = structlog.wrap_logger(structlog.PrintLogger(out),
                                   processors=[structlog.processors.JSONRenderer()])
    run_once(random.Random(5), StructlogSink(logger, digest_key=KEY), count=6)  # type: ignore[arg-type]
    data = out.getvalue().encode()
    end = json.loads(data.split(b"\n")[-2])
    assert end["digest"].startswith("hmac-sha256:")
    (run,) = read_runs(io.BytesIO(data), digest_key=KEY)
    assert run.verification is Verification.VERIFIED
    assert run.is_complete
    (stripped,) = read_runs(io.BytesIO(tamper_lines(data, "strip")), digest_key=KEY)
    assert stripped.report.incomplete[0] == ("not signed with the configured key: it "
                                             "carries no digest")


@pytest.mark.parametrize("move", MOVES)
def test_build_report_over_decoded_events_judges_the_digest_alike(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, move: str) -> None:
    """build_report over events decoded from a keyed file, given the key: every move is
    flagged (a missing digest too: digest_key= says the events are a stored run).
    With the key only in the environment, events without a digest are folded
    unjudged (they may come from a pipeline in this process), so an in-process
    report stays whole."""
    path = _keyed_log(tmp_path, count=1)
    text = tamper_lines(path.read_bytes(), move)
    report = build_report(events_from_json_lines(text), digest_key=KEY)
    assert report.incomplete[0].startswith("not signed with the configured key: it carries")
    monkeypatch.setenv("CUPELLATION_DIGEST_KEY", KEY)
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    Pipeline(RecencyScorer()).run([ContextItem("a", 5), ContextItem("b", 7)],
                                  ContextBudget(100, 50), collector)
    assert collector.build_report().is_complete


_PLAIN = "sha256:" + "0" * 64
_KEYED = "hmac-sha256:" + "0" * 64


@pytest.mark.parametrize(
    ("status", "recorded", "key", "old", "clean", "note"),
    [
        (Verification.VERIFIED, _KEYED, True, None, True, None),
        (Verification.VERIFIED, _PLAIN, False, None, True, None),
        (Verification.UNVERIFIED, None, False, None, True, None),
        (Verification.UNVERIFIED, None, False, 2, True, None),
        (Verification.UNKEYED, _PLAIN, True, None, False, "it carries a plain sha256:"),
        (Verification.UNKEYED, "sha256-columns:" + "0" * 64, True, None, False,
         "it carries a plain sha256-columns:"),
        (Verification.UNVERIFIED, None, True, None, False, "it carries no digest"),
        (Verification.UNVERIFIED, None, True, 2, False, "schema 2, before keyed digests"),
        (Verification.VERIFIED, _KEYED, True, 2, False, "schema 2, before keyed digests"),
        (Verification.KEY_MISSING, _KEYED, False, None, False,
         "signature not checked: the run carries a keyed digest (hmac-sha256:)"),
        (Verification.VERIFIED, _PLAIN, False, 2, False, "lines written in schema 2 are not"),
        (Verification.MISMATCH, _KEYED, True, None, False, "digest mismatch"),
    ])
def test_the_one_policy_decides_every_case(status: Verification, recorded: str | None,
                                           key: bool, old: int | None, clean: bool,
                                           note: str | None) -> None:
    """digest_verdict, the one policy every reader calls: a key at the reader accepts
    only a verified keyed digest over current lines; no key accepts plain or absent
    digests but states a keyed one it cannot check; a mismatch is never clean."""
    verdict = digest_verdict(DigestCheck(status), recorded, key_present=key, old_schema=old)
    assert (verdict.note is None) is clean
    if note is not None:
        assert verdict.note is not None
        assert note in verdict.note
