"""Every script in examples/ runs as a user would run it, and says what it should."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(EXAMPLES / script), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)


def test_quickstart_selects_and_explains() -> None:
    """The quickstart sends the newest turns and the pinned prompt, and says why the
    rest were left out (a duplicate among them)."""
    result = _run("quickstart.py")
    assert result.returncode == 0, result.stderr
    assert "You are a support agent." in result.stdout
    assert "(Deduplicated)" in result.stdout
    assert "(BudgetExceeded)" in result.stdout


def test_policy_file_example_builds_from_toml_and_presets() -> None:
    """The policy example reads its TOML file, applies the count cap (a capped tool
    output is CountCapExceeded) and prints a preset as TOML."""
    result = _run("policy_file.py")
    assert result.returncode == 0, result.stderr
    assert "policy 'review'" in result.stdout
    assert "CountCapExceeded" in result.stdout
    assert 'name = "CodeReview"' in result.stdout


def test_agent_loop_traces_every_step_and_rebuilds_the_reports() -> None:
    """The agent loop nests cupel.pipeline under each agent.step span, and rebuilds
    every step's report from the spans (the script asserts equality)."""
    result = _run("agent_loop.py")
    assert result.returncode == 0, result.stderr
    assert "6 reports rebuilt from 42 spans" in result.stdout
    assert "left out ['tool: lookup_invoice" in result.stdout


def test_audit_example_answers_why_from_the_log(tmp_path: Path) -> None:
    """The audit example writes a log, rebuilds each run from it, and `why` explains
    that the refund request lost to higher-scored items in all three runs."""
    log = tmp_path / "audit.jsonl"
    result = _run("audit_and_why.py", str(log))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("refund request left out; report complete: True") == 3
    assert result.stdout.count("EXCLUDED, BudgetExceeded") == 3
    assert log.is_file()


@pytest.mark.parametrize("script", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_every_example_is_exercised(script: str) -> None:
    """No example script goes untested: each has a test here or in tests/integration."""
    tested = (Path(__file__).read_text(encoding="utf-8")
              + (ROOT / "tests" / "integration" / "test_example_otlp.py").read_text(
                  encoding="utf-8"))
    assert f'"{script}"' in tested
