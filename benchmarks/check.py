"""The regression check and the target table: run the ratio benchmarks (or read their
``--json`` output), name every ratio that got more than 25% worse than the committed
baseline, and judge every target of ``targets.toml``.

    python benchmarks/check.py [--quick] [--mode loop|harness] [--all]
                               [--from DIR | --keep DIR] [--baseline PATH]
                               [--write-baseline] [--json PATH]

The ratio benchmarks (``bench_pipeline``, ``bench_otel``, ``bench_logs``,
``bench_chat``, ``bench_export``; with ``--all`` also ``bench_components`` and
``bench_analytics``, which only feed targets) run one after another, each in its own
process, with ``--json``; ``--from DIR`` reads ``DIR/<name>.json`` instead (files a
previous ``--keep DIR`` left there).

**The comparison rule.** Every ratio is a median with its min-max over rounds, each
round's ratio taken against the same round's baseline. A ratio is *worse* only when
the fresh run's min exceeds the baseline's max by more than 25%
(``fresh.min > base.max * 1.25``): every round of the fresh run is then more than 25%
slower than the slowest round the baseline saw, which noise within either run cannot
explain. A single figure against a single figure flakes on a shared machine; two
ranges that still overlap are not called a regression. *Better* is the mirror
(``fresh.max < base.min / 1.25``): a hint to regenerate the baseline. Only ratios are
compared: absolute times and rates move with the machine.

Exit status: 0 no ratio worse, 1 at least one ratio worse (named), 2 bad usage or a
malformed ``targets.toml``, baseline or benchmark JSON (one line on stderr), 3 a
benchmark failed or wrote no JSON (its output is shown). Missed targets do not change
the status: the machine that runs the check decides whether they mean anything.

The baseline is regenerated on an idle machine with::

    python benchmarks/check.py --write-baseline
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cupellation.exceptions import DecodeError

__all__ = [
    "ALL_BENCHMARKS",
    "RATIO_BENCHMARKS",
    "WORSE_FACTOR",
    "Comparison",
    "TargetSpec",
    "Verdict",
    "compare",
    "judge",
    "load_baseline",
    "load_targets",
    "main",
    "read_measures",
]

HERE = Path(__file__).resolve().parent
TARGETS_PATH = HERE / "targets.toml"
BASELINE_PATH = HERE / "baseline.json"
RATIO_BENCHMARKS: tuple[str, ...] = ("pipeline", "otel", "logs", "chat", "export")
ALL_BENCHMARKS: tuple[str, ...] = (*RATIO_BENCHMARKS, "components", "analytics")
#: How much worse than the baseline's range a fresh range must be to be named.
WORSE_FACTOR = 1.25
#: The command that regenerates the baseline (printed, and written into it).
BASELINE_COMMAND = "python benchmarks/check.py --write-baseline"


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetSpec:
    """One target of ``targets.toml``: a measure and its limit."""

    issue: int
    what: str
    measure: str
    limit: float
    at_least: bool

    def met_by(self, value: float) -> bool:
        """Whether ``value`` is within the limit."""
        return value >= self.limit if self.at_least else value <= self.limit


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """A target judged: ``met``, ``missed`` or ``not measured``."""

    target: TargetSpec
    status: str
    measured: Mapping[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        """The verdict as JSON-native values."""
        spec = self.target
        return {"issue": spec.issue, "what": spec.what, "measure": spec.measure,
                "limit": spec.limit, "direction": "at_least" if spec.at_least else "at_most",
                "status": self.status,
                "measured": None if self.measured is None else dict(self.measured)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """One ratio, fresh against baseline: ``worse``, ``same``, ``better``,
    ``not measured`` (in the baseline only) or ``new`` (in the fresh run only)."""

    measure: str
    status: str
    fresh: Mapping[str, Any] | None
    baseline: Mapping[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        """The comparison as JSON-native values."""
        return {"measure": self.measure, "status": self.status,
                "fresh": None if self.fresh is None else dict(self.fresh),
                "baseline": None if self.baseline is None else dict(self.baseline)}


# -- reading ------------------------------------------------------------------------


def _number(where: str, field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DecodeError(f"{where}.{field}", value, "not a number")
    return float(value)


def load_targets(path: Path = TARGETS_PATH) -> list[TargetSpec]:
    """The targets of ``path`` (``targets.toml``), checked field by field."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise DecodeError(str(path), None, f"not TOML: {error}") from None
    entries = data.get("target")
    if not isinstance(entries, list) or not entries:
        raise DecodeError(f"{path}: target", entries, "no [[target]] tables")
    targets = []
    for k, entry in enumerate(entries):
        where = f"{path.name}: target[{k}]"
        if ("at_most" in entry) == ("at_least" in entry):
            raise DecodeError(f"{where}.at_most/at_least", entry,
                              "needs exactly one of at_most and at_least")
        for field in ("what", "measure"):
            if not isinstance(entry.get(field), str) or not entry[field]:
                raise DecodeError(f"{where}.{field}", entry.get(field), "not a text")
        at_least = "at_least" in entry
        targets.append(TargetSpec(
            issue=int(_number(where, "issue", entry.get("issue"))), what=entry["what"],
            measure=entry["measure"], at_least=at_least,
            limit=_number(where, "at_least" if at_least else "at_most",
                          entry["at_least" if at_least else "at_most"])))
    return targets


