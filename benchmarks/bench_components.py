"""Benchmark every scorer, slicer and placer on its own.

    python benchmarks/bench_components.py [--sizes 100,1000] [--repeats 7] [--quick] [--json PATH]

Scorers are timed calling ``score_all(items)``; slicers on pre-sorted
``ScoredItems`` (score descending, ties in input order, as the pipeline's Sort
stage hands them) with a target of 100,000 tokens at every size; placers
place all N pre-sorted scored items. Inputs are deterministic (seeded) and
built once per size, outside the timed region. At each size every component takes
its turn in each of ``--repeats`` rounds (``_harness.interleave``: thread CPU time per
call, loop mode by default, wall clock beside it); the median and min-max over rounds
are reported. The memory peak comes from one more, separately traced call.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # imported by path (the smoke test) rather than run
    sys.path.insert(0, str(_HERE))

from _harness import (  # noqa: E402
    CLOCK_NOW,
    MIB,
    TAG_VOCABULARY,
    Mode,
    Timing,
    environment,
    format_timings,
    header,
    interleave,
    make_items,
    measure,
    parse_args,
    payload,
    peak_bytes,
    write_json,
)
from cupellation import (  # noqa: E402
    ChronologicalPlacer,
    CompositeScorer,
    ContextBudget,
    ContextItem,
    ContextKind,
    CountConstrainedKnapsackSlice,
    CountQuotaSlice,
    DecayScorer,
    FrequencyScorer,
    GreedySlice,
    KindScorer,
    KnapsackSlice,
    MetadataKeyScorer,
    MetadataTrustScorer,
    PriorityScorer,
    QuotaSlice,
    RecencyScorer,
    ReflexiveScorer,
    ScaledScorer,
    TagScorer,
    UShapedPlacer,
)
from cupellation._model import ScoredItems  # noqa: E402
from cupellation.placing import Placer  # noqa: E402
from cupellation.scoring import ExponentialCurve, Scorer  # noqa: E402
from cupellation.slicing import (  # noqa: E402
    CountQuotaEntry,
    QuotaEntry,
    Slicer,
)
from cupellation.slicing._knapsack import MAX_TABLE_CELLS  # noqa: E402

__all__ = ["PLACER_NAMES", "SCORER_NAMES", "SLICER_NAMES", "main"]

DEFAULT_SIZES = (100, 1_000, 10_000, 100_000)
SEED = 20_251_122
#: Every slicer's target, at every size (the knapsack target of the brief).
SLICE_TARGET_TOKENS = 100_000
KNAPSACK_BUCKET = 100


def _fixed_clock() -> datetime:
    return CLOCK_NOW


def _scorers() -> dict[str, Scorer]:
    return {
        "RecencyScorer": RecencyScorer(),
        "PriorityScorer": PriorityScorer(),
        "KindScorer": KindScorer(),
        "TagScorer": TagScorer({tag: 1.0 + (k % 3) for k, tag in enumerate(TAG_VOCABULARY[:10])}),
        "FrequencyScorer": FrequencyScorer(),
        "ReflexiveScorer": ReflexiveScorer(),
        "CompositeScorer": CompositeScorer([(RecencyScorer(), 2.0), (PriorityScorer(), 1.0)]),
        "ScaledScorer": ScaledScorer(PriorityScorer()),
        "MetadataTrustScorer": MetadataTrustScorer(),
        "MetadataKeyScorer": MetadataKeyScorer("channel", "email", 1.5),
        "DecayScorer": DecayScorer(ExponentialCurve(half_life=timedelta(days=30)),
                                   clock=_fixed_clock),
    }


def _slicers() -> dict[str, Slicer]:
    return {
        "GreedySlice": GreedySlice(),
        "KnapsackSlice": KnapsackSlice(KNAPSACK_BUCKET),
        "QuotaSlice": QuotaSlice(GreedySlice(), [
            QuotaEntry(ContextKind.MESSAGE, require=20.0, cap=60.0),
            QuotaEntry(ContextKind.DOCUMENT, require=10.0, cap=40.0),
        ]),
        "CountQuotaSlice": CountQuotaSlice(GreedySlice(), [
            CountQuotaEntry(ContextKind.TOOL_OUTPUT, 5, cap_count=50),
            CountQuotaEntry(ContextKind.MEMORY, 3, cap_count=30),
        ]),
        "CountConstrainedKnapsackSlice": CountConstrainedKnapsackSlice([
            CountQuotaEntry(ContextKind.TOOL_OUTPUT, 5, cap_count=50),
            CountQuotaEntry(ContextKind.MEMORY, 3, cap_count=30),
        ], bucket_size=KNAPSACK_BUCKET),
    }


def _placers() -> dict[str, Placer]:
    return {"ChronologicalPlacer": ChronologicalPlacer(), "UShapedPlacer": UShapedPlacer()}


SCORER_NAMES: tuple[str, ...] = tuple(_scorers())
SLICER_NAMES: tuple[str, ...] = tuple(_slicers())
PLACER_NAMES: tuple[str, ...] = tuple(_placers())

def _presorted(items: list[ContextItem]) -> ScoredItems:
    """The items scored by the pipeline's usual composite and sorted as Sort does."""
    scores = list(CompositeScorer([(RecencyScorer(), 2.0), (PriorityScorer(), 1.0)])
                  .score_all(items))
    order = sorted(range(len(items)), key=lambda k: (-scores[k], k))
    return ScoredItems([items[k] for k in order], [scores[k] for k in order])


