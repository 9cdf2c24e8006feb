"""The README's Phoenix screenshot is made by a script, against a real Phoenix, in a
real headless Chromium: the script itself is tested so the picture can be remade."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.phoenix]


def test_the_screenshot_script_photographs_the_demo_trace_with_its_root_selected(
        tmp_path: Path) -> None:
    """scripts/phoenix_screenshot.py starts its own Phoenix, sends the demo, finds the
    trace through the REST API, opens the trace view with the root span selected, then
    with the Slice span selected, then the trace list, and writes a PNG of each beside
    --out (real screenshots: PNGs far larger than an empty page), leaving nothing
    running."""
    out = tmp_path / "shot.png"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "phoenix_screenshot.py"),
                           "--out", str(out)], capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "selectedSpanNodeId=" in done.stdout
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 100_000  # the trace view with its input and output panes
    for name, least in (("phoenix-stage.png", 50_000), ("phoenix-traces.png", 20_000)):
        shot = (tmp_path / name).read_bytes()
        assert shot[:8] == b"\x89PNG\r\n\x1a\n"
        assert len(shot) > least
    assert done.stdout.count("selectedSpanNodeId=") == 2
    for name in ("phoenix-stage.png", "phoenix-traces.png"):
        assert (ROOT / "docs" / "images" / name).stat().st_size > 20_000
    assert (ROOT / "docs" / "images" / "phoenix-trace.png").stat().st_size > 100_000
