"""The regression check's rules and the timing core, on made-up figures: no benchmark
runs here and nothing is timed against a limit."""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS_DIR = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS_DIR) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS_DIR))

import _harness  # noqa: E402
import check  # noqa: E402
from cupellation.exceptions import DecodeError  # noqa: E402


def _range(median: float, low: float, high: float) -> dict[str, Any]:
    return {"median": median, "min": low, "max": high, "rounds": 5, "unit": "x"}


def test_a_ratio_is_worse_only_when_its_whole_range_is_25_percent_past_the_baseline() -> None:
    """fresh.min > baseline.max x 1.25 is worse; a range that still overlaps that
    bound (even with a much worse median) is the same; the mirror is better; a ratio
    only one side has is not measured or new."""
    baseline = {"a": _range(1.5, 1.4, 1.6), "b": _range(1.5, 1.4, 1.6),
                "c": _range(2.0, 1.9, 2.1), "d": _range(1.0, 1.0, 1.0)}
    fresh = {"a": _range(2.2, 2.01, 2.3),   # min 2.01 > 1.6 x 1.25 = 2.0
             "b": _range(2.5, 1.99, 2.6),   # a worse median, but min 1.99 <= 2.0
             "c": _range(1.4, 1.3, 1.5),    # max 1.5 < 1.9 / 1.25 = 1.52
             "e": _range(1.0, 1.0, 1.0)}
    statuses = {c.measure: c.status for c in check.compare(fresh, baseline)}
    assert statuses == {"a": "worse", "b": "same", "c": "better", "d": "not measured",
                        "e": "new"}


def test_targets_are_judged_on_the_median_in_either_direction() -> None:
    """An at_most target is met by a median at or under its limit, an at_least one by a
    median at or over it; a measure no benchmark wrote is not measured."""
    low = check.TargetSpec(issue=26, what="low", measure="x.low", limit=1.5, at_least=False)
    high = check.TargetSpec(issue=26, what="high", measure="x.high", limit=200.0,
                            at_least=True)
    gone = check.TargetSpec(issue=26, what="gone", measure="x.gone", limit=1.0,
                            at_least=False)
    verdicts = check.judge([low, high, gone], {"x.low": _range(1.5, 1.0, 9.0),
                                               "x.high": _range(199.0, 150.0, 300.0)})
    assert [v.status for v in verdicts] == ["met", "missed", "not measured"]
    assert verdicts[0].to_dict()["measured"]["max"] == 9.0


def test_the_committed_targets_and_baseline_name_measures_the_benchmarks_write() -> None:
    """Every target of targets.toml names a measure of a known benchmark, with one
    limit; issue 26's table is all there but its quoted Rust row (and the fixed cost
    fitted over the small-run paths beside the table's fit); the committed
    baseline's ratios all come from the ratio benchmarks and are well-formed ranges."""
    targets = check.load_targets()
    assert {t.measure.split(".")[0] for t in targets} <= set(check.ALL_BENCHMARKS)
    issue_26 = [t for t in targets if t.issue == 26]
    assert len(issue_26) == 15
    assert not any("rust" in t.measure.lower() for t in targets)
    baseline = check.load_baseline(check.BASELINE_PATH)
    assert baseline["ratios"]
    assert {key.split(".")[0] for key in baseline["ratios"]} <= set(check.RATIO_BENCHMARKS)
    assert "check.py --write-baseline" in baseline["note"]


def test_a_malformed_target_or_measure_is_refused_naming_the_field(tmp_path: Path) -> None:
    """A target with both limits, or a measure whose median lies outside its min-max,
    is a DecodeError naming where; the command says so in one line and exits 2."""
    bad = tmp_path / "targets.toml"
    bad.write_text('[[target]]\nissue = 26\nwhat = "w"\nmeasure = "pipeline.x"\n'
                   "at_most = 1.0\nat_least = 2.0\n", encoding="utf-8")
    with pytest.raises(DecodeError, match=r"target\[0\]\.at_most/at_least"):
        check.load_targets(bad)
    with pytest.raises(DecodeError, match=r"otel\.json: ratios\.r"):
        check.read_measures({"otel": {"ratios": {"r": _range(3.0, 1.0, 2.0)},
                                      "figures": {}}})
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "otel.json").write_text(json.dumps({"ratios": {"r": "fast"}, "figures": {}}),
                                      encoding="utf-8")
    assert check.main(["--from", str(folder)]) == 2