def _spread(where: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DecodeError(where, value, "not a measure (median, min, max)")
    out = dict(value)
    for field in ("median", "min", "max"):
        out[field] = _number(where, field, value.get(field))
    if not out["min"] <= out["median"] <= out["max"]:
        raise DecodeError(where, value, "min <= median <= max does not hold")
    return out


def read_measures(payloads: Mapping[str, Mapping[str, Any]]
                  ) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """``(ratios, figures)`` of the benchmarks' JSON, keyed ``<benchmark>.<measure>``."""
    ratios: dict[str, dict[str, Any]] = {}
    figures: dict[str, dict[str, Any]] = {}
    for name, data in payloads.items():
        for section, into in (("ratios", ratios), ("figures", figures)):
            entries = data.get(section)
            if not isinstance(entries, dict):
                raise DecodeError(f"{name}.json: {section}", entries, "not an object")
            for key, value in entries.items():
                into[f"{name}.{key}"] = _spread(f"{name}.json: {section}.{key}", value)
    return ratios, figures


def load_baseline(path: Path) -> dict[str, Any]:
    """The committed baseline: its ratios checked, the rest as written."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise DecodeError(str(path), None, f"not a readable JSON file: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("ratios"), dict):
        raise DecodeError(f"{path.name}: ratios", None, "missing")
    data["ratios"] = {key: _spread(f"{path.name}: ratios.{key}", value)
                      for key, value in data["ratios"].items()}
    return data


# -- judging ------------------------------------------------------------------------


def judge(targets: Iterable[TargetSpec], measures: Mapping[str, Mapping[str, Any]]
          ) -> list[Verdict]:
    """Every target against its measure's median: met, missed or not measured."""
    verdicts = []
    for target in targets:
        measured = measures.get(target.measure)
        if measured is None:
            status = "not measured"
        else:
            status = "met" if target.met_by(float(measured["median"])) else "missed"
        verdicts.append(Verdict(target=target, status=status, measured=measured))
    return verdicts


def compare(fresh: Mapping[str, Mapping[str, Any]], baseline: Mapping[str, Mapping[str, Any]],
            factor: float = WORSE_FACTOR) -> list[Comparison]:
    """Every ratio of either side, fresh range against baseline range (see the module
    docstring for the rule)."""
    out = []
    for key in sorted(set(fresh) | set(baseline)):
        now, then = fresh.get(key), baseline.get(key)
        if now is None:
            status = "not measured"
        elif then is None:
            status = "new"
        elif float(now["min"]) > float(then["max"]) * factor:
            status = "worse"
        elif float(now["max"]) < float(then["min"]) / factor:
            status = "better"
        else:
            status = "same"
        out.append(Comparison(measure=key, status=status, fresh=now, baseline=then))
    return out


# -- running ------------------------------------------------------------------------


class BenchmarkFailed(Exception):
    """A benchmark script exited non-zero or wrote no JSON (the check exits 3)."""


def run_benchmarks(names: Sequence[str], folder: Path, *, quick: bool, mode: str
                   ) -> dict[str, dict[str, Any]]:
    """Run each ``bench_<name>.py`` with ``--json folder/<name>.json``; their payloads."""
    payloads: dict[str, dict[str, Any]] = {}
    for name in names:
        path = folder / f"{name}.json"
        command = [sys.executable, str(HERE / f"bench_{name}.py"), "--json", str(path),
                   "--mode", mode, *(["--quick"] if quick else [])]
        print(f"check: running {' '.join(command[1:])}", file=sys.stderr, flush=True)
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0 or not path.exists():
            raise BenchmarkFailed(f"bench_{name}.py exited {result.returncode}:\n"
                                  f"{result.stdout[-2000:]}{result.stderr[-4000:]}")
        payloads[name] = read_payload(path)
    return payloads


def read_payload(path: Path) -> dict[str, Any]:
    """One benchmark's JSON output."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise DecodeError(str(path), None, f"not a readable JSON file: {error}") from None
    if not isinstance(data, dict):
        raise DecodeError(str(path), data, "not a JSON object")
    return data


# -- output -------------------------------------------------------------------------


def _range(measured: Mapping[str, Any] | None) -> str:
    if measured is None:
        return "-"
    unit = measured.get("unit", "")
    return (f"{measured['median']:.4g} ({measured['min']:.4g}-{measured['max']:.4g})"
            f"{' ' + unit if unit and unit != 'x' else 'x' if unit == 'x' else ''}")


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max([len(h), *(len(r[c]) for r in rows)]) for c, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
              for row in rows]
    return "\n".join(lines)


def format_verdicts(verdicts: Sequence[Verdict]) -> str:
    """The target table: issue, what, limit, median (min-max), status."""
    rows = [[str(v.target.issue), v.target.what,
             f"{'>=' if v.target.at_least else '<='} {v.target.limit:g}",
             _range(v.measured), v.status.upper() if v.status == "missed" else v.status]
            for v in verdicts]
    return _table(["issue", "target", "limit", "median (min-max)", "status"], rows)


def format_comparisons(comparisons: Sequence[Comparison]) -> str:
    """The regression table: measure, baseline range, fresh range, status."""
    rows = [[c.measure, _range(c.baseline), _range(c.fresh),
             c.status.upper() if c.status == "worse" else c.status] for c in comparisons]
    return _table(["ratio", "baseline median (min-max)", "fresh median (min-max)",
                   "status"], rows)


# -- the command --------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true",
                        help="run the benchmarks in their --quick mode (a smoke run)")
    parser.add_argument("--mode", choices=("loop", "harness"), default="loop")
    parser.add_argument("--all", action="store_true",
                        help="also run bench_components and bench_analytics (targets only)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--from", dest="source", type=Path, default=None, metavar="DIR",
                        help="read DIR/<name>.json instead of running the benchmarks")
    source.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="write the benchmarks' JSON into DIR (kept)")
    parser.add_argument("--baseline", type=Path, default=BASELINE_PATH)
    parser.add_argument("--targets", type=Path, default=TARGETS_PATH)
    parser.add_argument("--write-baseline", action="store_true",
                        help="write the fresh ratios as the new baseline")
    parser.add_argument("--json", dest="json_path", type=Path, default=None, metavar="PATH",
                        help="also write the verdict as JSON to PATH")
    return parser


def _gather(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    names = ALL_BENCHMARKS if args.all else RATIO_BENCHMARKS
    if args.source is not None:
        return {name: read_payload(args.source / f"{name}.json") for name in names
                if (args.source / f"{name}.json").exists()}
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        return run_benchmarks(names, args.keep, quick=args.quick, mode=args.mode)
    with tempfile.TemporaryDirectory(prefix="cupellation-check-") as folder:
        return run_benchmarks(names, Path(folder), quick=args.quick, mode=args.mode)


#: Past this 1-minute load average at a benchmark's start (2 cores), the machine was
#: busy: a baseline written then is marked provisional.
BUSY_LOAD = 2.0


def _write_baseline(path: Path, ratios: Mapping[str, Any],
                    payloads: Mapping[str, Mapping[str, Any]]) -> None:
    loads = [float(p.get("environment", {}).get("load_average_1min", 0.0))
             for p in payloads.values()]
    busy = max(loads, default=0.0) > BUSY_LOAD
    # What the benchmarks say they did (with --from, the options here did not run them).
    quick = any(bool(p.get("quick")) for p in payloads.values())
    mode = "loop" if all(p.get("mode") == "loop" for p in payloads.values()) else "harness"
    provisional = quick or mode != "loop" or busy
    why = [reason for reason, present in (("--quick", quick),
                                          (f"mode {mode}", mode != "loop"),
                                          (f"load average up to {max(loads, default=0):.1f}",
                                           busy)) if present]
    env = next(iter(payloads.values())).get("environment", {})
    path.write_text(json.dumps({
        "provisional": provisional,
        "note": (f"PROVISIONAL ({', '.join(why)}): regenerate on an idle 2-core machine "
                 f"with: {BASELINE_COMMAND}") if provisional else
                (f"regenerate with: {BASELINE_COMMAND} (on an idle 2-core machine)"),
        "command": BASELINE_COMMAND + (" --quick" if quick else "")
                   + ("" if mode == "loop" else f" --mode {mode}"),
        "quick": quick, "mode": mode, "environment": env,
        "load_average_1min_start_max": max(loads, default=None),
        "load_average_1min_end": os.getloadavg()[0],
        "ratios": {key: {k: value[k] for k in ("median", "min", "max", "rounds", "unit")
                         if k in value} for key, value in sorted(ratios.items())},
    }, indent=2) + "\n", encoding="utf-8")


def _check(args: argparse.Namespace) -> int:
    targets = load_targets(args.targets)
    payloads = _gather(args)
    ratios, figures = read_measures(payloads)
    verdicts = judge(targets, {**figures, **ratios})
    if args.write_baseline:
        _write_baseline(args.baseline, ratios, payloads)
        print(f"check: baseline written to {args.baseline}", file=sys.stderr)
    baseline = load_baseline(args.baseline)
    comparisons = compare(ratios, baseline["ratios"])
    worse = [c.measure for c in comparisons if c.status == "worse"]
    quick = {bool(p.get("quick")) for p in payloads.values()}
    print("targets (judged on the median; meaningful only from an idle machine, loop mode, "
          "not --quick)")
    print(format_verdicts(verdicts))
    print()
    provisional = "PROVISIONAL, " if baseline.get("provisional") else ""
    print(f"ratios against {args.baseline.name} ({provisional}"
          f"{'quick' if baseline.get('quick') else 'full'} run, mode {baseline.get('mode')}); "
          f"worse = fresh min > baseline max x {WORSE_FACTOR}")
    if quick != {bool(baseline.get("quick"))}:
        print("note: the fresh run and the baseline differ in --quick: sizes and rounds differ")
    print(format_comparisons(comparisons))
    print()
    print("worse by more than 25%: " + (", ".join(worse) if worse else "none"))
    if args.json_path is not None:
        args.json_path.parent.mkdir(parents=True, exist_ok=True)
        args.json_path.write_text(json.dumps({
            "benchmarks": sorted(payloads), "quick": sorted(quick), "mode": args.mode,
            "targets": [v.to_dict() for v in verdicts],
            "comparisons": [c.to_dict() for c in comparisons],
            "worse": worse, "baseline_provisional": bool(baseline.get("provisional")),
        }, indent=2) + "\n", encoding="utf-8")
    return 1 if worse else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check; 0 when no ratio got worse, 1 when some did (see the module doc)."""
    args = _parser().parse_args(None if argv is None else list(argv))
    try:
        return _check(args)
    except DecodeError as error:
        print(f"check: {error}", file=sys.stderr)
        return 2
    except BenchmarkFailed as error:
        print(f"check: {error}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
