"""Benchmark the whole pipeline in the configuration the .NET implementation benchmarks.

    python benchmarks/bench_pipeline.py [--sizes ...] [--repeats 7] [--quick] [--json PATH]

``CompositeScorer([(RecencyScorer(), 2.0), (PriorityScorer(), 1.0)])``,
``GreedySlice()``, ``UShapedPlacer()``, exactly one pinned item, a target of
40% of the candidates' tokens (``max_tokens`` twice that). Each size is run
(a) with ``collector=None``, (b) with ``NULL_COLLECTOR``, (c) with a
``DiagnosticTraceCollector(FULL)`` followed by ``build_report()``, and (d) the
same plus ``report.to_json()``. The null
collector's overhead over no collector is measured separately by interleaving
(a) and (b) many times, since at small N run-to-run noise exceeds the 3%
being looked for; its target is judged on the median of the per-pair ratios.
The three modes are themselves timed round-robin, so that drift in the
machine's speed does not bias their ratios. Memory: the tracemalloc peak of
one extra (a) run against the traced size of the candidate list itself.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # imported by path (the smoke test) rather than run
    sys.path.insert(0, str(_HERE))

from _harness import (  # noqa: E402
    MIB,
    TARGET_FRACTION,
    Measurement,
    Target,
    budget_for,
    environment,
    format_columns,
    format_table,
    format_targets,
    make_items,
    measure_interleaved,
    parse_args,
    parse_sizes,
    reference_pipeline,
    write_json,
)
from cupellation import (  # noqa: E402
    NULL_COLLECTOR,
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    Pipeline,
    SelectionReport,
    TraceDetailLevel,
)

__all__ = ["MODE_NAMES", "RUST_REFERENCE_MS", "main"]

DEFAULT_SIZES = (100, 500, 1_000, 2_000, 10_000, 20_000, 100_000)
SEED = 20_251_123

MODE_NONE = "run(collector=None)"
MODE_NULL = "run(NULL_COLLECTOR)"
MODE_ITEM = "run(FULL)+build_report()"
MODE_JSON = "run(FULL)+report.to_json()"
MODE_NAMES: tuple[str, ...] = (MODE_NONE, MODE_NULL, MODE_ITEM, MODE_JSON)

#: QUOTED, not measured by this script: the Rust reference implementation's medians
#: in this configuration, measured once on these machines with its own harness (ms).
RUST_REFERENCE_MS: dict[int, float] = {500: 1.4, 1_000: 4.8, 10_000: 413.0, 100_000: 132_000.0}

DOUBLINGS = ((1_000, 2_000), (10_000, 20_000))


def _traced_build(n: int) -> tuple[list[ContextItem], int, int]:
    """The candidates of size ``n`` and the traced (current, peak) bytes of building them."""
    gc.collect()
    tracemalloc.start()
    try:
        items = make_items(n, SEED + n, pinned_index=n // 2)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return items, current, peak


def _run_with_report(pipeline: Pipeline, items: list[ContextItem],
                     budget: ContextBudget) -> SelectionReport:
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    pipeline.run(items, budget, collector)
    return collector.build_report()


def _run_with_json(pipeline: Pipeline, items: list[ContextItem],
                   budget: ContextBudget) -> str:
    return _run_with_report(pipeline, items, budget).to_json()


def _interleaved(fn_a: Callable[[], object], fn_b: Callable[[], object],
                 runs: int) -> tuple[list[float], list[float]]:
    """``runs`` timed calls of each, alternating which goes first, a collection before each."""
    times_a: list[float] = []
    times_b: list[float] = []
    fn_a()
    fn_b()
    for k in range(runs):
        pair = ((fn_a, times_a), (fn_b, times_b))
        for fn, times in (pair if k % 2 == 0 else pair[::-1]):
            gc.collect()
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1000.0)
    return times_a, times_b


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--overhead-sizes", type=parse_sizes, default=None,
                        help="sizes of the interleaved None/NULL_COLLECTOR comparison "
                        "(default 500,10000; --quick: 100)")
    parser.add_argument("--overhead-runs", type=int, default=None,
                        help="interleaved runs of each (default 51; --quick: 5)")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the pipeline benchmarks; print the tables and targets; optionally write JSON."""
    args = parse_args(
        "Benchmark the cupellation pipeline (Composite(Recency x2, Priority x1), "
        "GreedySlice, UShapedPlacer).", argv,
        default_sizes=DEFAULT_SIZES, add_options=_add_options,
    )
    overhead_sizes: list[int] = args.extra.overhead_sizes or ([100] if args.quick
                                                              else [500, 10_000])
    overhead_runs: int = args.extra.overhead_runs or (5 if args.quick else 51)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    env = environment()
    pipeline = reference_pipeline()
    rows: list[Measurement] = []
    memory: list[dict[str, Any]] = []
    overhead: list[dict[str, Any]] = []
    for n in sorted(set(args.sizes) | set(overhead_sizes)):
        items, input_bytes, input_peak = _traced_build(n)
        budget = budget_for(items)
        run_none = partial(pipeline.run, items, budget, None)
        run_null = partial(pipeline.run, items, budget, NULL_COLLECTOR)
        if n in args.sizes:
            log(f"N={n}: {args.repeats} interleaved repeats of each mode")
            measured = measure_interleaved(
                MODE_NAMES, "pipeline", n,
                [run_none, run_null, partial(_run_with_report, pipeline, items, budget),
                 partial(_run_with_json, pipeline, items, budget)],
                args.repeats,
            )
            by_mode = dict(zip(MODE_NAMES, measured, strict=True))
            rows.extend(measured)
            for row in measured:
                log(f"  {row.name:<26} median {row.median_ms:10.3f} ms")
            none_median = by_mode[MODE_NONE].median_ms
            for row in by_mode.values():
                row.extra["vs_none"] = row.median_ms / none_median
            run_peak = by_mode[MODE_NONE].peak_bytes or 0
            memory.append({
                "n": n,
                "input_bytes": input_bytes,
                "input_build_peak_bytes": input_peak,
                "run_peak_bytes": run_peak,
                "ratio": run_peak / input_bytes,
                "target_tokens": budget.target_tokens,
            })
        if n in overhead_sizes:
            log(f"N={n}: {overhead_runs} interleaved runs of None / NULL_COLLECTOR")
            times_none, times_null = _interleaved(run_none, run_null, overhead_runs)
            none_median = statistics.median(times_none)
            null_median = statistics.median(times_null)
            overhead.append({
                "n": n,
                "runs": overhead_runs,
                "none_median_ms": none_median,
                "null_median_ms": null_median,
                "ratio": null_median / none_median,
                "paired_ratio_median": statistics.median(
                    b / a for a, b in zip(times_none, times_null, strict=True)),
            })
        del items

    mode_order = {mode: k for k, mode in enumerate(MODE_NAMES)}
    rows.sort(key=lambda row: (row.n, mode_order[row.name]))
    targets = _targets(rows, memory, overhead)
    _print_report(args.repeats, env, rows, memory, overhead, targets)

    if args.json_path is not None:
        write_json(args.json_path, {
            "benchmark": "pipeline",
            "environment": env,
            "configuration": {**pipeline.describe(), "target_fraction": TARGET_FRACTION,
                              "pinned_items": 1},
            "sizes": args.sizes,
            "repeats": args.repeats,
            "load_average_1min_end": os.getloadavg()[0],
            "results": [row.to_dict() for row in rows],
            "memory": memory,
            "null_collector_overhead": overhead,
            "rust_reference_ms_quoted": {str(n): ms for n, ms in RUST_REFERENCE_MS.items()},
            "targets": [target.to_dict() for target in targets],
        })
    return 0


