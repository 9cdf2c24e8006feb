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
    """--quick prints conversion, counting and the pipeline apart for 200 messages, the
    agent loop's later-call overhead against the pipeline's first run on the turn's units
    and against it warm, the same for a MessageHistory's select (and its append), and
    the target's verdicts; --json holds the same figures."""
    out = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, str(BENCHMARKS / "bench_chat.py"), "--quick",
                             "--json", str(out)], capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    for words in ("count (o200k_base)", "conversion", "200 ContextItems", "pipeline",
                  "select_messages (first call)", "overhead, against the warm pipeline",
                  "target: later calls add <= 20%", "pipeline, first run ms",
                  "overhead of MessageHistory.select", "MessageHistory.extend ms"):
        assert words in result.stdout
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert set(figures["part_one_ms"]) == {"count (o200k_base)", "conversion",
                                           "200 ContextItems", "pipeline",
                                           "select_messages (first call)"}
    assert figures["agent_loop"]["units"] > 20
    assert isinstance(figures["met"], bool)
    assert isinstance(figures["met by MessageHistory"], bool)
    assert figures["agent_loop"]["MessageHistory.select ms"] > 0


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
