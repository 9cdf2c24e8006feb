"""examples/traced_agent_loop.py sends its selections to a real Phoenix."""

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
def test_traced_agent_loop_reaches_phoenix(phoenix: Phoenix) -> None:
    """Pointed at Phoenix with the standard variable, the traced agent loop's four steps
    arrive: four agent.step spans, each with its cupel.pipeline span inside, and no span
    dropped on the way."""
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.base_url,
           "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "traced_agent_loop.py")],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert "spans dropped on the way: 0" in result.stdout
    spans = phoenix.spans("cupellation-agent", expect=28)
    names = [span.name for span in spans]
    assert names.count("cupel.pipeline") == 4
    assert sorted(name for name in names if name.startswith("agent.step")) == [
        f"agent.step {step}" for step in range(4)]
    steps = {span.span_id: span.name for span in spans if span.name.startswith("agent.step")}
    parents = [steps.get(span.parent_span_id) for span in spans
               if span.name == "cupel.pipeline"]
    assert sorted(p for p in parents if p) == [f"agent.step {step}" for step in range(4)]
