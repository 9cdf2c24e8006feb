"""Regenerate docs/images/phoenix-trace.png, phoenix-stage.png and phoenix-traces.png:
the demo's trace in Phoenix's trace view (the root span, then the Slice stage's span
selected) and Phoenix's trace list, as a user meets them, taken in headless Chromium.

    .venv/bin/python scripts/phoenix_screenshot.py [--out docs/images/phoenix-trace.png]
        [--stage-out docs/images/phoenix-stage.png] [--list-out docs/images/phoenix-traces.png]

It starts Phoenix (``scripts/install-phoenix.sh`` puts it in ``.phoenix-venv``; set
``PHOENIX_VENV`` for another place) on free 127.0.0.1 ports with a fresh database,
runs ``cupellation demo --otlp`` against it, finds the demo's trace through Phoenix's
REST API, opens the trace view with the root span selected (its input and output
panes hold the kept and dropped items), then with the Slice span selected (its panes
hold that stage's decisions), then the project's trace list (each trace's outcome in
words), and saves a screenshot of each. Nothing is left running. Needs Debian's
``chromium``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "cupellation-demo"
#: A busy machine can take minutes to start Phoenix.
STARTUP_SECONDS = float(os.environ.get("PHOENIX_STARTUP_SECONDS", "300"))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)


def _wait(what: str, check: Any, seconds: float) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        try:
            found = check()
        except OSError:
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            raise SystemExit(f"phoenix_screenshot: {what} did not happen within {seconds:g} s")
        time.sleep(0.5)


def _start_phoenix(home: Path, http_port: int, grpc_port: int) -> subprocess.Popen[bytes]:
    venv = Path(os.environ.get("PHOENIX_VENV") or ROOT / ".phoenix-venv")
    executable = venv / "bin" / "phoenix"
    if not executable.exists():
        raise SystemExit(f"phoenix_screenshot: no Phoenix at {executable}; run: "
                         "bash scripts/install-phoenix.sh")
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    env.update({"PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(http_port),
                "PHOENIX_GRPC_PORT": str(grpc_port), "PHOENIX_WORKING_DIR": str(home),
                "PHOENIX_TELEMETRY_ENABLED": "false"})
    log = (home.parent / "phoenix.log").open("wb")
    return subprocess.Popen([str(executable), "serve"], stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _run_demo(base: str, out: Path) -> None:
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    env.update({"OTEL_EXPORTER_OTLP_ENDPOINT": base,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={PROJECT}",
                "OTEL_SERVICE_NAME": "cupellation-demo"})
    subprocess.run([sys.executable, "-m", "cupellation.cli", "demo", "--quiet", "--otlp",
                    "--out", str(out)], check=True, env=env)


def _trace_urls(base: str) -> tuple[str, str, str]:
    """The trace view of the demo's run with its root span selected, with its Slice
    span selected, and the project's trace list."""
    projects = _wait("the demo's project", lambda: [
        project for project in _get(f"{base}/v1/projects").get("data", ())
        if project.get("name") == PROJECT], 30.0)
    spans = _wait("the demo's spans", lambda: _get(
        f"{base}/v1/projects/{PROJECT}/spans?limit=100").get("data"), 30.0)
    root = next(span for span in spans if not span.get("parent_id"))
    stage = next(span for span in spans if span.get("name") == "cupel.stage.slice")
    context = root["context"]
    project = f"{base}/projects/{projects[0]['id']}"
    trace = f"{project}/traces/{context['trace_id']}?selectedSpanNodeId="
    return (trace + str(root.get("id") or context["span_id"]),
            trace + str(stage.get("id") or stage["context"]["span_id"]), project)


def _screenshot(url: str, out: Path, size: str = "1600,2800") -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("phoenix_screenshot: no chromium; run: apt-get install chromium")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", f"--user-data-dir={profile}",
                        f"--window-size={size}", "--virtual-time-budget=15000",
                        f"--screenshot={out}", url], check=True, capture_output=True,
                       timeout=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "phoenix-trace.png")
    parser.add_argument("--stage-out", type=Path, default=None,
                        help="default: phoenix-stage.png beside --out")
    parser.add_argument("--list-out", type=Path, default=None,
                        help="default: phoenix-traces.png beside --out")
    args = parser.parse_args(argv)
    args.stage_out = args.stage_out or args.out.with_name("phoenix-stage.png")
    args.list_out = args.list_out or args.out.with_name("phoenix-traces.png")
    http_port, grpc_port = _free_port(), _free_port()
    base = f"http://127.0.0.1:{http_port}"
    with tempfile.TemporaryDirectory() as work:
        home = Path(work) / "home"
        home.mkdir()
        phoenix = _start_phoenix(home, http_port, grpc_port)
        try:
            _wait("Phoenix's start", lambda: urllib.request.urlopen(
                f"{base}/healthz", timeout=5).status == 200, STARTUP_SECONDS)
            _run_demo(base, Path(work) / "demo")
            url, stage_url, list_url = _trace_urls(base)
            _screenshot(url, args.out)
            _screenshot(stage_url, args.stage_out, "1600,1200")
            _screenshot(list_url, args.list_out, "1600,700")
        finally:
            os.killpg(phoenix.pid, signal.SIGTERM)
            try:
                phoenix.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(phoenix.pid, signal.SIGKILL)
    print(f"wrote {args.out} ({url}), {args.stage_out} ({stage_url}) and {args.list_out} "
          f"({list_url})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
