"""Running ``cupellation`` as a real process, and what every failure must look like."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from cupellation.cli import main

#: A budget every small test input fits.
BUDGET = ("--max-tokens", "1000", "--target-tokens", "500")


@dataclass(frozen=True)
class Result:
    """One finished ``cupellation`` process."""

    code: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        """The non-empty lines of standard error."""
        return [line for line in self.err.splitlines() if line.strip()]


def cli(*args: str | Path, stdin: str | bytes | None = None, cwd: Path | None = None,
        env: dict[str, str] | None = None, timeout: float = 60) -> Result:
    """Run ``python -m cupellation.cli ARGS`` and wait for it."""
    merged = dict(os.environ)
    merged.pop("CUPELLATION_DEBUG", None)
    merged.update(env or {})
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    done = subprocess.run([sys.executable, "-m", "cupellation.cli", *map(str, args)],
                          input=data, capture_output=True, cwd=cwd, env=merged,
                          timeout=timeout, check=False,
                          stdin=subprocess.DEVNULL if data is None else None)
    return Result(done.returncode, done.stdout.decode("utf-8", "replace"),
                  done.stderr.decode("utf-8", "replace"))


def run_main(capsys: pytest.CaptureFixture[str], *args: str | Path) -> Result:
    """``cupellation.cli.main(ARGS)`` in this process (faster than :func:`cli`, for
    behaviour that does not depend on being a separate process)."""
    capsys.readouterr()
    code = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def assert_one_line_error(result: Result, code: int = 2, *contains: str) -> str:
    """The process failed with ``code``, wrote nothing on stdout, one line on stderr
    starting ``cupellation:`` (containing each of ``contains``), and no traceback."""
    assert result.code == code, (result.code, result.err)
    assert result.out == "", result.out
    assert "Traceback" not in result.err
    assert len(result.err_lines) == 1, result.err
    line = result.err_lines[0]
    assert line.startswith("cupellation"), line
    for part in contains:
        assert part in line, (part, line)
    return line


def files_in(folder: Path) -> list[str]:
    """Every file under ``folder`` (relative paths, sorted), temporary files included."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


#: The number of the ``read`` system call, as /proc/PID/syscall shows it.
_READ_SYSCALL = {"x86_64": 0, "aarch64": 63}


def wait_until_blocked_reading_stdin(process: subprocess.Popen[bytes],
                                     timeout: float = 60.0) -> None:
    """Return once ``process`` sits in ``read(0, ...)`` (waiting on its standard input,
    so its start-up is over), as /proc/PID/syscall shows it; fail if it exits first or
    is not there within ``timeout`` seconds. A readiness state, not a guessed sleep."""
    machine = platform.machine()
    if machine not in _READ_SYSCALL:
        pytest.fail(f"no read syscall number known for {machine}: add it to _READ_SYSCALL")
    reading_stdin = [str(_READ_SYSCALL[machine]), "0x0"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the process exited with {process.returncode} before reading stdin")
        try:
            fields = Path(f"/proc/{process.pid}/syscall").read_text().split()
        except OSError:  # gone between poll() and the read: poll() says so next time
            fields = []
        if fields[:2] == reading_stdin:
            return
        time.sleep(0.01)
    pytest.fail(f"the process was not blocked reading stdin after {timeout} s")
