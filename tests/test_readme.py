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
    runs the test command from the repository root and nothing else."""
    commands = re.findall(r"^bash (scripts/\S+)", README, re.M)
    assert commands == ["scripts/demo.sh", "scripts/test.sh"]
    for command in commands:
        assert (ROOT / command).is_file()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert ci[0] == "#!/usr/bin/env bash"
    assert [line for line in ci[1:] if line.strip() and not line.startswith("#")] == [
        'cd "$(dirname "$0")/.." && exec bash scripts/test.sh']


def test_the_test_command_installs_each_component_and_runs_every_test() -> None:
    """scripts/test.sh installs Chromium (apt, only when dpkg lacks it) and Phoenix (its
    own venv), runs the exhaustive tests the default pytest run leaves out, and the
    README says both."""
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert "\ndebian_packages chromium chromium chromium-driver\n" in script
    assert "\ninstaller_script phoenix scripts/install-phoenix.sh\n" in script
    assert 'dpkg -s "$@"' in script
    assert '.venv/bin/pytest -m "exhaustive or not exhaustive" "$@"' in script
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert """addopts = '-ra --strict-markers -m "not exhaustive"'""" in pyproject
    two_commands = README[README.index("## The two commands"):README.index("## Quickstart")]
    for words in ("chromium-driver", "Phoenix", "exhaustive", ".venv/bin/pytest"):
        assert words in two_commands


def test_python_example_prints_the_report_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    """The README's ``print(report.to_json())`` prints JSON text in the seeds' shape."""
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    exec(compile(blocks[0], "README.md", "exec"), {})
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    assert set(json.loads(printed)) >= {"events", "included", "excluded",
                                        "total_candidates", "total_tokens_considered"}
