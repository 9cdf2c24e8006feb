"""README.md stays true: its Python example runs and the commands it gives exist."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_agent_builders_quickstart_runs_and_keeps_the_rules() -> None:
    """The agent builders' quickstart comes first, runs as written (offline: the sockets
    are blocked) and gives a window the provider accepts: the pinned system prompt and
    the last question kept, the tool exchange whole (its large output trimmed) or gone,
    within the budget, counted exactly."""
    from cupellation.chat import ordering_problems, select_messages_with_report  # noqa: PLC0415

    assert README.index("## Quickstart for agent builders") < README.index("## Quickstart\n")
    block = re.findall(r"```python\n(.*?)```", README, re.S)[0]
    assert "select_messages" in block
    namespace: dict[str, Any] = {}
    with _no_network():
        exec(compile(block, "README.md", "exec"), namespace)
    window, messages = namespace["window"], namespace["messages"]
    assert ordering_problems(window) == []
    assert window[0] is messages[0]
    assert window[-1] is messages[-1]
    assert window[2]["tool_calls"][0]["id"] == "call_1"
    assert "characters omitted" in window[3]["content"]
    selection = select_messages_with_report(messages, max_tokens=400,
                                            trim={"ToolOutput": 200})
    assert selection.tokens <= 400
    assert selection.token_counter == "tiktoken:o200k_base"


@contextmanager
def _no_network() -> Iterator[None]:
    """Every socket call fails while the block runs."""
    def blocked(*args: object, **kwargs: object) -> NoReturn:
        raise OSError("network blocked by the README test")

    with pytest.MonkeyPatch.context() as patch:
        for name in ("getaddrinfo", "create_connection"):
            patch.setattr(socket, name, blocked)
        patch.setattr(socket.socket, "connect", blocked)
        yield


def test_the_message_history_example_continues_the_quickstart() -> None:
    """The MessageHistory block, run after the agent builders' quickstart as README
    presents it: its history gives the quickstart's window, then sends the new
    exchange whole and the system prompt first."""
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert "MessageHistory" in blocks[1]
    namespace: dict[str, Any] = {}
    with _no_network():
        for block in blocks[:2]:
            exec(compile(block, "README.md", "exec"), namespace)
    window, history = namespace["window"], namespace["history"]
    assert window[0] is namespace["messages"][0]
    assert window[-2:] == history.messages[-2:]
    assert window[-2] is namespace["reply"]
    assert len(history) == len(namespace["messages"]) + 2


def test_python_examples_run_and_select_both_items() -> None:
    """Both pipeline examples execute as written and select both candidates; the
    quickstart fits in ten lines."""
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)[2:4]
    assert "Pipeline(scorer=RecencyScorer()" in blocks[0], "the quickstart comes third"
    assert "UShapedPlacer()" in blocks[1], "then the fuller example"
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
    assert ('.venv/bin/pytest -m "exhaustive or not exhaustive" -n auto --dist loadfile "$@"'
            in script)
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert """addopts = '-ra --strict-markers -m "not exhaustive"'""" in pyproject
    two_commands = README[README.index("## The two commands"):README.index("## Quickstart")]
    for words in ("chromium-driver", "Phoenix", "exhaustive", ".venv/bin/pytest"):
        assert words in two_commands


def test_python_example_prints_the_report_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    """The README's ``print(report.to_json())`` prints JSON text in the wire format's shape."""
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    exec(compile(next(b for b in blocks if "to_json()" in b), "README.md", "exec"), {})
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    assert set(json.loads(printed)) >= {"events", "included", "excluded",
                                        "total_candidates", "total_tokens_considered"}
