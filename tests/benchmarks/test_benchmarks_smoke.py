"""Smoke tests of the benchmark scripts in ``benchmarks/``: the regression check runs
every ratio benchmark in quick mode and gives a well-formed verdict; each script
writes the JSON it promises. Nothing here asserts a timing or that a target is met
(CI's machines are too busy for figures to mean anything)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import cupellation._pipeline as pipeline_module
from cupellation._fused import fused_run

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
RATIO_BENCHMARKS = ("pipeline", "otel", "logs", "chat", "export")
SPREAD_KEYS = {"median", "min", "max", "rounds", "unit"}
#: Measures each quick run must write (the targets of issue 26 they can judge).
EXPECTED = {
    "pipeline": {"ratios": {"null/untraced@1000", "full_report/untraced@1000",
                            "full_json/untraced@1000", "full_report/untraced@100"},
                 "figures": {"fixed_cost_us", "per_item_us", "fixed_cost_small_paths_us",
                             "per_item_small_paths_us", "untraced_cpu_ms@1000",
                             "one_process_cpu_s@20000", "one_process_peak_rss_mib@20000"}},
    "otel": {"ratios": {"StageOnly/untraced@1000", "StageAndExclusions/untraced@1000",
                        "Full/untraced@1000", "Full, capture full/untraced@1000",
                        "no provider configured/untraced@1000", "rebuild/untraced@1000"},
             "figures": {"rebuild_decisions_per_s@1000",
                         "rebuild_full_capture_decisions_per_s@1000"}},
    "logs": {"ratios": {"audit/untraced@1000", "nop_full/untraced@1000",
                        "audit/audit_no_digest@1000", "read.recurring/floor",
                        "read.unique/floor"},
             "figures": {"rebuild_events_per_s.recurring", "rebuild_events_per_s.unique",
                         "rebuild_events_per_s.recurring_untouched", "memory_10x/1x"}},
    "chat": {"ratios": {"history_turn/warm_pipeline", "list_turn/warm_pipeline",
                        "count/warm_pipeline"},
             "figures": {"pipeline", "conversion"}},
    "export": {"ratios": {"Full, OTLP/HTTP unreachable/in-memory@1000",
                          "Full, OTLP/gRPC unreachable/in-memory@1000"},
               "figures": set()},
}


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``check.py --quick`` once: its exit status, output, verdict JSON and the JSON
    every ratio benchmark wrote."""
    folder = tmp_path_factory.mktemp("check")
    verdict = folder / "verdict.json"
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS_DIR / "check.py"), "--quick", "--keep",
         str(folder / "runs"), "--json", str(verdict)],
        capture_output=True, text=True, timeout=900, check=False)
    return {"status": result.returncode, "stdout": result.stdout, "stderr": result.stderr,
            "verdict": json.loads(verdict.read_text(encoding="utf-8"))
            if verdict.exists() else None,
            "runs": {name: json.loads((folder / "runs" / f"{name}.json").read_text(
                encoding="utf-8")) for name in RATIO_BENCHMARKS
                if (folder / "runs" / f"{name}.json").exists()}}


def test_check_quick_gives_a_well_formed_verdict(checked: dict[str, Any]) -> None:
    """check.py --quick runs the five ratio benchmarks and exits 0 or 1 (never a crash);
    every target of targets.toml is met, missed or not measured, issue 26's judgeable
    ones measured; every ratio is compared with the committed baseline; the ratios it
    names worse are exactly those whose status is worse, on its 'worse' line too."""
    assert checked["status"] in {0, 1}, checked["stderr"]
    verdict = checked["verdict"]
    assert verdict["benchmarks"] == sorted(RATIO_BENCHMARKS)
    statuses = {t["measure"]: t["status"] for t in verdict["targets"]}
    assert set(statuses.values()) <= {"met", "missed", "not measured"}
    for target in verdict["targets"]:
        if target["status"] != "not measured":
            assert target["measured"].keys() >= {"median", "min", "max"}
    judged_by_quick = [t["measure"] for t in verdict["targets"] if t["issue"] == 26
                       and "1000000" not in t["measure"]]
    assert len(judged_by_quick) == 13
    assert all(statuses[measure] in {"met", "missed"} for measure in judged_by_quick)
    comparisons = {c["measure"]: c["status"] for c in verdict["comparisons"]}
    assert set(comparisons.values()) <= {"worse", "same", "better", "not measured", "new"}
    assert sorted(verdict["worse"]) == sorted(m for m, s in comparisons.items()
                                              if s == "worse")
    assert (checked["status"] == 1) == bool(verdict["worse"])
    assert "worse by more than 25%: " in checked["stdout"]
    assert "targets (judged on the median" in checked["stdout"]


