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
    """--sizes 200 --quick, in loop mode: a ratio to the untraced run per tier with
    capture none and full, the rebuild rate at the default capture (none) with full as
    an extra line, on stdout and in the JSON."""
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
    for tier in ("StageOnly", "StageAndExclusions", "Full"):
        for capture in ("", ", capture full"):
            assert f"{tier}{capture}/untraced@200" in payload["ratios"]
    assert "rebuild/untraced@200" in payload["ratios"]
    assert payload["mode"] == "loop"
    assert payload["rebuild_captures"] == {"rebuild": "none", "rebuild, capture full": "full"}
    assert payload["figures"]["rebuild_decisions_per_s@200"]["median"] > 0
    for words in ("rebuild from spans, default capture (none), every entry read",
                  "capture full (extra line, not judged)", "loop mode"):
        assert words in output
