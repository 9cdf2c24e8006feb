"""``cupellation export --timeout`` bounds the whole export, even against a backend
that answers one byte at a time (which no socket timeout notices)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cupellation.cli import main

#: A response that never ends: a status line, then one header line without an end.
_ENDLESS = b"HTTP/1.1 200 OK\r\nX-Trickle: " + b"a" * 100_000


@contextmanager
def trickling_backend(interval: float = 0.05) -> Iterator[str]:
    """An HTTP endpoint on 127.0.0.1 that reads each request and then answers one byte
    every ``interval`` seconds, for as long as the block runs."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.1)
    stop = threading.Event()

    def trickle(connection: socket.socket) -> None:
        with connection:
            connection.settimeout(0.1)
            try:
                connection.recv(1 << 20)
                for byte in _ENDLESS:
                    if stop.wait(interval):
                        return
                    connection.sendall(bytes([byte]))
            except OSError:  # the client gave up
                return

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=trickle, args=(connection,), daemon=True).start()

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        server.join(timeout=10)
        listener.close()


@pytest.fixture
def audit_log(tmp_path: Path) -> Path:
    """An audit log holding one demo run."""
    path = tmp_path / "audit.jsonl"
    assert main(["demo", "-q", "--out", str(tmp_path / "demo"), "--audit-log",
                 str(path)]) == 0
    return path


def test_timeout_bounds_the_whole_export_against_a_trickling_backend(audit_log: Path) -> None:
    """With a backend that trickles a byte every 0.05 s (so the per-read socket timeout,
    2 s, never fires and it used to hold the export for minutes), ``--timeout 2`` ends
    the command with exit 3 and one line saying the export did not finish in time.
    The process is given 60 s: without the bound it would still be waiting then."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env.pop("CUPELLATION_DEBUG", None)
    with trickling_backend() as endpoint:
        done = subprocess.run([sys.executable, "-m", "cupellation.cli", "export",
                               str(audit_log), "--to", "otlp", "--endpoint", endpoint,
                               "--timeout", "2"], capture_output=True, timeout=60,
                              stdin=subprocess.DEVNULL, env=env, check=False)
    err = done.stderr.decode()
    assert done.returncode == 3, err
    assert "did not finish within --timeout 2 s" in err
    assert "Traceback" not in err
    assert done.stdout == b""
