"""Start a real MLflow tracking server (an OTLP/HTTP backend with a REST API to read
traces back) for the integration tests, and read spans from it through cupellation's
own reader.

MLflow lives in its own venv (``scripts/install-mlflow.sh``; ``MLFLOW_VENV``
overrides where). What these helpers rely on, measured with MLflow 3.17.2:
``mlflow server --workers 1`` answers ``GET /health`` within ~10 s; OTLP/HTTP
protobuf goes to ``POST /v1/traces`` with the ``x-mlflow-experiment-id`` header (no
gRPC receiver); ``POST /api/3.0/mlflow/traces/search`` lists an experiment's traces
and ``GET /api/3.0/mlflow/traces/batchGet`` returns their spans; a string attribute
that is valid JSON comes back as that JSON (which the reader turns back into text).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import pytest

from cupellation.otel import SpanData, fetch_spans

from ._server import ROOT, Server, clean_env, serving, start, venv_executable
from .fake_otlp import free_port

__all__ = ["EXPERIMENT_HEADER", "ROOT", "MLflow", "mlflow_executable", "run_mlflow"]

INSTALL_SCRIPT: Final = "scripts/install-mlflow.sh"
STARTUP_TIMEOUT: Final = 120.0
STOP_GRACE: Final = 2.0
"""How long SIGTERM is given before SIGKILL (uvicorn waits ~10 s for open
connections; the server's store is a temporary file, so nothing is lost)."""
EXPERIMENT_HEADER: Final = "x-mlflow-experiment-id"
"""Picks the experiment of spans sent over OTLP/HTTP."""
EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def mlflow_executable() -> Path:
    """The ``mlflow`` command of ``$MLFLOW_VENV`` (default ``.mlflow-venv``); fails the
    test (never skips) when it is missing, naming the script that installs it."""
    return venv_executable("MLflow", "MLFLOW_VENV", ".mlflow-venv", "mlflow", INSTALL_SCRIPT)


class MLflow(Server):
    """A running MLflow server: where to send OTLP and how to read spans back.
    ``base_url`` is what ``setup_otlp(endpoint=...)``, OTEL_EXPORTER_OTLP_ENDPOINT and
    ``cupellation report --from mlflow`` take."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, log_path: Path) -> None:
        super().__init__("MLflow", process, f"http://127.0.0.1:{port}", "/health", log_path,
                         STOP_GRACE)

    def new_experiment(self, label: str) -> str:
        """A new experiment's id (named ``label`` and a random suffix)."""
        request = urllib.request.Request(
            f"{self.base_url}/api/2.0/mlflow/experiments/create",
            data=json.dumps({"name": f"{label}-{uuid.uuid4().hex[:8]}"}).encode(),
            headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.build_opener().open(request, timeout=10) as answer:
            return str(json.load(answer)["experiment_id"])

    def spans(self, experiment: str, *, expect: int, timeout: float = 60.0) -> list[SpanData]:
        """Poll (through cupellation's MLflow reader) until ``experiment`` holds at
        least ``expect`` spans, and return them all; fails with the log's tail if fewer
        arrive within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            spans = fetch_spans("mlflow", self.base_url, experiment=experiment, since=EPOCH,
                                timeout=120)  # the whole read
            if len(spans) >= expect or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if len(spans) < expect:
            pytest.fail(f"MLflow experiment {experiment} has {len(spans)} span(s) after "
                        f"{timeout} s, expected {expect}\n{self.log_tail()}", pytrace=False)
        return spans


@contextmanager
def run_mlflow(work_dir: Path) -> Iterator[MLflow]:
    """Start ``mlflow server`` with one worker on a free 127.0.0.1 port, its sqlite
    store, artifacts and log in ``work_dir``; wait for /health; stop it after."""
    port = free_port()
    command = [str(mlflow_executable()), "server", "--host", "127.0.0.1", "--port", str(port),
               "--workers", "1", "--backend-store-uri", f"sqlite:///{work_dir / 'mlflow.db'}",
               "--default-artifact-root", str(work_dir / "artifacts")]
    log_path = work_dir / "mlflow.log"
    # MLflow 3 starts huey job consumers (six processes) beside the server unless told
    # not to; the traces API does not use them, and they cost a share of a core for as
    # long as the server runs.
    env = clean_env(("OTEL_", "MLFLOW_"), {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
    process = start(command, env, work_dir, log_path)
    with serving(MLflow(process, port, log_path), STARTUP_TIMEOUT) as server:
        yield server
