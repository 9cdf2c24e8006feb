"""Smoke tests of benchmarks/bench_chat.py and the rewritten "Why" agent script: they
run and report what they promise. Nothing here asserts a timing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

#: Seconds of work: the exhaustive run (scripts/test.sh) has it.
pytestmark = pytest.mark.exhaustive


def test_bench_chat_reports_each_part_and_the_loop(tmp_path: Path) -> None:
    """--quick prints conversion, counting and the pipeline apart for 200 messages, and
    the agent loop's whole turn (MessageHistory and the list call) as a ratio to the warm
    pipeline on the same units, in loop mode, the new texts' count set aside; --json
    holds the same figures and ratios."""
    out = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, str(BENCHMARKS / "bench_chat.py"), "--quick",
                             "--json", str(out)], capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    for words in ("count (o200k_base)", "conversion", "200 ContextItems", "pipeline",
                  "select_messages (first call)", "loop mode: back-to-back calls",
                  "history_turn/warm_pipeline", "list_turn/warm_pipeline",
                  "count/warm_pipeline", "(set aside, not judged)"):
        assert words in result.stdout
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert set(figures["figures"]) == {"count (o200k_base)", "conversion",
                                       "200 ContextItems", "pipeline",
                                       "select_messages (first call)"}
    assert figures["mode"] == "loop"
    assert {"history_turn/warm_pipeline", "list_turn/warm_pipeline"} <= set(figures["ratios"])
    assert figures["target"] == 1.2


def test_the_why_agent_script_sends_a_valid_exact_window() -> None:
    """The rewritten script sends no orphaned call or result, counts exactly, trims the
    largest tool outputs instead of losing them, and keeps the last question."""
    result = subprocess.run([sys.executable, str(BENCHMARKS / "why_agent_script.py")],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "provider rules broken: []" in result.stdout
    assert "orphans: 0" in result.stdout
    assert "counted with tiktoken:o200k_base (estimates: False)" in result.stdout
    assert "trimmed from 3,006 to" in result.stdout
    assert "So was I charged twice?" in result.stdout
