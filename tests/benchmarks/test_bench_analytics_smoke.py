"""Smoke test of the analytics benchmark: it runs at a tiny size and prints its
targets. Nothing here asserts a timing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS_DIR = Path(__file__).resolve().parents[2] / "benchmarks"

#: The benchmark takes seconds: the exhaustive run (scripts/test.sh) has it.
pytestmark = pytest.mark.exhaustive


def test_bench_analytics_runs_and_writes_its_targets(tmp_path: Path) -> None:
    """bench_analytics.py --quick measures the budget search and the replay, prints
    them, and writes the figures its targets read (CPU time spreads, dry runs, the
    replay rate and memory ratio) for check.py --all."""
    out = tmp_path / "analytics.json"
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS_DIR / "bench_analytics.py"), "--quick", "--json",
         str(out)], capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr
    assert "find_min_budget_for" in result.stdout
    payload = json.loads(out.read_text(encoding="utf-8"))
    assert payload["benchmark"] == "analytics"
    assert set(payload["figures"]) == {"find_min_cpu_ms@1000", "find_min_dry_runs",
                                       "replay_events_per_s@30000", "replay_peak_200/20"}
    for spread in payload["figures"].values():
        assert spread["min"] <= spread["median"] <= spread["max"]
    assert payload["find_min_budget_for"]["max_dry_runs"] <= 20