def _row(rows: Sequence[Measurement], mode: str, n: int) -> Measurement | None:
    for row in rows:
        if row.name == mode and row.n == n:
            return row
    return None


def _median(rows: Sequence[Measurement], mode: str, n: int) -> float | None:
    row = _row(rows, mode, n)
    return None if row is None else row.median_ms


def _targets(rows: Sequence[Measurement], memory: Sequence[dict[str, Any]],
             overhead: Sequence[dict[str, Any]]) -> list[Target]:
    targets = [
        Target("100 items, collector=None median", "ms", 0.08, _median(rows, MODE_NONE, 100)),
        Target("500 items, NULL_COLLECTOR median", "ms", 1.0, _median(rows, MODE_NULL, 500)),
        Target("100,000 items, NULL_COLLECTOR median", "ms", 1000.0,
               _median(rows, MODE_NULL, 100_000)),
    ]
    for small, large in DOUBLINGS:
        low, high = _row(rows, MODE_NULL, small), _row(rows, MODE_NULL, large)
        ratio = None if low is None or high is None else high.median_ms / low.median_ms
        # Judged on medians; the ratio of the fastest runs is shown beside it
        # because on a shared two-core machine the medians carry outliers.
        note = ("" if low is None or high is None
                else f"of medians; of mins {high.min_ms / low.min_ms:.2f}")
        targets.append(Target(f"doubling {small:,} -> {large:,} (NULL_COLLECTOR)", "x", 2.3,
                              ratio, note))
    for entry in overhead:
        # The median of the per-pair ratios: each pair ran back to back, so
        # drift in the machine's speed cancels out of it (both ratios are printed).
        targets.append(Target(
            f"NULL_COLLECTOR / None at {entry['n']:,} items", "x", 1.03,
            entry["paired_ratio_median"], f"median of {entry['runs']} paired runs"))
    if not overhead:
        targets.append(Target("NULL_COLLECTOR / None", "x", 1.03, None))
    sizes = sorted({row.n for row in rows})
    for n in sizes:
        none = _median(rows, MODE_NONE, n)
        for mode, label, limit in ((MODE_ITEM, "FULL + build_report", 1.5),
                                   (MODE_JSON, "FULL + report JSON", 2.0)):
            traced = _median(rows, mode, n)
            ratio = None if none is None or traced is None else traced / none
            targets.append(Target(f"{label} / untraced at {n:,} items", "x", limit, ratio))
    at_100k = [entry for entry in memory if entry["n"] == 100_000]
    targets.append(Target("peak memory of run(None) / input at 100,000 items", "x", 3.0,
                          at_100k[0]["ratio"] if at_100k else None))
    return targets


