"""Benchmark every scorer, slicer and placer on its own.

    python benchmarks/bench_components.py [--sizes 100,1000] [--repeats 7] [--quick] [--json PATH]

Scorers are timed calling ``score_all(items)``; slicers on pre-sorted
``ScoredItems`` (score descending, ties in input order, as the pipeline's Sort
stage hands them) with a target of 100,000 tokens at every size; placers
place all N pre-sorted scored items. Inputs are deterministic (seeded) and
built once per size, outside the timed region. Each benchmark is timed
``--repeats`` times (median and min reported) after one warm-up call; the
memory peak comes from one more, separately traced call.
"""

from __future__ import annotations

import os
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
    TAG_VOCABULARY,
    Measurement,
    Target,
    environment,
    format_table,
    format_targets,
    make_items,
    measure,
    parse_args,
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

#: Speed targets at 10,000 items: every scorer and GreedySlice 50 ms, KnapsackSlice 300 ms.
TARGET_N = 10_000
TARGET_LIMITS_MS: dict[str, float] = {
    **dict.fromkeys(SCORER_NAMES, 50.0),
    "GreedySlice": 50.0,
    "KnapsackSlice": 300.0,
}


def _presorted(items: list[ContextItem]) -> ScoredItems:
    """The items scored by the pipeline's usual composite and sorted as Sort does."""
    scores = list(CompositeScorer([(RecencyScorer(), 2.0), (PriorityScorer(), 1.0)])
                  .score_all(items))
    order = sorted(range(len(items)), key=lambda k: (-scores[k], k))
    return ScoredItems([items[k] for k in order], [scores[k] for k in order])


def _run_size(n: int, repeats: int, log: Callable[[str], None]) -> list[Measurement]:
    items = make_items(n, SEED + n)
    scored = _presorted(items)
    budget = ContextBudget(max_tokens=2 * SLICE_TARGET_TOKENS, target_tokens=SLICE_TARGET_TOKENS)
    rows: list[Measurement] = []

    def bench(name: str, group: str, fn: Callable[[], object]) -> None:
        row = measure(name, group, n, fn, repeats)
        rows.append(row)
        log(f"  {name:<32} N={n:<7} median {row.median_ms:10.3f} ms")

    for name, scorer in _scorers().items():
        bench(name, "scorer", partial(scorer.score_all, items))
    # The specification caps a knapsack's DP table at 50,000,000 cells
    # (TableTooLarge): past that size the knapsack slicers refuse by design.
    cells = n * (SLICE_TARGET_TOKENS // KNAPSACK_BUCKET + 1)
    for name, slicer in _slicers().items():
        if "Knapsack" in name and cells > MAX_TABLE_CELLS:
            log(f"  {name:<32} N={n:<7} skipped: {cells:,} cells > {MAX_TABLE_CELLS:,} "
                "(TableTooLargeError by design)")
            continue
        bench(name, "slicer", partial(slicer.slice, scored, budget))
    for name, placer in _placers().items():
        bench(name, "placer", partial(placer.place, scored))
    return rows


def _targets(rows: Sequence[Measurement]) -> list[Target]:
    at_n = {row.name: row for row in rows if row.n == TARGET_N}
    targets: list[Target] = []
    for name, limit in TARGET_LIMITS_MS.items():
        row = at_n.get(name)
        note = ("target 100,000 tokens, bucket 100" if name == "KnapsackSlice" else "")
        targets.append(Target(f"{name} @ {TARGET_N:,} items", "ms", limit,
                              None if row is None else row.median_ms, note))
    return targets


def main(argv: Sequence[str] | None = None) -> int:
    """Run the component benchmarks; print the table and targets; optionally write JSON."""
    args = parse_args(
        "Benchmark every cupellation scorer, slicer and placer.", argv,
        default_sizes=DEFAULT_SIZES,
    )

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    env = environment()
    rows: list[Measurement] = []
    for n in args.sizes:
        log(f"N={n}: building inputs and measuring ({args.repeats} repeats)")
        rows.extend(_run_size(n, args.repeats, log))
    order = {name: k for k, name in enumerate(SCORER_NAMES + SLICER_NAMES + PLACER_NAMES)}
    rows.sort(key=lambda row: (order[row.name], row.n))
    targets = _targets(rows)

    print(f"cupellation component benchmarks — {args.repeats} timed runs per row "
          f"(median, min), peak = tracemalloc peak of one extra run")
    print(f"Python {env['python']} on {env['platform']}, numpy {env['numpy']}, "
          f"{env['cpu_count']} CPUs, 1-min load average {env['load_average_1min']:.2f} "
          f"at start, {os.getloadavg()[0]:.2f} at end")
    print(f"slicers: pre-sorted ScoredItems, target {SLICE_TARGET_TOKENS:,} tokens; "
          f"placers: all N items")
    for group in ("scorer", "slicer", "placer"):
        print()
        print(format_table([row for row in rows if row.group == group]))
    print()
    print("targets")
    print(format_targets(targets))

    if args.json_path is not None:
        payload: dict[str, Any] = {
            "benchmark": "components",
            "environment": env,
            "sizes": args.sizes,
            "repeats": args.repeats,
            "slice_target_tokens": SLICE_TARGET_TOKENS,
            "knapsack_bucket_size": KNAPSACK_BUCKET,
            "load_average_1min_end": os.getloadavg()[0],
            "results": [row.to_dict() for row in rows],
            "targets": [target.to_dict() for target in targets],
        }
        write_json(args.json_path, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
