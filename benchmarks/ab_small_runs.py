"""A/B of issue 26's fifth pass, in one process: small untraced runs with and without
the unchecked sums and orders of the pipeline's own columns.

    python benchmarks/ab_small_runs.py [--rounds 9]

**New.** A composite whose children are all recency or priority scorers sums a small
run's scores without checking its children's lists (one comprehension for two
children: ``CompositeScorer._pair_sum``), the run does not check the scores of such
a scorer (``finite_float_lists``), and GreedySlice orders the run's already-checked
columns without the per-item checks (``checked_greedy_select``).

**Old.** The same reference pipeline (``_harness.reference_pipeline``) built again,
with its composite's ``_float_children`` flag off (so it checks its children's lists,
and the run checks its scores, as before the pass), and the name the fused path and
the stage path call GreedySlice's selection by rebound to ``greedy_order_select``
(GreedySlice's own, with the checks) for the old side's calls, restored after (the
new side rebinds it to itself, so both pay the same assignments).

At each of ``bench_pipeline.py``'s fit sizes (5-200 items, no pinned item) both sides
take turns in every round (``_harness.interleave``: per-call thread CPU time, loop
mode, back-to-back calls after a lead-in). Reported: medians with min-max over rounds
of each size's time and each round's new/old ratio, and the fixed cost (the intercept
of each round's least-squares fit over the sizes, as ``bench_pipeline.py`` reports
it) of both sides.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

import cupellation._fused as fused_module  # noqa: E402
import cupellation._run as run_module  # noqa: E402
from _harness import Spread, old_new_by_size, old_new_lines, reference_pipeline  # noqa: E402
from bench_pipeline import FIT_SIZES, SEED, fit  # noqa: E402
from cupellation import ContextBudget, ContextItem, Pipeline  # noqa: E402
from cupellation.slicing._greedy import checked_greedy_select, greedy_order_select  # noqa: E402

__all__ = ["main"]

#: The name both paths call GreedySlice's selection by.
_SELECT = "checked_greedy_select"
_MODULES = (fused_module, run_module)


def _old_pipeline() -> Pipeline:
    """The reference pipeline with its composite checking its children's lists."""
    pipeline = reference_pipeline()
    object.__setattr__(pipeline.scorer, "_float_children", False)
    return pipeline


def _run_with(select: Callable[..., list[int]], pipeline: Pipeline, items: list[ContextItem],
              budget: ContextBudget) -> object:
    """One run with ``select`` as GreedySlice's selection, the name restored after.
    Both sides rebind it (the new side to what it already is), so that both pay the
    same four assignments per call."""
    for module in _MODULES:
        setattr(module, _SELECT, select)
    try:
        return pipeline.run(items, budget, None)
    finally:
        for module in _MODULES:
            setattr(module, _SELECT, checked_greedy_select)


def measure(rounds: int, sizes: Sequence[int] = FIT_SIZES) -> dict[str, list[float]]:
    """CPU seconds per call of each ``old@N`` and ``new@N``, per round."""
    sides = {"old": (greedy_order_select, _old_pipeline()),
             "new": (checked_greedy_select, reference_pipeline())}

    def side_run(side: str, items: list[ContextItem], budget: ContextBudget
                 ) -> Callable[[], object]:
        select, pipeline = sides[side]
        return partial(_run_with, select, pipeline, items, budget)

    return old_new_by_size(side_run, sizes, rounds, seed=SEED, pinned=False)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the A/B and print its table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="rounds (default 9)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(FIT_SIZES),
                        help="run sizes (default: bench_pipeline.py's fit sizes)")
    args = parser.parse_args(argv)
    cpu = measure(args.rounds, args.sizes)
    print(f"small untraced runs, {args.rounds} rounds, per-call thread CPU time, "
          "medians (min-max)")
    print("\n".join(old_new_lines(cpu, args.sizes, scale=1e6, unit=" us", digits=1)))
    if len(args.sizes) > 1:
        for side in ("old", "new"):
            fits = [fit(args.sizes, [cpu[f"{side}@{n}"][r] for n in args.sizes])
                    for r in range(args.rounds)]
            print(f"  fixed cost ({side}, fit over {', '.join(map(str, args.sizes))} items): "
                  f"{Spread.of([f[0] * 1e6 for f in fits]).text(1, ' us')}; per item "
                  f"{Spread.of([f[1] * 1e6 for f in fits]).text(3, ' us')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
