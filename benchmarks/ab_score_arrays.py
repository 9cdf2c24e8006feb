"""A/B of issue 26's sixth pass, in one process: large untraced runs with the built-in
scorers' scores made as arrays from the start, and with their lists.

    python benchmarks/ab_score_arrays.py [--rounds 7] [--sizes 1000 10000 100000]

**New.** Past SMALL_SORT items, the pipeline asks a recency or priority scorer, or a
composite of them, for its scores as a float64 array (``builtin_scores_array``): the
keys go straight into an array when none is missing, and no list of floats is made.

**Old.** The name the pipeline calls it by rebound, for the old side's calls, to a
function that declines every scorer, so the scores come from ``score_all``'s lists
and are converted and checked as before the pass (the new side rebinds it to itself,
so both pay the same assignments).

Both sides run the reference pipeline (``_harness.reference_pipeline``) on the same
items and take turns in every round (``_harness.interleave``: per-call thread CPU
time, loop mode). Reported: medians with min-max over rounds of each size's time and
of each round's new/old ratio. A million items is ``bench_pipeline.py``'s
one-process figure (fresh processes, with the peak RSS); ``--sizes 1000000`` runs it
here too, about 3 s a call.
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

import cupellation._run as run_module  # noqa: E402
from _harness import old_new_by_size, old_new_lines, reference_pipeline  # noqa: E402
from bench_pipeline import SEED  # noqa: E402
from cupellation import ContextBudget, ContextItem, Pipeline  # noqa: E402
from cupellation.scoring._composite import builtin_scores_array  # noqa: E402

__all__ = ["main"]

#: The name the pipeline asks for the built-ins' arrays by.
_ARRAYS = "builtin_scores_array"
SIZES = (1_000, 10_000, 100_000)


def _declined(scorer: object, items: Sequence[ContextItem]) -> None:
    """The old side: no scorer's scores are made as an array."""


def _run_with(arrays: Callable[..., object], pipeline: Pipeline, items: list[ContextItem],
              budget: ContextBudget) -> object:
    """One run with ``arrays`` as the built-ins' array form, the name restored after
    to what it was."""
    found = getattr(run_module, _ARRAYS)
    setattr(run_module, _ARRAYS, arrays)
    try:
        return pipeline.run(items, budget, None)
    finally:
        setattr(run_module, _ARRAYS, found)


def measure(rounds: int, sizes: Sequence[int] = SIZES) -> dict[str, list[float]]:
    """CPU seconds per call of each ``old@N`` and ``new@N``, per round."""
    pipeline = reference_pipeline()
    arrays = {"old": _declined, "new": builtin_scores_array}

    def side_run(side: str, items: list[ContextItem], budget: ContextBudget
                 ) -> Callable[[], object]:
        return partial(_run_with, arrays[side], pipeline, items, budget)

    return old_new_by_size(side_run, sizes, rounds, seed=SEED, pinned=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the A/B and print its table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="rounds (default 7)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES),
                        help="run sizes (default: 1,000, 10,000 and 100,000 items)")
    args = parser.parse_args(argv)
    cpu = measure(args.rounds, args.sizes)
    print(f"large untraced runs, {args.rounds} rounds, per-call thread CPU time, "
          "medians (min-max)")
    print("\n".join(old_new_lines(cpu, args.sizes, scale=1e3, unit=" ms", digits=2)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
