"""The command started with a standard stream closed (``>&-``, ``2>&-``, ``<&-``), and
Ctrl-C at start-up and while reading: only the promised exit statuses, at most one
line on standard error, never a traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _cli_support import BUDGET, Result

#: The installed ``cupellation`` command (the console script of [project.scripts]).
SCRIPT = Path(sys.executable).parent / "cupellation"


def _shell(redirect: str, *args: str | Path, cwd: Path | None = None) -> Result:
    """``python -m cupellation.cli ARGS REDIRECT`` run by sh: ``>&-`` starts the
    command with standard output closed (``2>&-`` error, ``<&-`` input)."""
    env = dict(os.environ)
    env.pop("CUPELLATION_DEBUG", None)
    done = subprocess.run(["sh", "-c", f'exec "$@" {redirect}', "sh", sys.executable, "-m",
                           "cupellation.cli", *map(str, args)], capture_output=True,
                          stdin=subprocess.DEVNULL, cwd=cwd, env=env, timeout=120,
                          check=False)
    return Result(done.returncode, done.stdout.decode("utf-8", "replace"),
                  done.stderr.decode("utf-8", "replace"))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An items file, a demo folder with its audit log, and a policy file."""
    folder = tmp_path_factory.mktemp("streams")
    (folder / "items.json").write_text('[{"content": "a", "tokens": 1}]\n')
    subprocess.run([sys.executable, "-m", "cupellation.cli", "demo", "-q", "--out",
                    str(folder / "demo"), "--audit-log", str(folder / "audit.jsonl")],
                   check=True, stdin=subprocess.DEVNULL)
    return folder


CLOSED_STDOUT_COMMANDS = [
    ("select", "items.json", *BUDGET),
    ("select", "items.json", *BUDGET, "--format", "text"),
    ("demo", "--out", "d"),
    ("report", "audit.jsonl"),
    ("report", "audit.jsonl", "--format", "json"),
    ("audit", "audit.jsonl"),
    ("why", "audit.jsonl", "--match", "."),
    ("presets",),
    ("policy", "show", "chat"),
    ("policy", "check", "demo/policy.toml"),
    ("export", "audit.jsonl", "--to", "file", "--out", "-"),
    ("--help",),
    ("select", "--help"),
]


@pytest.mark.parametrize("args", CLOSED_STDOUT_COMMANDS, ids=" ".join)
def test_closed_stdout_is_exit_141(workspace: Path, args: tuple[str, ...]) -> None:
    """Started with standard output closed, a command that prints ends with 141
    (standard output closed), at most one line on stderr and no 'internal error':
    select, report, audit and demo used to fail with "internal error ... NoneType has
    no attribute 'write'" (exit 70)."""
    result = _shell(">&-", *args, cwd=workspace)
    assert result.code == 141, result.err
    assert len(result.err_lines) <= 1, result.err
    assert "internal error" not in result.err
    assert "Traceback" not in result.err


def test_closed_stdout_does_not_disturb_a_command_that_prints_nothing(
        workspace: Path) -> None:
    """``select -q -o FILE >&-`` prints nothing, so it succeeds and writes FILE."""
    result = _shell(">&-", "select", "items.json", *BUDGET, "-q", "-o", "out.json",
                    cwd=workspace)
    assert result.code == 0, result.err
    assert result.err == ""
    assert json.loads((workspace / "out.json").read_text())[0]["content"] == "a"


@pytest.mark.parametrize("args", [
    ("select", "items.json"),  # no budget
    ("select", "missing.json", *BUDGET),
    ("select", "items.json", *BUDGET, "--bogus"),
    ("policy", "check", "missing.toml"),
    ("demo", "--out", "items.json"),
    ("report", "missing.jsonl"),
    ("export", "audit.jsonl", "--to", "otlp", "--timeout", "0"),
], ids=" ".join)
def test_closed_stderr_keeps_exit_2_and_stdout_clean(workspace: Path,
                                                     args: tuple[str, ...]) -> None:
    """With standard error closed, bad input is still exit 2 (it used to become 1), and
    the message does not move to standard output."""
    result = _shell("2>&-", *args, cwd=workspace)
    assert result.code == 2
    assert result.out == ""


@pytest.mark.parametrize("args", [("select", "-", *BUDGET), ("report", "-"),
                                  ("audit", "-"), ("export", "-", "--to", "file", "--out",
                                                   "o.jsonl")], ids=" ".join)
def test_closed_stdin_is_exit_2_with_one_line(workspace: Path, args: tuple[str, ...]) -> None:
    """Reading '-' from a closed standard input is exit 2 and one line saying so."""
    result = _shell("<&-", *args, cwd=workspace)
    assert result.code == 2, result.err
    assert len(result.err_lines) == 1, result.err
    assert "standard input is closed" in result.err


_BLOCK_AN_IMPORT = """
import os, runpy, sys, time

class BlockTheLibrary:
    '''Stops the import of cupellation's pipeline: a marker on stderr, then a long
    sleep for the test's SIGINT to interrupt.'''
    def find_spec(self, name, path=None, target=None):
        if name == "cupellation._pipeline":
            os.write(2, b"IMPORTING\\n")
            time.sleep(120)
        return None

sys.meta_path.insert(0, BlockTheLibrary())
sys.argv = [SCRIPT, "presets"]
runpy.run_path(SCRIPT, run_name="__main__")
"""


def test_ctrl_c_while_the_library_is_imported_is_one_line_and_130() -> None:
    """The installed ``cupellation`` script interrupted while its imports run (held at
    the pipeline module's import, announced by a marker): exit 130, 'cupellation:
    interrupted', no KeyboardInterrupt traceback."""
    assert SCRIPT.is_file(), "the cupellation console script is installed with the package"
    code = _BLOCK_AN_IMPORT.replace("SCRIPT", repr(str(SCRIPT)))
    process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stderr is not None
    assert process.stderr.readline() == b"IMPORTING\n"
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert out == b""
    assert err.decode().strip() == "cupellation: interrupted"


def test_ctrl_c_while_reading_a_fifo_is_one_line_and_130(tmp_path: Path) -> None:
    """SIGINT while select waits for its items on a FIFO: status 130, 'cupellation:
    interrupted', no traceback, nothing written. The test waits for the command to
    open the FIFO (a non-blocking open for writing succeeds only once a reader has
    it open), not for a guessed time."""
    fifo = tmp_path / "items"
    os.mkfifo(fifo)
    process = subprocess.Popen([sys.executable, "-m", "cupellation.cli", "select", str(fifo),
                                *BUDGET, "--out", str(tmp_path / "o")],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    writer = -1
    try:
        for _ in range(6000):
            try:
                writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError:  # ENXIO: no reader yet
                if process.poll() is not None:
                    break
                time.sleep(0.01)
        assert writer >= 0, "select never opened its items"
        # Then until it blocks reading them (read(2) is syscall 0 on x86-64 Linux): the
        # signal must find the command waiting for its input, not on its way there.
        for _ in range(6000):
            try:
                state = Path(f"/proc/{process.pid}/syscall").read_text().split()
            except OSError:  # it ended
                break
            if (state and state[0] == "0") or process.poll() is not None:
                break
            time.sleep(0.01)
        process.send_signal(signal.SIGINT)
        try:
            out, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            where = Path(f"/proc/{process.pid}/wchan").read_text()
            process.kill()
            pytest.fail(f"select did not end within 60 s of SIGINT (waiting in {where})")
    finally:
        if writer >= 0:
            os.close(writer)
    assert process.returncode == 130
    assert out == b""
    assert err.decode().strip() == "cupellation: interrupted"
    assert not (tmp_path / "o").exists()
