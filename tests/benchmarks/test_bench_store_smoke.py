"""Smoke test of the store benchmark: it runs at a tiny size and prints its figures.
Nothing here asserts a timing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS_DIR = Path(__file__).resolve().parents[2] / "benchmarks"

#: The benchmark takes seconds: the exhaustive run (scripts/test.sh) has it.
pytestmark = pytest.mark.exhaustive


def test_bench_store_loads_a_log_and_reads_a_run_back(tmp_path: Path) -> None:
    """bench_store.py loads a small audit log into a fresh chDB store, counts every
    event it wrote, and reads one whole run back."""
    out = tmp_path / "store.json"
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS_DIR / "bench_store.py"), "--events", "3000",
         "--json", str(out)], capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr
    assert "events/s" in result.stdout
    figures = json.loads(out.read_text(encoding="utf-8"))["figures"]
    assert figures["events"] >= 3000
    assert figures["one_run_events"] > 1000
