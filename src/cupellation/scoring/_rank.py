"""RecencyScorer and PriorityScorer (``spec/src/scorers/recency.md``,
``spec/src/scorers/priority.md``): the rank of an item's key among all
non-null keys, divided by the count of non-null keys minus one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import repeat
from operator import attrgetter, is_not
from typing import Any

import numpy as np
import numpy.typing as npt

from .._model import ContextItem
from ._base import SCORERS, BuiltinScorer

__all__ = ["SORTED_RANKS", "PRIORITY_KEY", "TIMESTAMP_KEY", "PriorityScorer", "RecencyScorer",
           "rank_scores_array"]

#: Up to this many keys, ``rank_scores`` ranks in plain Python: numpy's fixed cost per
#: call (array, sort, searchsorted, division, tolist: ~20 µs) outweighs its per-key
#: speed below about 150 keys, and small runs are what an agent loop makes.
#: Both paths give the same floats (see ``_rank_scores_generic``).
#: 128 by a joint measurement in whole untraced runs (all four SMALL_ thresholds
#: moved together, 2026-11-28): plain Python took 0.79x numpy's time at 65 items,
#: 0.92x at 100, the same at 150 and 1.2x at 200.
SMALL_RANK = 128
#: Past this many keys the ranks come from one argsort (``_first_positions``)
#: instead of a search per key: measured, 0.3 ms against 0.9 at 10,000 keys, but
#: 33 µs against 22 at 1,000 (its fixed cost is a few more numpy calls).
SORTED_RANKS = 4096
#: The keys the two scorers rank (by attribute, for ``rank_scores_array``).
TIMESTAMP_KEY: Callable[[ContextItem], int | None] = attrgetter("_timestamp_us")
PRIORITY_KEY: Callable[[ContextItem], int | None] = attrgetter("priority")


def rank_scores(keys: Sequence[Any]) -> list[float]:
    """The specification's rank score for every key, in O(N log N).

    For a non-null key ``k`` the rank is the number of non-null keys strictly
    less than ``k`` (equal keys share the rank of the first of them in sorted
    order); the score is ``rank / (count - 1)``, or ``1.0`` when only one key
    is non-null. A ``None`` key scores ``0.0``.
    """
    scores = _rank_keys(keys)
    if isinstance(scores, list):
        return scores
    result: list[float] = scores.tolist()
    return result


def rank_scores_array(items: Sequence[ContextItem], key: Callable[[ContextItem], Any]
                      ) -> npt.NDArray[np.float64]:
    """``rank_scores([key(item) for item in items])`` as a float64 array: the same
    floats, for the pipeline's large runs (:func:`builtin_scores_array`).

    Why: at a million items the list form builds a list of keys, a list of the
    present ones, an array of them, and at the end a list of a million floats that
    the composite and the pipeline turn back into arrays; here the keys go straight
    into an array when none is missing, and the scores stay one. When one is missing
    the keys are read again into a list (a key property of a ContextItem subclass
    then runs twice for the items before the first missing key)."""
    count = len(items)
    if count > SMALL_RANK:
        try:
            values = np.fromiter(map(key, items), dtype=np.int64, count=count)
        except (OverflowError, TypeError, ValueError):
            pass  # a None key, or one beyond int64: ranked from the list of keys
        else:
            return _present_scores(values)
    return np.asarray(_rank_keys(list(map(key, items))), dtype=np.float64)


def _rank_keys(keys: Sequence[Any]) -> list[float] | npt.NDArray[np.float64]:
    """``rank_scores``' floats: a list when the plain ranks made them (at most
    SMALL_RANK present keys, or keys beyond int64), an array when numpy did."""
    present = [key for key in keys if key is not None]
    count = len(present)
    if count <= 1:
        return [0.0 if key is None else 1.0 for key in keys]
    denominator = count - 1
    if count <= SMALL_RANK:
        return _rank_scores_generic(keys, present, denominator)
    try:
        values = np.array(present, dtype=np.int64)
    except (OverflowError, TypeError, ValueError):
        return _rank_scores_generic(keys, present, denominator)
    present_scores = _present_scores(values)
    if count == len(keys):
        return present_scores
    scores = np.zeros(len(keys), dtype=np.float64)
    scores[np.fromiter(map(is_not, keys, repeat(None)), dtype=bool,
                       count=len(keys))] = present_scores
    return scores


def _present_scores(values: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """The rank scores of two or more keys, none missing, as numpy computes them."""
    if values.size > SORTED_RANKS:
        counted = _counted_ranks(values)
        ranks = _first_positions(values) if counted is None else counted
    else:
        # searchsorted(side="left") on the sorted keys is the count of keys strictly
        # below each key: the quadratic loop's rank, ties sharing the lowest rank.
        # (Counting is not tried here: at 1,000 keys its two reductions cost as much
        # as it saves on priorities, and a third more on timestamps.)
        ranks = np.searchsorted(np.sort(values), values, side="left")
    # float64(rank) / float64(count - 1), both exact below 2**53: the spec's division.
    scores: npt.NDArray[np.float64] = ranks.astype(np.float64) / float(values.size - 1)
    return scores


def _counted_ranks(values: npt.NDArray[np.int64]) -> npt.NDArray[np.intp] | None:
    """Past SORTED_RANKS keys, the count of values strictly below each value, from a
    count of each value, when the values span at most as many integers as there are
    values (None otherwise): priorities (a few hundred levels) do, timestamps rarely.

    Why: no sort. One ``bincount`` over the offsets from the least value, its
    running sum less each count (the values below), and one lookup per value,
    all linear; an argsort of a million priorities took 0.14 s of a 2.5 s run.
    The table is at most as long as the values, so it costs no more memory than
    the ranks themselves. The same integers as ``_first_positions`` and the
    search (tests compare them)."""
    low = int(values.min())
    span = int(values.max()) - low  # Python ints: int64's ends do not overflow
    if span > values.size:
        return None
    offsets = values - low  # within [0, span]: exact in int64
    counts = np.bincount(offsets, minlength=span + 1)
    below = np.cumsum(counts) - counts
    ranks: npt.NDArray[np.intp] = below[offsets]
    return ranks


def _first_positions(values: npt.NDArray[np.int64]) -> npt.NDArray[np.intp]:
    """For each value, the position of the first equal value in sorted order: the
    count of values strictly below it, the quadratic loop's rank (ties share the
    lowest rank).

    Why not ``searchsorted(sort(values), values)``, which is the same count, past
    SORTED_RANKS keys: a million searches into a million sorted keys miss the cache
    at every step (0.2-0.3 s against 0.04-0.09 s here, measured). Here one argsort
    orders the keys, each run of equal keys takes the position where it starts, and
    the ranks go back to the keys' own order. Keys already in order (the
    timestamps of a transcript or a log, oldest first) skip the argsort and the
    reordering: one comparison pass costs a hundredth of the argsort."""
    count = values.size
    in_order = bool(np.less_equal(values[:-1], values[1:]).all())
    order = None if in_order else np.argsort(values)
    ordered = values if order is None else values[order]
    starts = np.empty(count, dtype=bool)
    starts[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    first: npt.NDArray[np.intp] = np.maximum.accumulate(np.where(starts, np.arange(count), 0))
    if order is None:
        return first
    ranks = np.empty(count, dtype=np.intp)
    ranks[order] = first
    return ranks


def _rank_scores_generic(keys: Sequence[Any], present: list[Any],
                         denominator: int) -> list[float]:
    """``rank_scores`` for keys numpy cannot hold exactly (integers beyond int64)."""
    # The first position of each distinct key in sorted order is exactly the
    # count of keys strictly below it, which is the quadratic loop's rank.
    first_position: dict[Any, int] = {}
    setdefault = first_position.setdefault
    for position, key in enumerate(sorted(present)):
        setdefault(key, position)
    # int / int true division is correctly rounded, as is the spec's
    # float64(rank) / float64(count - 1) for counts below 2**53.
    return [0.0 if key is None else first_position[key] / denominator for key in keys]


@SCORERS.register
class RecencyScorer(BuiltinScorer):
    """More recent items score higher: the rank of an item's ``timestamp`` among
    all timestamped items, scaled to ``[0.0, 1.0]``.

    An item without a timestamp scores 0.0; a lone timestamped item scores 1.0;
    equal timestamps share a rank (all-equal timestamps all score 0.0).
    Relative: an item's score depends on the other items. Table: ``{"type": "recency"}``.
    """

    __slots__ = ()
    type_name = "recency"
    settings = ()

    def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
        """Every item's recency score, in O(N log N)."""
        # Exact integer microseconds order exactly as the UTC datetimes do.
        return rank_scores([item._timestamp_us for item in items])

    def __repr__(self) -> str:
        return "RecencyScorer()"


@SCORERS.register
class PriorityScorer(BuiltinScorer):
    """Higher ``priority`` values score higher: the rank of an item's priority
    among all prioritised items, scaled to ``[0.0, 1.0]``.

    An item without a priority scores 0.0; a lone prioritised item scores 1.0;
    equal priorities share a rank (all-equal priorities all score 0.0).
    Relative: an item's score depends on the other items. Table: ``{"type": "priority"}``.
    """

    __slots__ = ()
    type_name = "priority"
    settings = ()

    def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
        """Every item's priority score, in O(N log N)."""
        return rank_scores([item.priority for item in items])

    def __repr__(self) -> str:
        return "PriorityScorer()"
