"""examples/send_to_otlp.py delivers its runs to a real OTLP backend (Phoenix)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .phoenix import Phoenix

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.phoenix
def test_send_to_otlp_example_reaches_phoenix(phoenix: Phoenix) -> None:
    """Pointed at Phoenix with the standard variable, the example's three runs arrive
    as cupel.pipeline spans (six spans each) and nothing is dropped."""
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.base_url,
           "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "send_to_otlp.py")],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert "spans dropped on the way: 0" in result.stdout
    spans = phoenix.spans("cupellation", expect=18)
    assert sum(span.name == "cupel.pipeline" for span in spans) == 3
