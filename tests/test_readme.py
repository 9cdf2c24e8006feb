"""README.md stays true: its Python example runs and the commands it gives exist."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_python_examples_run_and_select_both_items() -> None:
    """Both usage examples execute as written and select both candidates; the
    quickstart fits in ten lines."""
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert len(blocks) == 2, "README should have the quickstart and the fuller example"
    assert len(blocks[0].strip().splitlines()) <= 10
    for block in blocks:
        namespace: dict[str, object] = {}
        exec(compile(block, "README.md", "exec"), namespace)
        window = namespace["window"]
        assert isinstance(window, list)
        assert len(window) == 2


def test_the_two_commands_exist_and_ci_runs_the_test_command() -> None:
    """The two commands README gives are scripts in the repository, and .ci/run
    calls the same test command."""
    commands = re.findall(r"^bash (scripts/\S+)", README, re.M)
    assert commands == ["scripts/demo.sh", "scripts/test.sh"]
    for command in commands:
        assert (ROOT / command).is_file()
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_python_example_prints_the_report_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    """The README's ``print(report.to_json())`` prints JSON text in the seeds' shape."""
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    exec(compile(blocks[0], "README.md", "exec"), {})
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    assert set(json.loads(printed)) >= {"events", "included", "excluded",
                                        "total_candidates", "total_tokens_considered"}
