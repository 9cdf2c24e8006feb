"""What the real backends the integration tests start (Phoenix, MLflow) share: the
command from the backend's own venv, the server started in a session of its own with
its output in a log file, its health URL polled until it answers, and SIGTERM to its
process group, then SIGKILL after a grace period. ``phoenix.py`` and ``mlflow.py``
add what each backend has of its own (ports, headers, how spans are read back)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Final, TypeVar

import pytest

__all__ = ["ROOT", "STOP_TIMEOUT", "Server", "clean_env", "serving", "start", "venv_executable"]

ROOT: Final = Path(__file__).resolve().parents[2]
STOP_TIMEOUT: Final = 15.0
"""How long a server is waited for after SIGKILL."""

_S = TypeVar("_S", bound="Server")


def venv_executable(product: str, variable: str, default_venv: str, command: str,
                    install_script: str) -> Path:
    """The ``command`` of the venv ``$variable`` names (default ``default_venv`` at the
    repository root); fails the test (never skips) when it is missing, naming the
    script that installs it."""
    executable = Path(os.environ.get(variable) or ROOT / default_venv) / "bin" / command
    if not os.access(executable, os.X_OK):
        pytest.fail(f"{product} is not installed at {executable}: run `bash {install_script}` "
                    f"(set {variable} if you installed it elsewhere)", pytrace=False)
    return executable


def clean_env(dropped: tuple[str, ...], settings: Mapping[str, str] | None = None
              ) -> dict[str, str]:
    """This process's environment without the variables whose names start with one of
    ``dropped`` (our own OTLP settings stay out of the server), plus ``settings``."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(dropped)}
    env.update(settings or {})
    return env


def start(command: Sequence[str], env: Mapping[str, str], work_dir: Path,
          log_path: Path) -> subprocess.Popen[bytes]:
    """``command`` started in ``work_dir`` in a session (process group) of its own,
    stdin closed, stdout and stderr to ``log_path``."""
    with log_path.open("wb") as log:
        return subprocess.Popen(list(command), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, env=dict(env), cwd=work_dir,
                                start_new_session=True)


class Server:
    """A running backend server: its process, base URL, health check and log."""

    def __init__(self, product: str, process: subprocess.Popen[bytes], base_url: str,
                 health_path: str, log_path: Path, stop_grace: float) -> None:
        self.product = product
        self.process = process
        self.base_url = base_url
        self.health_path = health_path
        self.log_path = log_path
        self.stop_grace = stop_grace
        """How long SIGTERM is given before SIGKILL."""

    def healthy(self) -> bool:
        """True if ``GET <health_path>`` answers 200."""
        try:
            # An opener of its own: urlopen's keeps the proxy variables of its first use.
            opener = urllib.request.build_opener()
            with opener.open(f"{self.base_url}{self.health_path}", timeout=2) as answer:
                return bool(answer.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the server's log."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError as error:
            return f"(no {self.product} log at {self.log_path}: {error})"
        tail = "\n".join(text.splitlines()[-lines:])
        return f"--- last {lines} lines of {self.log_path} ---\n{tail}"

    def stop(self) -> int | None:
        """SIGTERM to the server's process group (the server and any workers), then
        SIGKILL after ``stop_grace`` s; returns the exit code."""
        if self.process.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                self.process.wait(timeout=self.stop_grace)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self.process.wait(timeout=STOP_TIMEOUT)
        return self.process.returncode

    def _signal_group(self, signum: signal.Signals) -> None:
        # The group may have ended between poll() and the signal.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signum)


@contextmanager
def serving(server: _S, startup_timeout: float) -> Iterator[_S]:
    """Wait (at most ``startup_timeout`` s) until ``server`` answers its health check,
    yield it, and stop it after; fails the test, with the log's tail, if it exits or
    does not answer in time."""
    try:
        deadline = time.monotonic() + startup_timeout
        while not server.healthy():
            if server.process.poll() is not None:
                pytest.fail(f"{server.product} exited with {server.process.returncode} "
                            f"while starting\n{server.log_tail()}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail(f"{server.product} did not answer {server.health_path} within "
                            f"{startup_timeout} s\n{server.log_tail()}", pytrace=False)
            time.sleep(0.25)
        yield server
    finally:
        server.stop()
