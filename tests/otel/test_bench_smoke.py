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
    """--sizes 200 --quick: a row per tier and for no provider, in loop and harness
    modes with capture none and full, the rebuild rate, targets n/a below 1,000 items,
    on stdout and in the JSON."""
    monkeypatch.syspath_prepend(str(BENCHMARKS_DIR))
    spec = importlib.util.spec_from_file_location("_smoke_bench_otel",
                                                  BENCHMARKS_DIR / "bench_otel.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    path = tmp_path / "otel.json"
    assert module.main(["--sizes", "200", "--quick", "--json", str(path)]) == 0
    output = capsys.readouterr().out
    payload = json.loads(path.read_text(encoding="utf-8"))
    assert payload["benchmark"] == "otel"
    assert payload["layout"] == "columns"
    assert [row["name"] for row in payload["results"]] == list(module.MODE_NAMES)
    for row in payload["results"]:
        for key in ("loop_none", "loop_full", "harness_none", "harness_full"):
            assert row[key] > 0
        assert row["status"] == "n/a"
    (rebuild,) = payload["rebuild"]
    assert rebuild["complete"]
    assert rebuild["decisions"] == 200
    for name in (*module.MODE_NAMES, "loop none", "harness full", "rebuild from spans"):
        assert name in output
