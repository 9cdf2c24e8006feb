"""A/B of the fused path (issue 26's fixed cost): untraced ``Pipeline.run`` with the
fused path against the same calls made to take the stage path, in one process.

    python benchmarks/ab_fused.py [--rounds 15] [--sizes 5,20,50,200]

The reference pipeline (``_harness.reference_pipeline``: composite of recency and
priority, GreedySlice, UShapedPlacer), no pinned item, ``budget_for`` its items. The
"stage" variant swaps ``cupellation._pipeline.fused_run`` for a function that
declines every run (so ``Pipeline.run`` walks ``_run.Run``'s stages, as before the
fused path), set before its calls are timed and restored after: no per-call cost is
added to either side. Every round times each variant at every size (the starting
variant alternating), by per-call thread CPU time in loop mode (back-to-back calls,
garbage collection left on, one untimed lead-in call, about 50 ms of calls). Reported: medians with
min-max over rounds per size, each round's stage/fused ratio, and the least-squares
fixed cost over bench_pipeline's FIT_SIZES per round, with the 1-minute load average
before and after (a shared machine: compare ratios within a round).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

import cupellation._pipeline as pipeline_module  # noqa: E402
from _harness import (  # noqa: E402
    Mode,
    Spread,
    budget_for,
    calls_for,
    make_items,
    reference_pipeline,
    time_calls,
)
from bench_pipeline import FIT_SIZES, SEED, fit  # noqa: E402

__all__ = ["main"]

VARIANTS = ("stage", "fused")
#: CPU seconds of calls per variant, size and round.
ROUND_SECONDS = 0.05
#: The name Pipeline.run calls the fused path by, in cupellation._pipeline.
_DISPATCH = "fused_run"


def _declined(*_args: object) -> None:
    """Stands in for ``fused_run``: declines every run, so the stages run."""
    return


def _timed(variant: str, fn: Callable[[], object], calls: int) -> float:
    """Seconds of thread CPU per call of ``fn`` under ``variant``."""
    fused = getattr(pipeline_module, _DISPATCH)
    if variant == "stage":
        setattr(pipeline_module, _DISPATCH, _declined)
    try:
        fn()  # lead-in: the timed calls follow one of their own
        return time_calls(fn, calls, mode=Mode.LOOP)[0]
    finally:
        setattr(pipeline_module, _DISPATCH, fused)


def measure(sizes: Sequence[int], rounds: int) -> dict[str, dict[int, list[float]]]:
    """Per variant and size, the µs per call of every round."""
    pipeline = reference_pipeline()
    calls_of: dict[int, Callable[[], object]] = {}
    for n in sorted(set(sizes) | set(FIT_SIZES)):
        items = make_items(n, SEED + n)
        calls_of[n] = partial(pipeline.run, items, budget_for(items), None)
    # Rounds of about 50 ms of calls per variant and size: the shared machine's noise
    # averages out within a round, while the variants still alternate often.
    counts = {n: calls_for(fn, ROUND_SECONDS) for n, fn in calls_of.items()}
    times: dict[str, dict[int, list[float]]] = {v: {n: [] for n in calls_of} for v in VARIANTS}
    for round_ in range(rounds):
        order = VARIANTS if round_ % 2 == 0 else VARIANTS[::-1]
        for n, fn in calls_of.items():
            for variant in order:
                times[variant][n].append(_timed(variant, fn, counts[n]) * 1e6)
    return times


def main(argv: Sequence[str] | None = None) -> int:
    """Run the A/B and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--sizes", default="5,20,50,200")
    args = parser.parse_args(argv)
    sizes = [int(part) for part in args.sizes.split(",")]
    load_before = os.getloadavg()[0]
    times = measure(sizes, args.rounds)
    load_after = os.getloadavg()[0]
    print(f"fused vs stage path, untraced run(), reference pipeline; {args.rounds} rounds; "
          f"load average {load_before:.2f} -> {load_after:.2f}")
    for n in sizes:
        stage, fused = times["stage"][n], times["fused"][n]
        ratio = Spread.of([s / f for s, f in zip(stage, fused, strict=True)])
        print(f"  {n:>4} items: stage {Spread.of(stage).text(1, ' us')}, "
              f"fused {Spread.of(fused).text(1, ' us')}, stage/fused {ratio.text(2, 'x')}")
    fixed: dict[str, list[float]] = {}
    for variant in VARIANTS:
        fits = [fit(FIT_SIZES, [times[variant][n][r] for n in FIT_SIZES])
                for r in range(args.rounds)]
        fixed[variant] = [f[0] for f in fits]
        print(f"  fixed cost ({variant}, fit over {', '.join(map(str, FIT_SIZES))} items): "
              f"{Spread.of(fixed[variant]).text(1, ' us')}; per item "
              f"{Spread.of([f[1] for f in fits]).text(3, ' us')}")
    # Fixed costs differ by less than their noise between rounds: subtract per round.
    saved = [s - f for s, f in zip(fixed["stage"], fixed["fused"], strict=True)]
    print(f"  fixed cost saved per round (stage - fused): {Spread.of(saved).text(1, ' us')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
