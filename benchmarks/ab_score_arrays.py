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

import sys
from collections.abc import Sequence
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

import cupellation._run as run_module  # noqa: E402
from _harness import Swap, swapped_main  # noqa: E402
from bench_pipeline import SEED  # noqa: E402
from cupellation import ContextItem  # noqa: E402
from cupellation.scoring._composite import builtin_scores_array  # noqa: E402

__all__ = ["main"]

SIZES = (1_000, 10_000, 100_000)


def _declined(scorer: object, items: Sequence[ContextItem]) -> None:
    """The old side: no scorer's scores are made as an array."""


#: The name the pipeline asks for the built-ins' arrays by, and its two forms.
_SWAPS: tuple[Swap, ...] = ((run_module, "builtin_scores_array", _declined,
                             builtin_scores_array),)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the A/B and print its table."""
    return swapped_main(argv, __doc__, _SWAPS, SIZES, seed=SEED)


if __name__ == "__main__":
    sys.exit(main())
