"""A/B of issue 26's seventh pass, in one process: large untraced runs with the
sorts, ranks and gather of this pass, and with the ones before it.

    python benchmarks/ab_large_sorts.py [--rounds 7] [--sizes 10000 100000]

**New.** Sort's and GreedySlice's descending orders by numpy's quicksort, equal keys
put back in position order (``_order.descending_order``); past SORTED_RANKS keys, the
rank scorers' ranks counted when the keys span few integers (priorities) and taken
without an argsort when the keys are already in order; a large run's window
gathered by one ``itemgetter`` call (``_fused._gathered``).

**Old.** The same names rebound, for the old side's calls, to the forms before the
pass: numpy's stable argsort of the negated keys, the ranks always from one argsort,
and the window gathered by a list comprehension (the new side rebinds them to
themselves, so both pay the same assignments).

Both sides run the reference pipeline (``_harness.reference_pipeline``) on the same
items, whose windows must agree, and take turns in every round
(``_harness.interleave``: per-call thread CPU time, loop mode). Reported: medians
with min-max over rounds of each size's time and of each round's new/old ratio.
``--sizes 1000000`` runs a million items here too, about 2 s a call.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

import cupellation._fused as fused_module  # noqa: E402
import cupellation._run as run_module  # noqa: E402
import cupellation.slicing._greedy as greedy_module  # noqa: E402
from _harness import Swap, swapped_main  # noqa: E402
from bench_pipeline import SEED  # noqa: E402
from cupellation import ContextItem  # noqa: E402
from cupellation._order import descending_order  # noqa: E402
from cupellation.scoring import _rank  # noqa: E402

__all__ = ["main"]

SIZES = (10_000, 100_000)


def _stable_order(keys: npt.NDArray[np.float64]) -> npt.NDArray[np.intp]:
    """The old descending order: numpy's stable sort of the negated keys."""
    order: npt.NDArray[np.intp] = np.argsort(-keys, kind="stable")
    return order


def _not_counted(values: npt.NDArray[np.int64]) -> None:
    """The old ranks: never counted."""


def _argsorted_first_positions(values: npt.NDArray[np.int64]) -> npt.NDArray[np.intp]:
    """The old first positions: one argsort, whatever the keys' order."""
    count = values.size
    order = np.argsort(values)
    ordered = values[order]
    starts = np.empty(count, dtype=bool)
    starts[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    ranks = np.empty(count, dtype=np.intp)
    ranks[order] = np.maximum.accumulate(np.where(starts, np.arange(count), 0))
    return ranks


def _listed(items: list[ContextItem], positions: list[int]) -> list[ContextItem]:
    """The old gather: a list comprehension."""
    return [items[p] for p in positions]


#: Each swapped name, with its old and its new form.
_SWAPS: tuple[Swap, ...] = (
    (run_module, "descending_order", _stable_order, descending_order),
    (greedy_module, "descending_order", _stable_order, descending_order),
    (_rank, "_counted_ranks", _not_counted, _rank._counted_ranks),
    (_rank, "_first_positions", _argsorted_first_positions, _rank._first_positions),
    (fused_module, "_gathered", _listed, fused_module._gathered),
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the A/B and print its table."""
    return swapped_main(argv, __doc__, _SWAPS, SIZES, seed=SEED)


if __name__ == "__main__":
    sys.exit(main())
