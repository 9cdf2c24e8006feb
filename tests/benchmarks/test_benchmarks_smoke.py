"""Smoke tests of the benchmark scripts in ``benchmarks/``: they run, cover every
component and write the JSON they promise. Nothing here asserts a timing."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCHMARKS_DIR = Path(__file__).resolve().parents[2] / "benchmarks"

#: The benchmark scripts take seconds each: the exhaustive run (scripts/test.sh) has them.
pytestmark = pytest.mark.exhaustive

SCORERS = (
    "RecencyScorer", "PriorityScorer", "KindScorer", "TagScorer", "FrequencyScorer",
    "ReflexiveScorer", "CompositeScorer", "ScaledScorer", "MetadataTrustScorer",
    "MetadataKeyScorer", "DecayScorer",
)
SLICERS = (
    "GreedySlice", "KnapsackSlice", "QuotaSlice", "CountQuotaSlice",
    "CountConstrainedKnapsackSlice",
)
PLACERS = ("ChronologicalPlacer", "UShapedPlacer")
PIPELINE_MODES = ("run(collector=None)", "run(NULL_COLLECTOR)", "run(FULL)+build_report()",
                  "run(FULL)+report.to_json()")
QUICK_SIZES = (100, 1000)
RESULT_KEYS = {"name", "group", "n", "median_ms", "min_ms", "peak_mib", "times_ms"}


def _load(name: str) -> ModuleType:
    """Import ``benchmarks/<name>.py`` by path, as a standalone script module."""
    path = BENCHMARKS_DIR / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_smoke_{name}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def scripts() -> Iterator[dict[str, ModuleType]]:
    """Both benchmark scripts, imported with ``benchmarks/`` on the path for their harness."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS_DIR))
        modules = {name: _load(name) for name in ("bench_components", "bench_pipeline")}
        yield modules
        for module in modules.values():
            sys.modules.pop(module.__name__, None)


def _run(module: ModuleType, json_path: Path, capsys: pytest.CaptureFixture[str]
         ) -> tuple[str, dict[str, Any]]:
    """Run a script's main with --quick, returning its printed output and JSON."""
    status = module.main(["--quick", "--json", str(json_path)])
    assert status == 0
    output = capsys.readouterr().out
    payload: dict[str, Any] = json.loads(json_path.read_text(encoding="utf-8"))
    return output, payload


def _check_rows(payload: dict[str, Any], names: tuple[str, ...], repeats: int) -> None:
    """Every name has one well-formed result row at each quick size."""
    rows = payload["results"]
    assert {(row["name"], row["n"]) for row in rows} == {
        (name, n) for name in names for n in QUICK_SIZES
    }
    assert len(rows) == len(names) * len(QUICK_SIZES)
    for row in rows:
        assert row.keys() >= RESULT_KEYS
        assert len(row["times_ms"]) == repeats
        assert min(row["times_ms"]) == row["min_ms"] <= row["median_ms"] <= max(row["times_ms"])
        assert row["peak_mib"] is not None
        assert row["peak_mib"] >= 0.0


def _table_lines(output: str, name: str) -> list[str]:
    """The printed table rows of ``name`` (first column exactly ``name``)."""
    return [line for line in output.splitlines() if line.split("  ")[0].rstrip() == name]