def _run_size(n: int, repeats: int, mode: Mode, log: Callable[[str], None]
              ) -> tuple[dict[str, Timing], dict[str, int]]:
    items = make_items(n, SEED + n)
    scored = _presorted(items)
    budget = ContextBudget(max_tokens=2 * SLICE_TARGET_TOKENS, target_tokens=SLICE_TARGET_TOKENS)
    variants: dict[str, Callable[[], object]] = {
        name: partial(scorer.score_all, items) for name, scorer in _scorers().items()}
    # The specification caps a knapsack's DP table at 50,000,000 cells
    # (TableTooLarge): past that size the knapsack slicers refuse by design.
    cells = n * (SLICE_TARGET_TOKENS // KNAPSACK_BUCKET + 1)
    for name, slicer in _slicers().items():
        if "Knapsack" in name and cells > MAX_TABLE_CELLS:
            log(f"  {name:<32} N={n:<7} skipped: {cells:,} cells > {MAX_TABLE_CELLS:,} "
                "(TableTooLargeError by design)")
            continue
        variants[name] = partial(slicer.slice, scored, budget)
    for name, placer in _placers().items():
        variants[name] = partial(placer.place, scored)
    timings = interleave(variants, rounds=repeats, mode=mode)
    return timings, {name: peak_bytes(fn) for name, fn in variants.items()}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the component benchmarks; print the table; optionally write JSON."""
    args = parse_args(
        "Benchmark every cupellation scorer, slicer and placer.", argv,
        default_sizes=DEFAULT_SIZES,
    )

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    env = environment()
    figures: dict[str, Any] = {}
    results: list[dict[str, Any]] = []
    groups = {**dict.fromkeys(SCORER_NAMES, "scorer"), **dict.fromkeys(SLICER_NAMES, "slicer"),
              **dict.fromkeys(PLACER_NAMES, "placer")}
    print(header(f"cupellation component benchmarks: {args.repeats} rounds per size; "
                 "peak = tracemalloc peak of one extra call", args.mode, env))
    print(f"slicers: pre-sorted ScoredItems, target {SLICE_TARGET_TOKENS:,} tokens; "
          "placers: all N items")
    for n in args.sizes:
        log(f"N={n}: building inputs and measuring ({args.repeats} rounds)")
        timings, peaks = _run_size(n, args.repeats, args.mode, log)
        for name, timing in timings.items():
            figures[f"{name}_cpu_ms@{n}"] = measure(timing.cpu_ms, "ms")
            results.append({**timing.to_dict(), "group": groups[name], "n": n,
                            "peak_mib": peaks[name] / MIB})
        judged = [timings[name] for name in (*SCORER_NAMES, "GreedySlice")]
        slowest = max(judged, key=lambda timing: timing.cpu_ms.median)
        figures[f"slowest_scorer_or_greedy_cpu_ms@{n}"] = {
            **measure(slowest.cpu_ms, "ms"), "component": slowest.name}
        print(f"\n{n} items")
        print(format_timings(timings))
    print("\ntargets: python benchmarks/check.py judges them (benchmarks/targets.toml)")
    if args.json_path is not None:
        write_json(args.json_path, payload(
            "components", mode=args.mode, quick=args.quick, env=env, ratios={},
            figures=figures, sizes=args.sizes, rounds=args.repeats,
            slice_target_tokens=SLICE_TARGET_TOKENS, knapsack_bucket_size=KNAPSACK_BUCKET,
            results=results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