def test_check_from_json_names_the_worse_ratio_and_exits_1(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    """Read from --from JSON against a given baseline, a ratio 3x its baseline range is
    named on the 'worse' line and in the verdict JSON, and the status is 1; within
    range it is 0."""
    folder = tmp_path / "runs"
    folder.mkdir()
    base = tmp_path / "baseline.json"
    base.write_text(json.dumps({"provisional": True, "note": "n", "quick": True,
                                "mode": "loop",
                                "ratios": {"logs.audit/untraced@1000": _range(1.4, 1.3, 1.5)}}),
                    encoding="utf-8")
    for median, expected in ((4.5, 1), (1.45, 0)):
        (folder / "logs.json").write_text(json.dumps({
            "quick": True, "figures": {},
            "ratios": {"logs.audit/untraced@1000".removeprefix("logs."):
                       _range(median, median - 0.05, median + 0.05)}}), encoding="utf-8")
        verdict = tmp_path / "verdict.json"
        status = check.main(["--from", str(folder), "--baseline", str(base),
                             "--json", str(verdict)])
        assert status == expected
        out = capsys.readouterr().out
        written = json.loads(verdict.read_text(encoding="utf-8"))
        worse = ["logs.audit/untraced@1000"] if expected else []
        assert written["worse"] == worse
        assert ("worse by more than 25%: logs.audit/untraced@1000" in out) == bool(expected)
        target = next(t for t in written["targets"]
                      if t["measure"] == "logs.audit/untraced@1000")
        assert target["status"] == ("missed" if expected else "met")


def test_ratios_are_taken_round_by_round_against_the_same_round() -> None:
    """round_ratios divides each round by the same round's baseline before the median:
    a baseline that drifts with the machine cancels out."""
    timings = {"base": _harness.Timing(name="base", calls=1, cpu=[1.0, 2.0, 4.0]),
               "traced": _harness.Timing(name="traced", calls=1, cpu=[1.5, 3.0, 6.0])}
    spread = _harness.round_ratios(timings, "traced", "base")
    assert (spread.median, spread.low, spread.high, spread.rounds) == (1.5, 1.5, 1.5, 3)
    rate = _harness.Spread.of([0.5, 1.0, 2.0]).inverted(100.0)
    assert (rate.median, rate.low, rate.high) == (100.0, 50.0, 200.0)


def test_loop_mode_never_forces_a_collection_and_harness_mode_always_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """interleave in loop mode calls every variant (a warm-up, a lead-in per round,
    then its calls) without gc.collect(); harness mode collects before every timed
    call; the starting variant rotates from round to round."""
    collections: list[int] = []
    real = gc.collect

    def counted(*args: int) -> int:
        collections.append(1)
        return real(*args)

    monkeypatch.setattr(gc, "collect", counted)
    order: list[str] = []
    variants = {name: (lambda name=name: order.append(name)) for name in ("a", "b", "c")}
    timings = _harness.interleave(variants, rounds=3, calls=2)
    assert collections == []
    assert [len(t.cpu) for t in timings.values()] == [3, 3, 3]
    assert order[:3] == ["a", "b", "c"]  # the warm-up
    rounds = order[3:]
    assert [rounds[k * 3] for k in range(3)] == ["a", "b", "c"]  # each round's first
    assert len(rounds) == 3 * 3 * (1 + 2)
    order.clear()
    _harness.interleave(variants, rounds=1, calls=2, mode=_harness.Mode.HARNESS)
    assert len(collections) == 3 * 2
    assert len(order) == 3 + 3 * 2  # a warm-up, no lead-in


def test_touch_report_reads_every_entry_of_a_report_rebuilt_from_a_log(tmp_path: Path) -> None:
    """The rebuild benchmarks' touch_report reads each entry a log reader built lazily
    (its item, score and reason): one per candidate of a 40-candidate run."""
    from cupellation.logs import read_runs  # noqa: PLC0415

    path = tmp_path / "audit.jsonl"
    _harness.write_audit_log(path, 1, 7, candidates=40)
    (run,) = list(read_runs(path))
    assert _harness.touch_report(run.report) == 40
