"""The per-run digest in logs: written by the sinks, recomputed by every reader, and a
mismatch reported, never silently passed; keyed digests need the key."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import random
import re
from pathlib import Path

import pytest
import structlog

from cupellation import SelectionReport, build_report
from cupellation.events import (
    RunCompleted,
    RunDigest,
    Verification,
    event_from_json,
    events_from_json_lines,
)
from cupellation.logs import AuditLog, StructlogSink, read_runs

from ._workload import run_once


def _log(tmp_path: Path, count: int = 3, **options: object
         ) -> tuple[Path, dict[str, SelectionReport]]:
    path = tmp_path / "audit.jsonl"
    reports = {}
    with AuditLog(path, **options) as audit:  # type: ignore[arg-type]
        for k in range(count):
            run_id, report = run_once(random.Random(k), audit, count=8)
            reports[run_id] = report
    return path, reports


def test_every_run_ends_with_its_digest_and_reads_back_verified(tmp_path: Path) -> None:
    """Each run_completed line carries sha256:<64 hex> over the run's lines as written
    (the end line without it); read_runs verifies every run, reports unchanged."""
    path, reports = _log(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    runs = list(read_runs(path))
    assert [run.verification for run in runs] == [Verification.VERIFIED] * 3
    for run in runs:
        assert run.report == reports[run.run_id]
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", run.digest or "")
    first = runs[0].run_id
    own = [line for line in lines if json.loads(line)["run_id"] == first]
    end = json.loads(own[-1])
    recorded = end.pop("digest")
    unsigned = json.dumps(end, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
    assert recorded == "sha256:" + hashlib.sha256(b"".join(own[:-1]) + unsigned).hexdigest()


def test_a_value_swapped_for_another_plausible_one_is_a_mismatch(tmp_path: Path) -> None:
    """A score changed to another valid score rebuilds a report that looks whole but
    differs: the digest says so, in incomplete and in the run's verification."""
    path, _reports = _log(tmp_path, count=1)
    lines = path.read_text().split("\n")[:-1]
    k = next(k for k, line in enumerate(lines) if '"score":' in line)
    lines[k] = re.sub(r'"score":[0-9.e-]+', '"score":0.123', lines[k], count=1)
    path.write_text("\n".join(lines) + "\n")
    (run,) = read_runs(path)
    assert run.verification is Verification.MISMATCH
    assert any(note.startswith("digest mismatch: the run's events were changed after they "
                               "were written (expected sha256:") for note in run.report.incomplete)


def test_swapped_lines_are_reported(tmp_path: Path) -> None:
    """Two item lines swapped: the sequence check and the digest both say so."""
    path, _ = _log(tmp_path, count=1)
    lines = path.read_text().split("\n")[:-1]
    items = [k for k, line in enumerate(lines) if '"item.content"' in line]
    a, b = items[0], items[1]
    lines[a], lines[b] = lines[b], lines[a]
    path.write_text("\n".join(lines) + "\n")
    (run,) = read_runs(path)
    assert run.verification is Verification.MISMATCH
    assert not run.report.is_complete


def test_a_reformatted_log_still_verifies(tmp_path: Path) -> None:
    """A shipper that re-serialises every line (keys reordered, spaces added) changes no
    event: the reader hashes the canonical lines of what it decoded and verifies."""
    path, reports = _log(tmp_path, count=2)
    lines = [json.loads(line) for line in path.read_text().split("\n")[:-1]]
    path.write_text("".join(json.dumps(dict(reversed(list(record.items())))) + "\n"
                            for record in lines))
    runs = list(read_runs(path))
    assert [run.verification for run in runs] == [Verification.VERIFIED] * 2
    assert all(run.report == reports[run.run_id] for run in runs)


