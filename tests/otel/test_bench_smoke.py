"""benchmarks/bench_otel.py runs and writes what it promises (no timing is asserted)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCHMARKS_DIR = Path(__file__).resolve().parents[2] / "benchmarks"

#: The benchmark scripts take seconds each: the exhaustive run (scripts/test.sh) has them.
pytestmark = pytest.mark.exhaustive


def test_bench_otel_quick_prints_every_mode_and_target(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """--sizes 200 --repeats 2: a row per mode, the unconfigured pairs, the rebuild rate
    and the four targets (n/a below 1,000 items), on stdout and in the JSON."""
    monkeypatch.syspath_prepend(str(BENCHMARKS_DIR))
    spec = importlib.util.spec_from_file_location("_smoke_bench_otel",
                                                  BENCHMARKS_DIR / "bench_otel.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    path = tmp_path / "otel.json"
    assert module.main(["--sizes", "200", "--repeats", "2", "--json", str(path)]) == 0
    output = capsys.readouterr().out
    payload = json.loads(path.read_text(encoding="utf-8"))
    assert payload["benchmark"] == "otel"
    assert [row["name"] for row in payload["results"]] == list(module.MODE_NAMES)
    assert all(len(row["times_ms"]) == 2 for row in payload["results"])
    (pairs,) = payload["unconfigured_overhead"]
    assert pairs["paired_ratio_median"] > 0
    (rebuild,) = payload["rebuild"]
    assert rebuild["spans"] == 6
    assert rebuild["span_events"] > 200
    assert len(payload["targets"]) == 4  # judged at 1,000 items only: all n/a here
    assert {t["status"] for t in payload["targets"]} == {"n/a"}
    for name in module.MODE_NAMES:
        assert name in output
