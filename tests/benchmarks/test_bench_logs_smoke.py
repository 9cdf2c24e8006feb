"""Smoke tests of the log benchmark and the log-reader fuzzer: they run at a tiny size
and print their tables. Nothing here asserts a timing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS_DIR = Path(__file__).resolve().parents[2] / "benchmarks"

#: The benchmark scripts take seconds each: the exhaustive run (scripts/test.sh) has them.
pytestmark = pytest.mark.exhaustive


def test_bench_logs_runs_and_writes_its_targets(tmp_path: Path) -> None:
    """bench_logs.py runs on a tiny log and reports each of its targets as PASS or
    MISS, in its table and its JSON."""
    out = tmp_path / "logs.json"
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS_DIR / "bench_logs.py"), "--events", "3000",
         "--repeats", "1", "--pairs", "3", "--json", str(out)],
        capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert "AuditLog run / untraced run" in result.stdout
    payload = json.loads(out.read_text(encoding="utf-8"))
    assert payload["targets"]
    assert all(t["status"] in {"PASS", "MISS"} for t in payload["targets"])


def test_fuzzer_accounts_for_every_line() -> None:
    """fuzz_log_reader.py feeds generated inputs to the reader without an exception
    escaping, and exits 0."""
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS_DIR / "fuzz_log_reader.py"), "--inputs", "300"],
        capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr + result.stdout
    assert result.stdout.strip()
