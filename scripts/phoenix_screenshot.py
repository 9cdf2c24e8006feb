"""Regenerate docs/images/phoenix-trace.png, phoenix-stage.png and phoenix-traces.png:
the demo's trace in Phoenix's trace view (the root span, then the Slice stage's span
selected) and Phoenix's trace list, as a user meets them, taken in headless Chromium.

    .venv/bin/python scripts/phoenix_screenshot.py [--out docs/images/phoenix-trace.png]
        [--stage-out docs/images/phoenix-stage.png] [--list-out docs/images/phoenix-traces.png]
        [--items N]

It starts Phoenix (``scripts/install-phoenix.sh`` puts it in ``.phoenix-venv``; set
``PHOENIX_VENV`` for another place) on free 127.0.0.1 ports with a fresh database,
runs ``cupellation demo --otlp`` against it (with ``--items N``: ``cupellation select
--otlp`` on N candidates made from the demo's, under the demo's policy; the pictures
then default to ``phoenix-*-N.png``), opens the trace view with the root span
selected (its input and output panes hold the kept and dropped items), then with the
Slice span selected (its panes hold that stage's decisions), then the project's trace
list (each trace's outcome in words), and saves a screenshot of each. Nothing is left
running. Needs Debian's ``chromium``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
# (The shared helpers sit beside this script; a test may load it from elsewhere.)
from _screenshots import (
    ROOT,
    chromium,
    free_port,
    get_json,
    send_run,
    shot_args,
    temporary_profile,
    wait,
)

NAME = "phoenix_screenshot"
PROJECT = "cupellation-demo"
#: A busy machine can take minutes to start Phoenix.
STARTUP_SECONDS = float(os.environ.get("PHOENIX_STARTUP_SECONDS", "300"))


def _start_phoenix(home: Path, http_port: int, grpc_port: int) -> subprocess.Popen[bytes]:
    venv = Path(os.environ.get("PHOENIX_VENV") or ROOT / ".phoenix-venv")
    executable = venv / "bin" / "phoenix"
    if not executable.exists():
        raise SystemExit(f"{NAME}: no Phoenix at {executable}; run: "
                         "bash scripts/install-phoenix.sh")
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    env.update({"PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(http_port),
                "PHOENIX_GRPC_PORT": str(grpc_port), "PHOENIX_WORKING_DIR": str(home),
                "PHOENIX_TELEMETRY_ENABLED": "false"})
    log = (home.parent / "phoenix.log").open("wb")
    return subprocess.Popen([str(executable), "serve"], stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _trace_urls(base: str, trace_id: str) -> tuple[str, str, str]:
    """The trace view of the run with its root span selected, with its Slice span
    selected, and the project's trace list."""
    projects = wait(NAME, "the run's project", lambda: [
        project for project in get_json(f"{base}/v1/projects").get("data", ())
        if project.get("name") == PROJECT], 30.0)

    def spans() -> list[dict[str, Any]] | None:
        found = get_json(f"{base}/v1/projects/{PROJECT}/spans?limit=1000").get("data", ())
        mine = [span for span in found if span["context"]["trace_id"] == trace_id]
        names = {span.get("name") for span in mine}
        return mine if {"cupel.pipeline", "cupel.stage.slice"} <= names else None

    found = wait(NAME, "the run's spans", spans, 60.0)
    root = next(span for span in found if span.get("name") == "cupel.pipeline")
    stage = next(span for span in found if span.get("name") == "cupel.stage.slice")
    project = f"{base}/projects/{projects[0]['id']}"
    trace = f"{project}/traces/{trace_id}?selectedSpanNodeId="
    return (trace + str(root.get("id") or root["context"]["span_id"]),
            trace + str(stage.get("id") or stage["context"]["span_id"]), project)


def _screenshot(url: str, out: Path, size: str = "1600,2800") -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with temporary_profile() as profile:
        subprocess.run([chromium(), *shot_args(profile, size), "--virtual-time-budget=15000",
                        f"--screenshot={out}", url], check=True, capture_output=True,
                       timeout=120)


def main(argv: list[str] | None = None) -> int:
    """Start Phoenix, send the run, take the three screenshots, stop Phoenix."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=None,
                        help="default: docs/images/phoenix-trace.png (-N with --items N)")
    parser.add_argument("--stage-out", type=Path, default=None,
                        help="default: phoenix-stage.png beside --out")
    parser.add_argument("--list-out", type=Path, default=None,
                        help="default: phoenix-traces.png beside --out")
    parser.add_argument("--items", type=int, default=None, metavar="N",
                        help="send N candidates made from the demo's instead of the demo")
    args = parser.parse_args(argv)
    suffix = "" if args.items is None else f"-{args.items}"
    args.out = args.out or ROOT / "docs" / "images" / f"phoenix-trace{suffix}.png"
    args.stage_out = args.stage_out or args.out.with_name(f"phoenix-stage{suffix}.png")
    args.list_out = args.list_out or args.out.with_name(f"phoenix-traces{suffix}.png")
    http_port, grpc_port = free_port(), free_port()
    base = f"http://127.0.0.1:{http_port}"
    with temporary_profile() as work:
        home = Path(work) / "home"
        home.mkdir()
        phoenix = _start_phoenix(home, http_port, grpc_port)
        try:
            wait(NAME, "Phoenix's start", lambda: urllib.request.urlopen(
                f"{base}/healthz", timeout=5).status == 200, STARTUP_SECONDS)
            trace_id = send_run(NAME, {
                "OTEL_EXPORTER_OTLP_ENDPOINT": base,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={PROJECT}",
                "OTEL_SERVICE_NAME": "cupellation-demo"}, Path(work), args.items)
            url, stage_url, list_url = _trace_urls(base, trace_id)
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
