"""Start a real Arize Phoenix (an OTLP backend with a REST API to read spans back) for
the integration tests, and read spans from it.

Phoenix lives in its own venv (``scripts/install-phoenix.sh``; ``PHOENIX_VENV``
overrides where). What these helpers rely on, measured with Phoenix 20.26.1:
``GET /healthz`` answers ~10 s after start; OTLP/HTTP takes protobuf only; the project
comes from the ``x-project-name`` header over HTTP, but over gRPC only from the resource
attribute ``openinference.project.name``; ``GET /v1/projects/{project}/spans/otlpv1``
answers 404 until the project's first span, then pages of OTLP-shaped spans, newest
first, ``limit`` <= 1000, continued with ``cursor=<next_cursor>``; SIGTERM stops it
in ~1 s; a fresh database logs thousands of migration lines (hence the log file).

Spans are read back through the product's own reader (``cupellation.otel.fetch_spans``,
what ``cupellation report --from phoenix`` uses), as the decoder's ``SpanData``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import pytest

from cupellation.otel import BackendError, SpanData, fetch_spans

from .fake_otlp import free_port

ROOT: Final = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT: Final = "scripts/install-phoenix.sh"
STARTUP_TIMEOUT: Final = 90.0
STOP_TIMEOUT: Final = 15.0
#: Every span a project holds (Phoenix's start_time filter from the epoch).
EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
PROJECT_HEADER: Final = "x-project-name"
"""Picks the project of spans sent over OTLP/HTTP (ignored over gRPC)."""
PHOENIX_PROJECT_ATTRIBUTE: Final = "openinference.project.name"
"""The resource attribute that picks the project over gRPC (and HTTP without header)."""

Span = SpanData
"""One span as cupellation's Phoenix reader returns it."""


def phoenix_venv() -> Path:
    """Where install-phoenix.sh puts Phoenix: ``$PHOENIX_VENV`` or ``.phoenix-venv``."""
    return Path(os.environ.get("PHOENIX_VENV") or ROOT / ".phoenix-venv")


def phoenix_executable() -> Path:
    """The ``phoenix`` command of the Phoenix venv; fails the test (never skips) when
    it is missing, naming the script that installs it."""
    executable = phoenix_venv() / "bin" / "phoenix"
    if not os.access(executable, os.X_OK):
        pytest.fail(f"Phoenix is not installed at {executable}: run `bash {INSTALL_SCRIPT}` "
                    "(set PHOENIX_VENV if you installed it elsewhere)", pytrace=False)
    return executable


class Phoenix:
    """A running Phoenix: where to send OTLP and how to read spans back."""

    def __init__(self, process: subprocess.Popen[bytes], http_port: int, grpc_port: int,
                 log_path: Path) -> None:
        self.process = process
        self.http_port = http_port
        self.grpc_port = grpc_port
        self.log_path = log_path
        self.base_url = f"http://127.0.0.1:{http_port}"
        self.http_endpoint = f"{self.base_url}/v1/traces"
        """The full OTLP/HTTP traces URL (the SDK exporter's ``endpoint``)."""
        self.http_base_endpoint = self.base_url
        """What ``setup_otlp(endpoint=...)`` and OTEL_EXPORTER_OTLP_ENDPOINT take."""
        self.grpc_endpoint = f"http://127.0.0.1:{grpc_port}"

    def healthy(self) -> bool:
        """True if ``GET /healthz`` answers 200."""
        try:
            # An opener of its own: urlopen's keeps the proxy variables of its first use.
            opener = urllib.request.build_opener()
            with opener.open(f"{self.base_url}/healthz", timeout=2) as answer:
                return bool(answer.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def read_spans(self, project: str) -> list[Span]:
        """Every span of ``project`` now (all pages, through the product's reader);
        [] before its first span (Phoenix answers 404 for the project until then)."""
        try:
            return fetch_spans("phoenix", self.base_url, project=project, since=EPOCH,
                               timeout=10)
        except BackendError as error:
            if "has no project" in str(error):
                return []
            raise

    def spans(self, project: str, *, expect: int, timeout: float = 15.0,
              settle: float = 0.0) -> list[Span]:
        """Poll until ``project`` holds at least ``expect`` spans and return them all.

        ``settle`` > 0 then waits that long and reads again, so that a test can see
        spans that should *not* arrive (duplicates). Fails, with the tail of Phoenix's
        log, if fewer than ``expect`` arrive within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        spans = self.read_spans(project)
        while len(spans) < expect and time.monotonic() < deadline:
            time.sleep(0.1)
            spans = self.read_spans(project)
        if len(spans) < expect:
            pytest.fail(f"Phoenix project {project!r} has {len(spans)} span(s) after "
                        f"{timeout} s, expected {expect}\n{self.log_tail()}", pytrace=False)
        if settle > 0:
            time.sleep(settle)
            spans = self.read_spans(project)
        return spans

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of Phoenix's log."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError as error:
            return f"(no Phoenix log at {self.log_path}: {error})"
        tail = "\n".join(text.splitlines()[-lines:])
        return f"--- last {lines} lines of {self.log_path} ---\n{tail}"

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after ``STOP_TIMEOUT`` s; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=STOP_TIMEOUT)
        return self.process.returncode


@contextmanager
def run_phoenix(work_dir: Path) -> Iterator[Phoenix]:
    """Start ``phoenix serve`` on free 127.0.0.1 ports with its database and log in
    ``work_dir``; wait (at most ``STARTUP_TIMEOUT`` s) for /healthz; stop it after."""
    executable = phoenix_executable()
    http_port, grpc_port = free_port(), free_port()
    while grpc_port == http_port:
        grpc_port = free_port()
    log_path = work_dir / "phoenix.log"
    env = dict(os.environ)
    env.update({
        "PHOENIX_HOST": "127.0.0.1",  # the gRPC server binds every interface anyway
        "PHOENIX_PORT": str(http_port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_WORKING_DIR": str(work_dir / "phoenix-home"),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    })
    for name in list(env):  # keep our own OTLP settings out of Phoenix's process
        if name.startswith("OTEL_"):
            del env[name]
    with log_path.open("wb") as log:
        process = subprocess.Popen([str(executable), "serve"], stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=subprocess.STDOUT, env=env,
                                   cwd=work_dir, start_new_session=True)
    phoenix = Phoenix(process, http_port, grpc_port, log_path)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not phoenix.healthy():
            if process.poll() is not None:
                pytest.fail(f"Phoenix exited with {process.returncode} while starting\n"
                            f"{phoenix.log_tail()}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail(f"Phoenix did not answer /healthz within {STARTUP_TIMEOUT} s\n"
                            f"{phoenix.log_tail()}", pytrace=False)
            time.sleep(0.25)
        yield phoenix
    finally:
        phoenix.stop()
