"""Smoke test of the log-reader fuzzer: it runs at a tiny size. (bench_logs itself runs
in test_benchmarks_smoke, through the regression check.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS_DIR = Path(__file__).resolve().parents[2] / "benchmarks"

#: The benchmark scripts take seconds each: the exhaustive run (scripts/test.sh) has them.
pytestmark = pytest.mark.exhaustive


def test_fuzzer_accounts_for_every_line() -> None:
    """fuzz_log_reader.py feeds generated inputs to the reader without an exception
    escaping, and exits 0."""
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS_DIR / "fuzz_log_reader.py"), "--inputs", "300"],
        capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr + result.stdout
    assert result.stdout.strip()
