"""What scripts/phoenix_screenshot.py and scripts/mlflow_screenshot.py share: free
loopback ports, polling, the run they send (the demo, or ``--items N`` candidates made
from the demo's) and headless Chromium.

The run is sent by the CLI as a user sends it (``cupellation demo --otlp``, or
``cupellation select ITEMS --policy DEMO --otlp``), so the pictures show what a user
sees; its trace id is read from the line the CLI prints on standard error.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Mapping
from importlib.resources import files
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["ROOT", "candidates", "chromium", "free_port", "get_json", "send_run",
           "shot_args", "temporary_profile", "wait"]

ROOT = Path(__file__).resolve().parent.parent
_T = TypeVar("_T")
#: Every hundredth copy keeps its original's content, so Deduplicate has work.
_DUPLICATE_EVERY = 100
_TRACE = re.compile(r"as trace ([0-9a-f]{32})")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def get_json(url: str, data: Mapping[str, Any] | None = None) -> Any:
    """The JSON answer of a GET (or, with ``data``, a JSON POST) to ``url``."""
    request = urllib.request.Request(url) if data is None else urllib.request.Request(
        url, data=json.dumps(data).encode("utf-8"),
        headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)


def wait(name: str, what: str, check: Callable[[], _T | None], seconds: float) -> _T:
    """Poll ``check`` until it gives something true; exit naming ``what`` after
    ``seconds`` (a server still starting refuses connections: that is waited out)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            found = check()
        except OSError:
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            raise SystemExit(f"{name}: {what} did not happen within {seconds:g} s")
        time.sleep(0.5)


def candidates(count: int) -> list[dict[str, Any]]:
    """``count`` candidates made from the demo's 22: the demo's first, then copies of
    them (content numbered, not pinned; every hundredth keeps its content, a
    duplicate), so a large run has every reason the demo has (budget, negative tokens,
    duplicate) in numbers."""
    demo = json.loads((files("cupellation") / "_data" / "demo_candidates.json")
                      .read_text(encoding="utf-8"))
    out: list[dict[str, Any]] = []
    for k in range(count):
        item = dict(demo[k % len(demo)])
        if k >= len(demo):
            item.pop("pinned", None)
            if k % _DUPLICATE_EVERY:
                item["content"] = f"{item['content']} (copy {k // len(demo)})"
        out.append(item)
    return out


def send_run(name: str, env: Mapping[str, str], work: Path, items: int | None) -> str:
    """Send the demo (``items`` None) or ``items`` candidates under the demo's policy
    with the CLI, to the endpoint ``env`` names; the trace id it printed."""
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    # A busy machine's MLflow can take over the default 10 s to take a large run: the
    # export (and the wait for it at exit) gets two minutes.
    run_env["OTEL_EXPORTER_OTLP_TIMEOUT"] = "120"
    run_env.update(env)
    cli = [sys.executable, "-m", "cupellation.cli"]
    if items is None:
        command = [*cli, "demo", "--quiet", "--otlp", "--out", str(work / "demo")]
    else:
        data = files("cupellation") / "_data"
        policy, given = work / "policy.json", work / "candidates.json"
        policy.write_text((data / "demo_policy.json").read_text(encoding="utf-8"),
                          encoding="utf-8")
        given.write_text(json.dumps(candidates(items)), encoding="utf-8")
        command = [*cli, "select", str(given), "--policy", str(policy), "--otlp",
                   "--otlp-content", "full", "--quiet"]
    done = subprocess.run(command, env=run_env, capture_output=True, text=True, check=False,
                          timeout=600)
    found = _TRACE.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{name}: {' '.join(command[2:4])} exited {done.returncode} "
                         f"without a trace id: {done.stderr[-2000:]}")
    return found.group(1)


def chromium() -> str:
    """Debian's chromium, or an exit saying how to install it."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        raise SystemExit("screenshot: no chromium; run: apt-get install chromium")
    return found


def shot_args(profile: str, size: str) -> list[str]:
    """Headless Chromium's options for a screenshot of ``size`` ("W,H")."""
    return ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--user-data-dir={profile}", f"--window-size={size}"]


def temporary_profile() -> tempfile.TemporaryDirectory[str]:
    """A fresh browser profile (no state from an earlier run)."""
    return tempfile.TemporaryDirectory()
