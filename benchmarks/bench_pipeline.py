"""Benchmark the whole pipeline in the configuration the .NET implementation benchmarks.

    python benchmarks/bench_pipeline.py [--sizes ...] [--repeats 7] [--quick]
                                        [--mode loop|harness] [--json PATH]
                                        [--one-process-items 1000000]

``CompositeScorer([(RecencyScorer(), 2.0), (PriorityScorer(), 1.0)])``,
``GreedySlice()``, ``UShapedPlacer()``, exactly one pinned item, a target of 40% of
the candidates' tokens (``max_tokens`` twice that). At each size four variants take
turns in every round (``_harness.interleave``: thread CPU time per call, loop mode,
back-to-back calls after a warm-up): ``collector=None`` (untraced, the baseline),
``NULL_COLLECTOR``, ``DiagnosticTraceCollector(FULL)`` followed by ``build_report()``,
and the same plus ``report.to_json()``. Each ratio is taken per round against the
same round's untraced run; the median and min-max over rounds are reported.

Also:

- **fixed cost per call**: untraced runs at 5, 10, 20, 50, 100 and 200 items taking
  turns (no pinned item); each round's CPU times are fitted by least squares
  (time = fixed + per item x N), and the fit's intercept is the fixed cost; the same
  fit over the sizes that take only the small-run paths (5-100 items) beside it, since
  the line over 5-200 bends at 128 items, where numpy's paths take over, and its
  intercept then reads below what a small run costs;
- **one process**: ``--one-process-items`` items (1,000,000; ``--quick``: 20,000) in
  each of three fresh processes (``--quick``: one): the CPU time of one untraced
  ``run()`` (after a 1,000-item warm-up) and the process's peak RSS (``ru_maxrss``),
  items included, as the median and min-max over the processes;
- **memory**: the tracemalloc peak of one untraced run against the traced size of
  the candidate list itself;
- **the Rust crate**: its figures are QUOTED, never measured here (source and date
  beside them).
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # imported by path (the smoke test) rather than run
    sys.path.insert(0, str(_HERE))

from _harness import (  # noqa: E402
    MIB,
    TARGET_FRACTION,
    Mode,
    Spread,
    Timing,
    budget_for,
    environment,
    format_columns,
    format_timings,
    header,
    interleave,
    make_items,
    measure,
    parse_args,
    payload,
    peak_bytes,
    reference_pipeline,
    round_ratios,
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

__all__ = ["FIT_SIZES", "MODE_NAMES", "RUST_QUOTED", "SMALL_FIT_SIZES", "FixedCost", "main"]

DEFAULT_SIZES = (100, 500, 1_000, 2_000, 10_000, 20_000, 100_000)
SEED = 20_251_123
FIT_SIZES = (5, 10, 20, 50, 100, 200)
ONE_PROCESS_ITEMS = 1_000_000
ONE_PROCESS_QUICK = 20_000
#: Fresh processes of the one-process run (--quick: one).
ONE_PROCESS_RUNS = 3

MODE_NONE = "untraced"
MODE_NULL = "null"
MODE_ITEM = "full_report"
MODE_JSON = "full_json"
MODE_NAMES: tuple[str, ...] = (MODE_NONE, MODE_NULL, MODE_ITEM, MODE_JSON)
LABELS = {MODE_NONE: "run(collector=None)", MODE_NULL: "run(NULL_COLLECTOR)",
          MODE_ITEM: "run(FULL)+build_report()", MODE_JSON: "run(FULL)+report.to_json()"}

#: QUOTED, not measured by this script: the Rust crate in this configuration.
RUST_QUOTED: dict[str, Any] = {
    "wall_ms_by_items": {"500": 1.4, "1000": 4.8, "10000": 413.0, "100000": 132_000.0},
    "wall_ms_source": ("the Rust crate's own harness (wall clock, medians), run once on "
                       "the project's 2-core machines; CHANGELOG 0.1.0, 2026-11-22"),
    "ours_over_rust_by_items": {"100": 0.78, "1000": 0.29, "10000": 0.058, "100000": 0.006},
    "ours_over_rust_source": ("issue 26, filed 2026-11-27: untraced run() in a loop, "
                              "per-call thread CPU time, interleaved, measured outside "
                              "this repository"),
}


def _traced_build(n: int) -> tuple[list[ContextItem], int]:
    """The candidates of size ``n`` and the traced bytes they hold once built."""
    gc.collect()
    tracemalloc.start()
    try:
        items = make_items(n, SEED + n, pinned_index=n // 2)
        current, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return items, current


def _run_with_report(pipeline: Pipeline, items: list[ContextItem],
                     budget: ContextBudget) -> SelectionReport:
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    pipeline.run(items, budget, collector)
    return collector.build_report()


def _run_with_json(pipeline: Pipeline, items: list[ContextItem],
                   budget: ContextBudget) -> str:
    return _run_with_report(pipeline, items, budget).to_json()


def _variants(pipeline: Pipeline, items: list[ContextItem]) -> dict[str, Callable[[], object]]:
    budget = budget_for(items)
    return {MODE_NONE: partial(pipeline.run, items, budget, None),
            MODE_NULL: partial(pipeline.run, items, budget, NULL_COLLECTOR),
            MODE_ITEM: partial(_run_with_report, pipeline, items, budget),
            MODE_JSON: partial(_run_with_json, pipeline, items, budget)}


def fit(sizes: Sequence[int], seconds: Sequence[float]) -> tuple[float, float]:
    """Least squares ``seconds = fixed + per_item * size``: ``(fixed, per_item)``."""
    mean_n, mean_t = statistics.fmean(sizes), statistics.fmean(seconds)
    slope = (sum((n - mean_n) * (t - mean_t) for n, t in zip(sizes, seconds, strict=True))
             / sum((n - mean_n) ** 2 for n in sizes))
    return mean_t - slope * mean_n, slope


#: The fit sizes that take only the small-run paths (plain Python up to 128 items:
#: ``SMALL_COMPOSITE``, ``SMALL_RANK``, ``SMALL_SORT``, ``SMALL_GREEDY``).
SMALL_FIT_SIZES = tuple(n for n in FIT_SIZES if n <= 128)


class FixedCost(NamedTuple):
    """The fits of one ``fixed_cost`` measurement (µs, per round)."""

    fixed: Spread
    per_item: Spread
    #: The same fit over SMALL_FIT_SIZES only. Why beside the other: a 200-item run
    #: takes numpy's paths, whose fixed cost per call is the larger, so the line over
    #: 5-200 items bends there and its intercept reads below what a small run costs
    #: (measured the same hour: 13.7 against 20.0 µs).
    small_fixed: Spread
    small_per_item: Spread


def fixed_cost(pipeline: Pipeline, rounds: int, mode: Mode) -> FixedCost:
    """The fixed cost and the cost per item (µs) of untraced runs, fitted per round,
    over FIT_SIZES and over SMALL_FIT_SIZES."""
    variants: dict[str, Callable[[], object]] = {}
    for n in FIT_SIZES:
        items = make_items(n, SEED + n)  # no pinned item: at 5 items it can outgrow the target
        variants[str(n)] = partial(pipeline.run, items, budget_for(items), None)
    timings = interleave(variants, rounds=rounds, mode=mode)

    def fits(sizes: Sequence[int]) -> tuple[Spread, Spread]:
        each = [fit(sizes, [timings[str(n)].cpu[r] for n in sizes]) for r in range(rounds)]
        return (Spread.of([f[0] * 1e6 for f in each]), Spread.of([f[1] * 1e6 for f in each]))

    return FixedCost(*fits(FIT_SIZES), *fits(SMALL_FIT_SIZES))


def one_process(n: int) -> dict[str, Any]:
    """Run ``--one-process-child n`` in a fresh process: its CPU time and peak RSS."""
    result = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--one-process-child", str(n)],
        capture_output=True, text=True, check=True)
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def _one_process_child(n: int) -> int:
    """Build ``n`` items, warm the pipeline on 1,000, time one untraced run at ``n``;
    print the figures as JSON (the parent reads them)."""
    pipeline = reference_pipeline()
    items = make_items(n, SEED + n, pinned_index=n // 2)
    items_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    warm = make_items(1_000, SEED)
    pipeline.run(warm, budget_for(warm), None)
    budget = budget_for(items)
    c0, w0 = time.thread_time(), time.perf_counter()
    pipeline.run(items, budget, None)
    cpu, wall = time.thread_time() - c0, time.perf_counter() - w0
    print(json.dumps({"n": n, "cpu_s": cpu, "wall_s": wall,
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
                      "peak_rss_after_items_mib": items_rss}))
    return 0


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--one-process-items", type=int, default=None,
                        help=f"items of the one-process run (default {ONE_PROCESS_ITEMS:,}; "
                        f"--quick: {ONE_PROCESS_QUICK:,}; 0: skip it)")
    parser.add_argument("--one-process-child", type=int, default=None,
                        help=argparse.SUPPRESS)


def _measure_sizes(pipeline: Pipeline, sizes: Sequence[int], rounds: int, mode: Mode,
                   ratios: dict[str, Any], figures: dict[str, Any]
                   ) -> tuple[dict[int, dict[str, Timing]], list[dict[str, Any]]]:
    by_size: dict[int, dict[str, Timing]] = {}
    memory: list[dict[str, Any]] = []
    for n in sizes:
        print(f"N={n}: {rounds} rounds of the four variants", file=sys.stderr, flush=True)
        items, input_bytes = _traced_build(n)
        variants = _variants(pipeline, items)
        timings = by_size[n] = interleave(variants, rounds=rounds, mode=mode)
        for name in MODE_NAMES[1:]:
            ratios[f"{name}/untraced@{n}"] = measure(
                round_ratios(timings, name, MODE_NONE), "x")
        for name in MODE_NAMES:
            figures[f"{name}_cpu_ms@{n}"] = measure(timings[name].cpu_ms, "ms")
        run_peak = peak_bytes(variants[MODE_NONE])
        memory.append({"n": n, "input_bytes": input_bytes, "run_peak_bytes": run_peak,
                       "ratio": run_peak / input_bytes})
        figures[f"run_peak/input@{n}"] = measure(Spread.of([run_peak / input_bytes]), "x")
        del items, variants
    return by_size, memory


def main(argv: Sequence[str] | None = None) -> int:
    """Run the pipeline benchmarks; print the tables; optionally write JSON."""
    args = parse_args(
        "Benchmark the cupellation pipeline (Composite(Recency x2, Priority x1), "
        "GreedySlice, UShapedPlacer).", argv,
        default_sizes=DEFAULT_SIZES, add_options=_add_options)
    if args.extra.one_process_child is not None:
        return _one_process_child(args.extra.one_process_child)
    env = environment()
    pipeline = reference_pipeline()
    ratios: dict[str, Any] = {}
    figures: dict[str, Any] = {}
    by_size, memory = _measure_sizes(pipeline, args.sizes, args.repeats, args.mode,
                                     ratios, figures)
    fixed = fixed_cost(pipeline, max(args.repeats, 5), args.mode)
    figures["fixed_cost_us"] = measure(fixed.fixed, "us")
    figures["per_item_us"] = measure(fixed.per_item, "us")
    figures["fixed_cost_small_paths_us"] = measure(fixed.small_fixed, "us")
    figures["per_item_small_paths_us"] = measure(fixed.small_per_item, "us")
    n_one = args.extra.one_process_items
    n_one = (ONE_PROCESS_QUICK if args.quick else ONE_PROCESS_ITEMS) if n_one is None else n_one
    # Fresh processes, one after another: one run each (a second run in the same
    # process would measure a different heap), the median and min-max over them.
    singles = [one_process(n_one) for _ in range(1 if args.quick else ONE_PROCESS_RUNS)
               ] if n_one > 0 else []
    single: dict[str, Any] | None = None
    if singles:
        cpu = Spread.of([one["cpu_s"] for one in singles])
        rss = Spread.of([one["peak_rss_mib"] for one in singles])
        figures[f"one_process_cpu_s@{n_one}"] = measure(cpu, "s")
        figures[f"one_process_peak_rss_mib@{n_one}"] = measure(rss, "MiB")
        single = {"n": n_one, "processes": singles, "cpu": cpu.text(3, " s"),
                  "wall": Spread.of([one["wall_s"] for one in singles]).text(3, " s"),
                  "rss": rss.text(0, " MiB"),
                  "items_rss": Spread.of([one["peak_rss_after_items_mib"]
                                          for one in singles]).text(0, " MiB")}
    _print_report(args.repeats, args.mode, env, by_size, memory, fixed, single)
    if args.json_path is not None:
        write_json(args.json_path, payload(
            "pipeline", mode=args.mode, quick=args.quick, env=env, ratios=ratios,
            figures=figures,
            configuration={**pipeline.describe(), "target_fraction": TARGET_FRACTION,
                           "pinned_items": 1},
            sizes=args.sizes, rounds=args.repeats,
            timings={str(n): [t.to_dict() for t in timings.values()]
                     for n, timings in by_size.items()},
            memory=memory, fit_sizes=list(FIT_SIZES), small_fit_sizes=list(SMALL_FIT_SIZES),
            one_process=single,
            rust_quoted_not_measured=RUST_QUOTED))
    return 0


def _print_report(rounds: int, mode: Mode, env: dict[str, Any],
                  by_size: dict[int, dict[str, Timing]], memory: Sequence[dict[str, Any]],
                  fixed: FixedCost, single: dict[str, Any] | None) -> None:
    print(header(f"cupellation pipeline benchmark: {rounds} rounds per size", mode, env))
    print("Composite(Recency x2, Priority x1) + GreedySlice + UShapedPlacer, one pinned item, "
          f"target = {TARGET_FRACTION:.0%} of candidate tokens, max = 2 x target")
    for n, timings in by_size.items():
        print(f"\n{n} items")
        print(format_timings(timings, MODE_NONE, label=lambda name: LABELS.get(name, name)))
    print(f"\nfixed cost per untraced run (fit over {', '.join(map(str, FIT_SIZES))} items, "
          f"per round): {fixed.fixed.text(1, ' us')}; per item {fixed.per_item.text(3, ' us')}")
    print(f"  the same over the small-run paths only ({', '.join(map(str, SMALL_FIT_SIZES))} "
          f"items): {fixed.small_fixed.text(1, ' us')}; per item "
          f"{fixed.small_per_item.text(3, ' us')}")
    if single is not None:
        print(f"one process, {single['n']:,} items, {len(single['processes'])} fresh "
              f"process(es): one untraced run {single['cpu']} CPU ({single['wall']} wall); "
              f"peak RSS {single['rss']} ({single['items_rss']} once the items were built)")
    print("\nmemory: input = traced size of the candidate list; peak = tracemalloc peak of "
          "one run(collector=None)")
    print(format_columns(
        ["N", "input MiB", "run peak MiB", "peak / input"],
        [[f"{m['n']}", f"{m['input_bytes'] / MIB:.2f}", f"{m['run_peak_bytes'] / MIB:.2f}",
          f"{m['ratio']:.3f}"] for m in memory]))
    print("\nthe Rust crate: QUOTED, NOT MEASURED by this script")
    print(f"  wall ms by items {RUST_QUOTED['wall_ms_by_items']} "
          f"(source: {RUST_QUOTED['wall_ms_source']})")
    print(f"  ours / Rust by items {RUST_QUOTED['ours_over_rust_by_items']} "
          f"(source: {RUST_QUOTED['ours_over_rust_source']})")
    print("\ntargets: python benchmarks/check.py judges them (benchmarks/targets.toml)")


if __name__ == "__main__":
    sys.exit(main())
