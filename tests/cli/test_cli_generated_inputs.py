"""Generated command lines, valid and hostile, for every subcommand and option
(drawn by :mod:`cli_invocations`): the command ends with a promised exit status (0, 1,
2, 3, 130 or 141), says exactly one line on standard error for 2, and never prints
"internal error" or a traceback.

Most runs call ``cupellation.cli.main(argv)`` in this process; some go through a real
``python -m cupellation.cli`` process. The default run draws a sample; the
``exhaustive`` run (scripts/test.sh) draws 1,000 command lines, 80 of them as real
processes (2,000 and 200 until 0.4: with the store's commands starting chDB, the two
tests took a third of the suite). Each command line is reproducible from the seed and its index
(CUPELLATION_GENERATED_SEED sets the seed).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import FrameType

import pytest
from _cli_support import Result
from cli_invocations import (
    GENERATORS,
    Invocation,
    Workspace,
    build_workspace,
    draw_invocation,
    feeding,
    is_device,
    stdin_stream,
)

from cupellation.cli import SUBCOMMANDS, build_parser, main

SEED = os.environ.get("CUPELLATION_GENERATED_SEED", "issue-11")
#: The exit statuses the command promises.
PROMISED = {0, 1, 2, 3, 130, 141}
#: How long one command may take before it counts as hanging.
HANG_SECONDS = 90


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    """The files the command lines name (special files included), made once."""
    with build_workspace(tmp_path_factory.mktemp("generated")) as space:
        yield space


def _environment(space: Workspace) -> dict[str, str]:
    """OTLP pointed at a 127.0.0.1 port where nothing listens, with a short timeout,
    and every other HTTP(S) request (tiktoken's download) sent to that port too."""
    refused = f"http://127.0.0.1:{space.closed_port}"
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": refused, "OTEL_EXPORTER_OTLP_TIMEOUT": "0.2",
            "HTTP_PROXY": refused, "HTTPS_PROXY": refused, "http_proxy": refused,
            "https_proxy": refused, "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}


def problems_with(result: Result) -> list[str]:
    """How ``result`` breaks the promise (empty when it keeps it)."""
    found = []
    if result.code not in PROMISED:
        found.append(f"exit status {result.code}")
    if result.code == 2 and len(result.err_lines) != 1:
        found.append(f"{len(result.err_lines)} lines on stderr for exit 2")
    for text in (result.err, result.out):
        if "internal error" in text:
            found.append("'internal error'")
        if "Traceback" in text:
            found.append("a traceback")
    return found


class _Hang(BaseException):
    """An in-process command that ran past HANG_SECONDS (not an Exception, so the
    command's own last-resort handler does not catch it)."""


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise _Hang


def run_in_process(invocation: Invocation, capsys: pytest.CaptureFixture[str],
                   monkeypatch: pytest.MonkeyPatch) -> Result:
    """``main(argv)`` here, with the invocation's stdin and FIFOs."""
    capsys.readouterr()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        with monkeypatch.context() as patch, feeding(invocation):
            patch.setattr(sys, "stdin", stdin_stream(invocation.stdin or b""))
            for name, value in invocation.env.items():
                patch.setenv(name, value)
            signal.alarm(HANG_SECONDS)
            try:
                code = main(invocation.argv)
            finally:
                signal.alarm(0)
    except _Hang:
        pytest.fail(f"hung for {HANG_SECONDS} s: {invocation}")
    finally:
        signal.signal(signal.SIGALRM, previous)
    # An export given up at --timeout leaves its sending thread behind (a process ends
    # it by exiting); here it is waited for, so that its last words count as this
    # command's and not the next one's.
    for thread in threading.enumerate():
        if thread.name == "cupellation-export":
            thread.join(timeout=HANG_SECONDS)
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def run_process(invocation: Invocation, space: Workspace) -> Result:
    """``python -m cupellation.cli ARGV`` as a real process."""
    env = {**os.environ, **_environment(space), **invocation.env}
    env.pop("CUPELLATION_DEBUG", None)
    with feeding(invocation):
        try:
            done = subprocess.run([sys.executable, "-m", "cupellation.cli",
                                   *invocation.argv], input=invocation.stdin or b"",
                                  capture_output=True, cwd=space.root, env=env,
                                  timeout=HANG_SECONDS, check=False)
        except subprocess.TimeoutExpired:
            return Result(-1, "", f"hung for {HANG_SECONDS} s")
    return Result(done.returncode, done.stdout.decode("utf-8", "replace"),
                  done.stderr.decode("utf-8", "replace"))


def _run(space: Workspace, in_process: int, processes: int,
         capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    failures: list[str] = []
    monkeypatch.chdir(space.root)
    for name, value in _environment(space).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("CUPELLATION_DEBUG", raising=False)
    for index in range(in_process):
        invocation = draw_invocation(SEED, index, space, in_process=True)
        found = problems_with(run_in_process(invocation, capsys, monkeypatch))
        if found:
            failures.append(f"in process #{index}: {invocation}: {', '.join(found)}")
    drawn = [draw_invocation(SEED, index, space, in_process=False)
             for index in range(processes)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda inv: run_process(inv, space), drawn))
    for index, (invocation, result) in enumerate(zip(drawn, results, strict=True)):
        found = problems_with(result)
        if found:
            failures.append(f"process #{index}: {invocation}: {', '.join(found)}: "
                            f"{result.err[-300:]!r}")
    assert is_device(space["null"])
    assert is_device(space["full"])
    assert not failures, f"{len(failures)} broken promises (seed {SEED!r}):\n" + "\n".join(
        failures[:20])


def test_generated_command_lines_keep_the_promise(
        workspace: Workspace, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A sample of 200 generated command lines over every subcommand (180 in this
    process, 20 as real processes): promised statuses only, one line for 2, no
    'internal error', no traceback; the devices used as outputs stay devices."""
    _run(workspace, 180, 20, capsys, monkeypatch)


@pytest.mark.exhaustive
def test_a_thousand_generated_command_lines_keep_the_promise(
        workspace: Workspace, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """1,000 generated command lines (920 in this process, 80 as real processes),
    with the same promise as the default sample."""
    _run(workspace, 920, 80, capsys, monkeypatch)


def _options_by_command() -> dict[str, set[str]]:
    """Every option string the parser knows, by command ('' for the top level)."""
    found: dict[str, set[str]] = {}

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(sub, f"{name} {sub_name}".strip())
            elif action.option_strings:
                found.setdefault(name, set()).update(
                    option for option in action.option_strings
                    if option not in ("-h", "--help") or not name)
    walk(build_parser(), "")
    return found


def test_the_generators_draw_every_command_and_option(workspace: Workspace) -> None:
    """Every subcommand has a generator, and 3,000 drawn command lines use every option
    of every command the parser knows (so a new option, or a new command without a
    generator, fails here until the table draws it)."""
    commands = {name for name in GENERATORS if name}
    expected = {name for name in SUBCOMMANDS if name != "policy"} | {"policy show",
                                                                     "policy check"}
    # store's generator draws its action, as policy's two do.
    assert commands == expected
    wanted = _options_by_command()
    seen: dict[str, set[str]] = {}
    for index in range(3000):
        argv = draw_invocation(SEED, index, workspace, in_process=True).argv
        name = " ".join(argv[:2]) if argv[:1] in (["policy"], ["store"]) and len(argv) > 1 else (
            argv[0] if argv and argv[0] in SUBCOMMANDS else "")
        seen.setdefault(name, set()).update(a for a in argv if a.startswith("-"))
    missing = {name: sorted(options - seen.get(name, set()))
               for name, options in wanted.items()
               if name != "policy" and options - seen.get(name, set())}
    assert missing == {}
    assert Path(workspace["vectors"]).is_dir()