def test_a_keyed_digest_needs_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a key the digest is hmac-sha256 and verifies with the same key (parameter or
    environment); without the key it is 'key missing' and the report says first that
    the signature was not checked; with another key a mismatch. A reader holding a key
    calls a plain digest 'unkeyed', not verified, and not clean."""
    path, _ = _log(tmp_path, count=1, digest_key="k1")
    assert next(iter(read_runs(path, digest_key=b"k1"))).verification is Verification.VERIFIED
    (run,) = read_runs(path)
    assert run.digest is not None
    assert run.digest.startswith("hmac-sha256:")
    assert run.verification is Verification.KEY_MISSING
    assert run.report.incomplete[0].startswith("signature not checked: the run carries a "
                                               "keyed digest (hmac-sha256:)")
    monkeypatch.setenv("CUPELLATION_DIGEST_KEY", "k1")
    assert next(iter(read_runs(path))).verification is Verification.VERIFIED
    (wrong,) = read_runs(path, digest_key="k2")
    assert wrong.verification is Verification.MISMATCH
    assert any("or the key differs" in note for note in wrong.report.incomplete)
    monkeypatch.delenv("CUPELLATION_DIGEST_KEY")
    (tmp_path / "plain").mkdir()
    plain, _ = _log(tmp_path / "plain", count=1)
    (unkeyed,) = read_runs(plain, digest_key="k1")
    assert unkeyed.verification is Verification.UNKEYED
    assert unkeyed.report.incomplete[0].startswith(
        "not signed with the configured key: it carries a plain sha256: digest")


def test_a_schema_2_log_is_unverified_not_incomplete(tmp_path: Path) -> None:
    """Lines written before the digest (schema 2) read as before: the run is whole,
    and its verification says 'unverified'."""
    path, reports = _log(tmp_path, count=1)
    old = []
    for line in path.read_text().split("\n")[:-1]:
        record = json.loads(line)
        record.pop("digest", None)
        record["schema"] = 2
        old.append(json.dumps(record))
    path.write_text("\n".join(old) + "\n")
    (run,) = read_runs(path)
    assert run.verification is Verification.UNVERIFIED
    assert run.digest is None
    assert run.report == next(iter(reports.values()))


def test_events_decoded_from_a_file_verify_when_folded(tmp_path: Path) -> None:
    """build_report over events_from_json_lines checks the digest the end event carries:
    the same events verify; a changed one is listed in incomplete."""
    path, reports = _log(tmp_path, count=1)
    text = path.read_text()
    report = build_report(events_from_json_lines(text))
    assert report == next(iter(reports.values()))
    changed = re.sub(r'"item.tokens":(\d+)', lambda m: f'"item.tokens":{int(m[1]) + 1}',
                     text, count=1)
    assert any(note.startswith("digest mismatch")
               for note in build_report(events_from_json_lines(changed)).incomplete)


def test_structlog_records_carry_and_verify_the_digest() -> None:
    """StructlogSink writes the run's digest into its run_completed record; lines a
    structlog JSONRenderer wrote read back verified."""
    out = io.StringIO()
    logger = structlog.wrap_logger(
        structlog.PrintLogger(out), processors=[structlog.processors.add_log_level,
                                                structlog.processors.JSONRenderer()])
    _run_id, report = run_once(random.Random(3), StructlogSink(logger), count=6)  # type: ignore[arg-type]
    lines = out.getvalue().split("\n")[:-1]
    end = json.loads(lines[-1])
    assert end["event"] in ("cupel.run_completed", "cupel.run_failed")
    assert end["digest"].startswith("sha256:")
    (run,) = read_runs(io.StringIO(out.getvalue()))
    assert run.verification is Verification.VERIFIED
    assert run.report == report
    assert logging.getLogger("cupellation").handlers  # the library's NullHandler only


def test_the_digest_accumulates_chunks_as_one() -> None:
    """RunDigest over chunks equals one update of their concatenation; the prefix names
    the form."""
    one, two = RunDigest(), RunDigest()
    one.update(b"ab\n")
    one.update(b"cd\n")
    two.update(b"ab\ncd\n")
    assert one.hexdigest() == two.hexdigest() == "sha256:" + hashlib.sha256(
        b"ab\ncd\n").hexdigest()
    assert RunDigest(b"key").hexdigest().startswith("hmac-sha256:")
    end = event_from_json('{"type":"run_completed","schema":3,"run_id":"r","seq":1,'
                          '"duration_ms":1.0,"included_count":0,"included_tokens":0,'
                          '"excluded_count":0,"digest":"sha256:00"}')
    assert isinstance(end, RunCompleted)
    assert end.digest == "sha256:00"


@pytest.mark.parametrize("capture", ["hash", "none"])
def test_the_digest_holds_for_what_was_recorded_under_every_capture(
        tmp_path: Path, capture: str) -> None:
    """Under content capture hash and none the lines hold the captured content; the
    digest covers them as recorded, so every run reads back verified, and a changed
    token count in such a log is still a mismatch."""
    path, _reports = _log(tmp_path, content_capture=capture)
    runs = list(read_runs(path))
    assert [run.verification for run in runs] == [Verification.VERIFIED] * 3
    lines = path.read_text().split("\n")[:-1]
    k = next(k for k, line in enumerate(lines) if '"item.tokens":' in line)
    lines[k] = re.sub(r'"item.tokens":(\d+)', lambda m: f'"item.tokens":{int(m[1]) + 1}',
                      lines[k], count=1)
    path.write_text("\n".join(lines) + "\n")
    assert any(run.verification is Verification.MISMATCH for run in read_runs(path))