def test_every_ratio_benchmark_writes_its_ratios_and_figures(checked: dict[str, Any]) -> None:
    """Each ratio benchmark's JSON says how it timed (loop mode, thread CPU time,
    quick) and holds the ratios and figures the check and the targets read, each a
    median inside its min-max over at least one round."""
    assert sorted(checked["runs"]) == sorted(RATIO_BENCHMARKS)
    for name, data in checked["runs"].items():
        assert data["benchmark"] == name
        assert (data["mode"], data["quick"]) == ("loop", True)
        assert "thread CPU time" in data["clock"]
        for section in ("ratios", "figures"):
            assert set(data[section]) >= EXPECTED[name][section], (name, section)
            for key, spread in data[section].items():
                assert spread.keys() >= SPREAD_KEYS, (name, key)
                assert spread["min"] <= spread["median"] <= spread["max"], (name, key)
                assert spread["rounds"] >= 1


def test_rebuild_rates_read_every_entry_at_the_default_capture(checked: dict[str, Any]
                                                               ) -> None:
    """bench_otel's judged rebuild runs over spans made at capture none (the full
    capture only on its labelled line); bench_logs' timed reads read one report entry
    per candidate of every logged run."""
    otel = checked["runs"]["otel"]
    assert otel["rebuild_captures"] == {"rebuild": "none", "rebuild, capture full": "full"}
    logs = checked["runs"]["logs"]
    every = logs["runs_per_log"] * logs["candidates_per_run"]
    assert logs["entries_read"] == {"recurring": every, "unique": every}


def test_the_rust_figures_are_quoted_with_source_and_date(checked: dict[str, Any]) -> None:
    """bench_pipeline measures no Rust figure: it prints and writes them as quoted,
    each with its source and date."""
    quoted = checked["runs"]["pipeline"]["rust_quoted_not_measured"]
    assert quoted["ours_over_rust_by_items"] == {"100": 0.78, "1000": 0.29, "10000": 0.058,
                                                 "100000": 0.006}
    assert "2026-11-27" in quoted["ours_over_rust_source"]
    assert "2026-11-22" in quoted["wall_ms_source"]
    assert not any("rust" in key.lower() for key in checked["runs"]["pipeline"]["ratios"])


def test_the_export_benchmark_accounts_for_every_span(checked: dict[str, Any]) -> None:
    """The in-memory exporter took every span; the unreachable OTLP exporters (a bound,
    never-listening 127.0.0.1 port) delivered none and counted them all dropped."""
    accounting = {entry["mode"]: entry for entry in checked["runs"]["export"]["accounting"]}
    memory = accounting["Full, in-memory exporter"]
    assert memory["submitted"] == memory["delivered"] > 0
    assert memory["dropped"] == 0
    for mode in ("Full, OTLP/HTTP unreachable", "Full, OTLP/gRPC unreachable"):
        assert accounting[mode]["delivered"] == 0
        assert accounting[mode]["dropped"] == accounting[mode]["submitted"] > 0
        assert accounting[mode]["endpoint"].startswith("http://127.0.0.1:")


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


def _main_of(name: str, argv: list[str]) -> int:
    """``benchmarks/<name>.py``'s ``main(argv)``, imported with ``benchmarks/`` on the
    path for its harness, and forgotten after."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS_DIR))
        module = _load(name)
        try:
            status: int = module.main(argv)
        finally:
            sys.modules.pop(module.__name__, None)
    return status


@pytest.fixture(scope="module")
def components() -> Iterator[ModuleType]:
    """bench_components, imported with ``benchmarks/`` on the path for its harness."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS_DIR))
        module = _load("bench_components")
        yield module
        sys.modules.pop(module.__name__, None)


