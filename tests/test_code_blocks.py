"""Every code block of README.md and docs/ works as printed: each Python block runs, in
order in one namespace per file (a block may continue the one before), offline; a block
that needs what this machine cannot give (a server) or never ends is marked with
``<!-- parse-only: why -->`` on the line before it and is compiled only; every bash
block is valid bash, and every ``cupellation`` command in it names a real subcommand."""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import pytest

from cupellation.cli import SUBCOMMANDS

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_PARSE_ONLY = re.compile(r"<!-- parse-only: [^>]+ -->")


def _blocks(path: Path) -> list[tuple[str, str, bool, int]]:
    """(language, code, parse-only, line) of each fenced block of ``path``."""
    text = path.read_text(encoding="utf-8")
    out = []
    for match in re.finditer(r"^```(\w+)\n(.*?)^```", text, re.M | re.S):
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        line = text.count("\n", 0, match.start()) + 1
        out.append((match.group(1), match.group(2), _PARSE_ONLY.search(before) is not None,
                    line))
    return out


@contextmanager
def _no_network() -> Iterator[None]:
    """Every socket connection fails while a block runs."""
    def blocked(*args: object, **kwargs: object) -> NoReturn:
        raise OSError("network blocked by the code block test")

    with pytest.MonkeyPatch.context() as patch:
        for name in ("getaddrinfo", "create_connection"):
            patch.setattr(socket, name, blocked)
        patch.setattr(socket.socket, "connect", blocked)
        yield


def _shut_down(namespace: dict[str, Any]) -> None:
    """Stop what a block started and left to the application (a tracer provider)."""
    for value in namespace.values():
        if type(value).__name__ == "TracerProvider":
            value.shutdown()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_python_blocks_run_as_printed(path: Path) -> None:
    """Each Python block of the file runs (parse-only ones compile), in order."""
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    try:
        for lang, code, parse_only, line in _blocks(path):
            if lang != "python":
                continue
            compiled = compile("\n" * line + code, str(path), "exec")
            if parse_only:
                continue
            with _no_network():
                exec(compiled, namespace)
    finally:
        _shut_down(namespace)


def _commands(code: str) -> list[list[str]]:
    """The ``cupellation`` command lines of a bash block (comments and variables aside)."""
    out = []
    for raw in code.replace("\\\n", " ").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        words = shlex.split(line)
        while words and "=" in words[0] and not words[0].startswith("-"):
            words = words[1:]  # VAR=value prefixes
        if words and Path(words[0]).name == "cupellation":
            out.append(words)
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_bash_blocks_parse_and_name_real_subcommands(path: Path) -> None:
    """Each bash block is valid bash (``bash -n``); each cupellation command in it
    names a subcommand the CLI has."""
    for lang, code, _, line in _blocks(path):
        if lang != "bash":
            continue
        checked = subprocess.run(["bash", "-n"], input=code, text=True, capture_output=True,
                                 check=False)
        assert checked.returncode == 0, (path.name, line, checked.stderr)
        for words in _commands(code):
            assert len(words) > 1, (path.name, line, words)
            assert words[1] in SUBCOMMANDS, (path.name, line, words)


def test_the_checks_see_the_blocks_and_marks() -> None:
    """The block reader finds a marked block as parse-only and the command reader the
    subcommand after VAR= prefixes and a venv path; README has Python and bash blocks."""
    sample = ("text\n<!-- parse-only: needs a server -->\n```python\nx = 1\n```\n"
              "```bash\nA=1 .venv/bin/cupellation demo --otlp   # note\n```\n")
    probe = ROOT / "tests" / "data"
    found = [(lang, parse_only) for lang, _, parse_only, _ in _blocks_of_text(sample)]
    assert found == [("python", True), ("bash", False)]
    assert _commands("A=1 .venv/bin/cupellation demo --otlp   # note") == [
        [".venv/bin/cupellation", "demo", "--otlp"]]
    assert probe.is_dir()
    kinds = {lang for lang, *_ in _blocks(ROOT / "README.md")}
    assert {"python", "bash"} <= kinds


def _blocks_of_text(text: str) -> list[tuple[str, str, bool, int]]:
    path = Path("/nonexistent")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Path, "read_text", lambda self, encoding="utf-8": text)
        return _blocks(path)
