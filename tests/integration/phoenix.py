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

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import pytest

from cupellation.exceptions import BackendError
from cupellation.otel import SpanData, fetch_spans

from ._server import ROOT, STOP_TIMEOUT, Server, clean_env, serving, start, venv_executable
from .fake_otlp import free_port

__all__ = ["PHOENIX_PROJECT_ATTRIBUTE", "PROJECT_HEADER", "ROOT", "Phoenix", "Span",
           "phoenix_executable", "run_phoenix"]

INSTALL_SCRIPT: Final = "scripts/install-phoenix.sh"
STARTUP_TIMEOUT: Final = 90.0
#: Every span a project holds (Phoenix's start_time filter from the epoch).
EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
PROJECT_HEADER: Final = "x-project-name"
"""Picks the project of spans sent over OTLP/HTTP (ignored over gRPC)."""
PHOENIX_PROJECT_ATTRIBUTE: Final = "openinference.project.name"
"""The resource attribute that picks the project over gRPC (and HTTP without header)."""

Span = SpanData
"""One span as cupellation's Phoenix reader returns it."""


def phoenix_executable() -> Path:
    """The ``phoenix`` command of ``$PHOENIX_VENV`` (default ``.phoenix-venv``, where
    install-phoenix.sh puts it); fails the test (never skips) when it is missing,
    naming the script that installs it."""
    return venv_executable("Phoenix", "PHOENIX_VENV", ".phoenix-venv", "phoenix",
                           INSTALL_SCRIPT)


class Phoenix(Server):
    """A running Phoenix: where to send OTLP and how to read spans back."""

    def __init__(self, process: subprocess.Popen[bytes], http_port: int, grpc_port: int,
                 log_path: Path) -> None:
        # SIGTERM stops Phoenix in ~1 s; it is given STOP_TIMEOUT before SIGKILL.
        super().__init__("Phoenix", process, f"http://127.0.0.1:{http_port}", "/healthz",
                         log_path, STOP_TIMEOUT)
        self.http_port = http_port
        self.grpc_port = grpc_port
        self.http_endpoint = f"{self.base_url}/v1/traces"
        """The full OTLP/HTTP traces URL (the SDK exporter's ``endpoint``)."""
        self.http_base_endpoint = self.base_url
        """What ``setup_otlp(endpoint=...)`` and OTEL_EXPORTER_OTLP_ENDPOINT take."""
        self.grpc_endpoint = f"http://127.0.0.1:{grpc_port}"

    def read_spans(self, project: str) -> list[Span]:
        """Every span of ``project`` now (all pages, through the product's reader);
        [] before its first span (Phoenix answers 404 for the project until then)."""
        try:
            return fetch_spans("phoenix", self.base_url, project=project, since=EPOCH,
                               timeout=60)  # the whole read, every page
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


@contextmanager
def run_phoenix(work_dir: Path) -> Iterator[Phoenix]:
    """Start ``phoenix serve`` on free 127.0.0.1 ports with its database and log in
    ``work_dir``; wait (at most ``STARTUP_TIMEOUT`` s) for /healthz; stop it after."""
    executable = phoenix_executable()
    http_port, grpc_port = free_port(), free_port()
    while grpc_port == http_port:
        grpc_port = free_port()
    # Our own OTLP settings stay out of Phoenix's process.
    env = clean_env(("OTEL_",), {
        "PHOENIX_HOST": "127.0.0.1",  # the gRPC server binds every interface anyway
        "PHOENIX_PORT": str(http_port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_WORKING_DIR": str(work_dir / "phoenix-home"),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    })
    log_path = work_dir / "phoenix.log"
    process = start([str(executable), "serve"], env, work_dir, log_path)
    with serving(Phoenix(process, http_port, grpc_port, log_path), STARTUP_TIMEOUT) as server:
        yield server