def _print_report(repeats: int, env: dict[str, Any], rows: Sequence[Measurement],
                  memory: Sequence[dict[str, Any]], overhead: Sequence[dict[str, Any]],
                  targets: Sequence[Target]) -> None:
    print(f"cupellation pipeline benchmark — {repeats} timed runs per row (median, min), "
          f"peak = tracemalloc peak of one extra run")
    print(f"Python {env['python']} on {env['platform']}, numpy {env['numpy']}, "
          f"{env['cpu_count']} CPUs, 1-min load average {env['load_average_1min']:.2f} "
          f"at start, {os.getloadavg()[0]:.2f} at end")
    print("Composite(Recency x2, Priority x1) + GreedySlice + UShapedPlacer, one pinned item, "
          f"target = {TARGET_FRACTION:.0%} of candidate tokens, max = 2 x target")
    print()
    print(format_table(rows, extra_columns=[
        ("x untraced", lambda row: f"{row.extra['vs_none']:.3f}"),
    ]))

    print()
    print("memory: input = traced size of the candidate list after building it; "
          "peak = tracemalloc peak of one run(collector=None)")
    print(format_columns(
        ["N", "input MiB", "run peak MiB", "peak / input"],
        [[f"{m['n']}", f"{m['input_bytes'] / MIB:.2f}", f"{m['run_peak_bytes'] / MIB:.2f}",
          f"{m['ratio']:.3f}"] for m in memory]))

    print()
    print("NULL_COLLECTOR vs collector=None, interleaved runs (order alternating); "
          "ratio = NULL median / None median, paired = median of per-pair NULL/None")
    print(format_columns(
        ["N", "runs", "None median ms", "NULL median ms", "ratio", "paired ratio"],
        [[f"{o['n']}", f"{o['runs']}", f"{o['none_median_ms']:.3f}",
          f"{o['null_median_ms']:.3f}", f"{o['ratio']:.4f}", f"{o['paired_ratio_median']:.4f}"]
         for o in overhead]))

    comparison = [(n, _median(rows, MODE_NULL, n), ref) for n, ref in RUST_REFERENCE_MS.items()]
    print()
    print("against the Rust reference implementation: its figures are QUOTED from one earlier "
          "measurement on these machines, not measured by this script")
    print(format_columns(
        ["N", "ours (NULL) ms, measured", "Rust ms, quoted", "Rust / ours"],
        [[f"{n}", f"{ours:.3f}", f"{ref:g}", f"{ref / ours:.1f}x"]
         for n, ours, ref in comparison if ours is not None]))

    print()
    print("targets")
    print(format_targets(targets))


if __name__ == "__main__":
    sys.exit(main())