def test_components_quick_covers_every_component(
    scripts: dict[str, ModuleType], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """bench_components --quick prints and writes a row per component and size, and a
    targets section naming every scorer, GreedySlice and KnapsackSlice."""
    output, payload = _run(scripts["bench_components"], tmp_path / "components.json", capsys)
    assert {"benchmark", "environment", "sizes", "repeats", "results", "targets"} <= payload.keys()
    assert payload["benchmark"] == "components"
    assert payload["sizes"] == list(QUICK_SIZES)
    assert payload["repeats"] == 3
    components = SCORERS + SLICERS + PLACERS
    _check_rows(payload, components, 3)
    groups = {row["name"]: row["group"] for row in payload["results"]}
    assert {groups[name] for name in SCORERS} == {"scorer"}
    assert {groups[name] for name in SLICERS} == {"slicer"}
    assert {groups[name] for name in PLACERS} == {"placer"}
    for name in components:
        assert len(_table_lines(output, name)) == len(QUICK_SIZES), name
    target_names = [target["name"] for target in payload["targets"]]
    for name in (*SCORERS, "GreedySlice", "KnapsackSlice"):
        assert any(t.startswith(f"{name} @ 10,000 items") for t in target_names), name
    # --quick never measures 10,000 items, so no target can be judged.
    assert {target["status"] for target in payload["targets"]} == {"n/a"}
    assert "targets" in output.splitlines()


def test_pipeline_quick_covers_every_mode(
    scripts: dict[str, ModuleType], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """bench_pipeline --quick prints and writes the four modes at each size, the memory
    ratios, the interleaved null-collector comparison, the targets, and labels the
    Rust figures as quoted rather than measured."""
    output, payload = _run(scripts["bench_pipeline"], tmp_path / "pipeline.json", capsys)
    assert {
        "benchmark", "environment", "configuration", "sizes", "repeats", "results", "memory",
        "null_collector_overhead", "rust_reference_ms_quoted", "targets",
    } <= payload.keys()
    assert payload["benchmark"] == "pipeline"
    _check_rows(payload, PIPELINE_MODES, 3)
    for row in payload["results"]:
        assert row["vs_none"] > 0.0
    assert [entry["n"] for entry in payload["memory"]] == list(QUICK_SIZES)
    for entry in payload["memory"]:
        assert entry["input_bytes"] > 0
        assert entry["ratio"] == entry["run_peak_bytes"] / entry["input_bytes"]
    (overhead,) = payload["null_collector_overhead"]
    assert overhead["n"] == 100
    assert overhead["runs"] == 5
    assert overhead["ratio"] == overhead["null_median_ms"] / overhead["none_median_ms"]
    assert "QUOTED" in output
    assert payload["rust_reference_ms_quoted"] == {
        "500": 1.4, "1000": 4.8, "10000": 413.0, "100000": 132000.0,
    }
    for mode in PIPELINE_MODES:
        assert len(_table_lines(output, mode)) == len(QUICK_SIZES), mode
    statuses = {target["name"]: target["status"] for target in payload["targets"]}
    assert statuses["500 items, NULL_COLLECTOR median"] == "n/a"
    assert statuses["FULL + build_report / untraced at 1,000 items"] in {"PASS", "MISS"}
    assert statuses["FULL + report JSON / untraced at 100 items"] in {"PASS", "MISS"}
    assert statuses["100 items, collector=None median"] in {"PASS", "MISS"}
    assert "peak memory of run(None) / input at 100,000 items" in statuses


def test_command_line_defaults_and_quick(scripts: dict[str, ModuleType]) -> None:
    """The shared options: default sizes and 7 repeats, --quick's 100,1000 and 3 repeats,
    explicit --sizes/--repeats, and a rejected malformed --sizes."""
    parse = scripts["bench_components"].parse_args
    defaults = parse("x", [], default_sizes=(100, 1000, 10000, 100000))
    assert (defaults.sizes, defaults.repeats, defaults.json_path) == (
        [100, 1000, 10000, 100000], 7, None)
    quick = parse("x", ["--quick"], default_sizes=(100, 1000, 10000, 100000))
    assert (quick.sizes, quick.repeats) == ([100, 1000], 3)
    explicit = parse("x", ["--sizes", "5,50", "--repeats", "2"], default_sizes=(1,))
    assert (explicit.sizes, explicit.repeats) == ([5, 50], 2)
    with pytest.raises(SystemExit):
        parse("x", ["--sizes", "ten"], default_sizes=(1,))
    pipeline_defaults = scripts["bench_pipeline"].DEFAULT_SIZES
    assert pipeline_defaults == (100, 500, 1000, 2000, 10000, 20000, 100000)
