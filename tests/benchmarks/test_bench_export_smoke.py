"""benchmarks/bench_export.py runs and writes what it promises (no timing is asserted)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCHMARKS_DIR = Path(__file__).resolve().parents[2] / "benchmarks"

#: The benchmark scripts take seconds each: the exhaustive run (scripts/test.sh) has them.
pytestmark = pytest.mark.exhaustive


def test_bench_export_tiny_prints_every_mode_the_accounting_and_the_targets(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """--sizes 50 --repeats 2: a row per mode (untraced, in-memory, OTLP/HTTP and gRPC
    to a closed port), each with two timings and its ratio to the in-memory row; the
    span accounting shows the in-memory exporter took every span and the unreachable
    ones none (all counted dropped); both targets are n/a below 1,000 items."""
    monkeypatch.syspath_prepend(str(BENCHMARKS_DIR))
    spec = importlib.util.spec_from_file_location("_smoke_bench_export",
                                                  BENCHMARKS_DIR / "bench_export.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    path = tmp_path / "export.json"
    assert module.main(["--sizes", "50", "--repeats", "2", "--json", str(path)]) == 0
    output = capsys.readouterr().out
    payload = json.loads(path.read_text(encoding="utf-8"))
    assert payload["benchmark"] == "export"
    assert payload["repeats"] == 2
    assert [row["name"] for row in payload["results"]] == list(module.MODE_NAMES)
    for row in payload["results"]:
        assert len(row["times_ms"]) == 2
        assert row["vs_in_memory"] > 0
    accounting = {entry["mode"]: entry for entry in payload["accounting"]}
    memory = accounting["Full, in-memory exporter"]
    assert memory["submitted"] == memory["delivered"] > 0
    assert memory["dropped"] == 0
    for mode in ("Full, OTLP/HTTP unreachable", "Full, OTLP/gRPC unreachable"):
        assert accounting[mode]["delivered"] == 0
        assert accounting[mode]["dropped"] == accounting[mode]["submitted"] > 0
        assert accounting[mode]["endpoint"].startswith("http://127.0.0.1:")
    assert [t["status"] for t in payload["targets"]] == ["n/a", "n/a"]
    for name in module.MODE_NAMES:
        assert name in output
    assert "targets" in output.splitlines()