def test_components_covers_every_component(components: ModuleType, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """bench_components at 50 items, 2 rounds, prints and writes every scorer, slicer
    and placer with its CPU time spread and group, and the slowest scorer-or-greedy
    figure a target reads."""
    path = tmp_path / "components.json"
    assert components.main(["--sizes", "50", "--repeats", "2", "--json", str(path)]) == 0
    output = capsys.readouterr().out
    data = json.loads(path.read_text(encoding="utf-8"))
    names = (*SCORERS, *SLICERS, *PLACERS)
    assert [row["name"] for row in data["results"]] == list(names)
    for row in data["results"]:
        assert len(row["cpu_ms_rounds"]) == 2
        assert row["peak_mib"] >= 0.0
    assert {f"{name}_cpu_ms@50" for name in names} <= set(data["figures"])
    assert data["figures"]["slowest_scorer_or_greedy_cpu_ms@50"]["component"] in (
        *SCORERS, "GreedySlice")
    for name in names:
        assert any(line.startswith(name) for line in output.splitlines()), name
    assert "loop mode" in output


def test_command_line_defaults_quick_and_mode(components: ModuleType) -> None:
    """The shared options: default sizes and 7 rounds in loop mode, --quick's 100,1000
    and 3 rounds, explicit --sizes/--repeats/--mode harness, a rejected malformed
    --sizes."""
    parse = components.parse_args
    defaults = parse("x", [], default_sizes=(100, 1000, 10000, 100000))
    assert (defaults.sizes, defaults.repeats, defaults.json_path, defaults.mode.value) == (
        [100, 1000, 10000, 100000], 7, None, "loop")
    quick = parse("x", ["--quick"], default_sizes=(100, 1000, 10000, 100000))
    assert (quick.sizes, quick.repeats) == ([100, 1000], 3)
    explicit = parse("x", ["--sizes", "5,50", "--repeats", "2", "--mode", "harness"],
                     default_sizes=(1,))
    assert (explicit.sizes, explicit.repeats, explicit.mode.value) == ([5, 50], 2, "harness")
    with pytest.raises(SystemExit):
        parse("x", ["--sizes", "ten"], default_sizes=(1,))


def test_ab_fused_prints_both_paths_and_restores_the_dispatch(
        capsys: pytest.CaptureFixture[str]) -> None:
    """ab_fused (one round, 5 items) prints each size's two paths and ratio, both fixed
    costs and the saving, and leaves Pipeline.run's dispatch to the fused path as it
    found it (the stage variant swaps it only while its calls are timed)."""
    assert vars(pipeline_module)["fused_run"] is fused_run
    assert _main_of("ab_fused", ["--rounds", "1", "--sizes", "5"]) == 0
    output = capsys.readouterr().out
    assert "5 items: stage " in output
    assert "stage/fused" in output
    assert "fixed cost (stage," in output
    assert "fixed cost (fused," in output
    assert "fixed cost saved per round" in output
    assert vars(pipeline_module)["fused_run"] is fused_run


def test_ab_positions_prints_both_sides_and_restores_what_it_swaps(
        capsys: pytest.CaptureFixture[str]) -> None:
    """ab_positions (one round, 30 items) prints every variant's old and new side with
    their ratio, the traced ones over the untraced run too, and leaves the names it
    rebinds (the strategy types the stage path compares against, the span reader's
    block decoder) as it found them."""
    import cupellation._run as run_module  # noqa: PLC0415
    import cupellation.otel._spandecode as spandecode_module  # noqa: PLC0415

    before = (vars(run_module)["GreedySlice"], vars(run_module)["UShapedPlacer"],
              vars(spandecode_module)["block_events"])
    assert _main_of("ab_positions", ["--rounds", "1", "--items", "30"]) == 0
    output = capsys.readouterr().out
    for name in ("Full, do-nothing collector", "full report", "AuditLog", "spans StageOnly",
                 "spans Full", "rebuild, capture none", "rebuild, capture full"):
        assert f"  {name}: old " in output
    assert output.count("new/old") == 9
    assert output.count("over untraced") == 6
    assert (vars(run_module)["GreedySlice"], vars(run_module)["UShapedPlacer"],
            vars(spandecode_module)["block_events"]) == before


def test_ab_small_runs_prints_both_sides_and_restores_what_it_swaps(
        capsys: pytest.CaptureFixture[str]) -> None:
    """ab_small_runs (one round, 5 and 20 items) prints each size's old and new side
    with their ratio and both sides' fixed cost, and leaves GreedySlice's selection
    in the fused path and the stage path as it found it (and the reference pipeline's
    composite trusting its children)."""
    import cupellation._fused as fused_module  # noqa: PLC0415
    import cupellation._run as run_module  # noqa: PLC0415

    before = (vars(fused_module)["checked_greedy_select"],
              vars(run_module)["checked_greedy_select"])
    assert _main_of("ab_small_runs", ["--rounds", "1", "--sizes", "5", "20"]) == 0
    output = capsys.readouterr().out
    assert "  5 items: old " in output
    assert "  20 items: old " in output
    assert output.count("new/old") == 2
    assert "fixed cost (old, fit over 5, 20 items)" in output
    assert "fixed cost (new, fit over 5, 20 items)" in output
    assert (vars(fused_module)["checked_greedy_select"],
            vars(run_module)["checked_greedy_select"]) == before
    assert vars(fused_module)["checked_greedy_select"].__name__ == "checked_greedy_select"


def test_ab_score_arrays_prints_both_sides_and_restores_what_it_swaps(
        capsys: pytest.CaptureFixture[str]) -> None:
    """ab_score_arrays (one round, 200 and 300 items) prints each size's old and new
    side with their ratio, and leaves the pipeline asking the built-in scorers for
    their arrays as it found it (the old side declines them only while it runs)."""
    import cupellation._run as run_module  # noqa: PLC0415

    real = vars(run_module)["builtin_scores_array"]

    def wrapped(scorer: object, items: Any) -> Any:
        return real(scorer, items)

    with pytest.MonkeyPatch.context() as patch:
        # A stand-in the script must put back, not the real function it imports.
        patch.setattr(run_module, "builtin_scores_array", wrapped)
        assert _main_of("ab_score_arrays", ["--rounds", "1", "--sizes", "200", "300"]) == 0
        assert vars(run_module)["builtin_scores_array"] is wrapped
    output = capsys.readouterr().out
    assert "  200 items: old " in output
    assert "  300 items: old " in output
    assert output.count("new/old") == 2
    assert vars(run_module)["builtin_scores_array"] is real


def test_ab_large_sorts_prints_both_sides_and_restores_what_it_swaps(
        capsys: pytest.CaptureFixture[str]) -> None:
    """ab_large_sorts (one round, 5,000 items: past QUICK_ORDER and SORTED_RANKS)
    prints the old and new side with their ratio, both sides choosing the same window,
    and leaves every name it swaps (the descending orders, the rank pieces, the
    gather) as it found them."""
    import cupellation._fused as fused_module  # noqa: PLC0415
    import cupellation._run as run_module  # noqa: PLC0415
    import cupellation.slicing._greedy as greedy_module  # noqa: PLC0415
    from cupellation.scoring import _rank  # noqa: PLC0415

    names = ((run_module, "descending_order"), (greedy_module, "descending_order"),
             (_rank, "_counted_ranks"), (_rank, "_first_positions"),
             (fused_module, "_gathered"))
    real = [vars(module)[name] for module, name in names]

    def stand_in(form: Any) -> Any:
        def wrapped(*args: Any) -> Any:
            return form(*args)
        return wrapped

    with pytest.MonkeyPatch.context() as patch:
        # Stand-ins the script must put back, not the real functions it imports.
        stand_ins = [stand_in(form) for form in real]
        for (module, name), form in zip(names, stand_ins, strict=True):
            patch.setattr(module, name, form)
        assert _main_of("ab_large_sorts", ["--rounds", "1", "--sizes", "5000"]) == 0
        assert [vars(module)[name] for module, name in names] == stand_ins
    output = capsys.readouterr().out
    assert "  5000 items: old " in output
    assert output.count("new/old") == 1
    assert [vars(module)[name] for module, name in names] == real


def test_ab_kind_scorer_prints_both_sides_and_restores_the_lookup(
        capsys: pytest.CaptureFixture[str]) -> None:
    """ab_kind_scorer (one round, transcripts of 3 and 5 exchanges) prints each size's
    old and new side with their ratio, both sides choosing the same window; a call on
    the old side sees the old lookup and puts back the KindScorer.score_all it found
    (a stand-in here), and so does the whole script."""
    from cupellation.scoring import KindScorer  # noqa: PLC0415

    real = KindScorer.__dict__["score_all"]

    def stand_in(self: Any, items: Any, /) -> Any:
        return real(self, items)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(KindScorer, "score_all", stand_in)
        patch.syspath_prepend(str(BENCHMARKS_DIR))
        module = _load("ab_kind_scorer")
        try:
            seen: list[object] = []
            module.swapped_call(module._SWAPS, "old",
                                lambda: seen.append(KindScorer.__dict__["score_all"]))
            assert seen == [module._by_context_kind]
            assert KindScorer.__dict__["score_all"] is stand_in
        finally:
            sys.modules.pop(module.__name__, None)
        assert _main_of("ab_kind_scorer", ["--rounds", "1", "--exchanges", "3", "5"]) == 0
        assert KindScorer.__dict__["score_all"] is stand_in
    output = capsys.readouterr().out
    assert output.count(" items: old ") == 2
    assert output.count("new/old") == 2
    assert KindScorer.__dict__["score_all"] is real
