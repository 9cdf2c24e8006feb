"""The fused path: an untraced run of a built-in configuration in a few plain calls.

Why it exists: an untraced :meth:`~cupellation.Pipeline.run` is what an agent loop
makes on every turn, mostly over a handful of candidates, and issue 26 asks its
fixed cost to stay under 20 µs. Walking ``_run.Run``'s six stage methods costs
about 200 Python calls for a 5-item run, most of them bookkeeping that only a
traced run needs (stage start and end, ``slice_with_details``, two
``ScoredItems`` wrappers, the slicer's identity map back to positions, protocol
checks). Here the same stages run over plain lists, GreedySlice's selection is
taken as positions directly, and nothing is built for a collector.

What keeps it equal to the stage path (``_run.Run``, the oracle):

- It runs only where its result cannot differ: no collector listens, the slicer
  is exactly :class:`GreedySlice` and the placer exactly one of the built-in
  placers (a subclass may override anything, so it takes the stage path). Any
  scorer is fine: it is called once, at the same point, through the same
  checking function (``checked_scores``).
- It refuses nothing itself but what the stage path refuses at the same point,
  with the same exception built the same way (``PinnedBudgetError`` before
  scoring, ``BudgetOverflowError`` at Place). Candidates the stage path's fast
  Classify does not settle (anything but plain ContextItems, negative token
  counts) are handed back untouched (``None``): nothing has run yet.
- Every decision with a rule of its own is made by the stage path's own
  functions: ``checked_scores``, ``best_of_each_content``, ``score_order``,
  ``effective_limits`` (``budget.effective``'s numbers), ``checked_greedy_select``
  (GreedySlice's own), ``truncate``, and the placers' own orders
  (``chronological_order``, ``u_shaped_order``, what their ``place`` runs). What is
  written out here is only the plumbing between them.
- ``tests/pipeline/test_fused.py`` runs the conformance vectors and a Hypothesis
  property (items, budgets, configurations, error cases) through both paths and
  compares results and exceptions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import compress
from operator import attrgetter, itemgetter, not_
from typing import overload

import numpy as np
import numpy.typing as npt

from ._model import ContextBudget, ContextItem, OverflowStrategy, effective_limits
from ._run import (
    Configured,
    best_of_each_content,
    checked_scores,
    score_order,
    score_order_array,
    truncate,
)
from .exceptions import BudgetOverflowError, PinnedBudgetError
from .placing import ChronologicalPlacer, UShapedPlacer
from .placing._chronological import chronological_order
from .placing._u_shaped import u_shaped_order, u_shaped_positions
from .slicing import GreedySlice
from .slicing._greedy import (
    checked_greedy_select,
    greedy_density_array,
    greedy_take_array,
)

__all__ = ["LARGE_RUN", "fused_run"]

_TOKENS = attrgetter("tokens")
_PINNED = attrgetter("pinned")
#: The built-in placers' orders over plain lists (what their ``place`` runs after
#: checking its input): each returns a fresh list that is a permutation of its input,
#: so the stage path's checks of a placer's answer cannot fail for them.
_PLACE_ORDERS: dict[type, Callable[[list[ContextItem], list[float]], list[ContextItem]]] = {
    ChronologicalPlacer: chronological_order, UShapedPlacer: u_shaped_order}
_ITEM_TYPES = {ContextItem}
#: Past this many scoreable items the fused path keeps the columns as arrays
#: (``_selected_large``). Measured in whole untraced runs, arrays against lists:
#: 0.90-0.92 of the time at 1,000-3,000 items, 0.66-0.68 at 10,000-30,000, about
#: half at 1,000,000; 1.1 at 300 (numpy's fixed cost per call).
LARGE_RUN = 1000


def fused_run(pipeline: Configured, candidates: Sequence[ContextItem],
              budget: ContextBudget) -> list[ContextItem] | None:
    """The window an untraced run returns, or None when this run is not one the
    fused path takes (the caller then runs the stages): a slicer other than
    GreedySlice, a placer other than the built-in ones, or candidates that are not
    all plain ContextItems with non-negative token counts."""
    place = _PLACE_ORDERS.get(type(pipeline.placer))
    if place is None or type(pipeline.slicer) is not GreedySlice:
        return None
    classified = _classified(candidates)
    if classified is None:
        return None
    pinned, scoreable, scoreable_idx, tokens = classified
    pinned_tokens = sum(map(_TOKENS, pinned))
    # As the stage path: pinned tokens against maxTokens - outputReserve only.
    available = budget.max_tokens - budget.output_reserve
    if pinned_tokens > available:
        raise PinnedBudgetError(pinned_tokens, available)
    if tokens is None:
        chosen, chosen_scores, chosen_tokens = _selected(pipeline, scoreable, scoreable_idx,
                                                         budget, pinned_tokens)
    else:
        at, chosen_scores, chosen_tokens = _selected_large(
            pipeline, scoreable, scoreable_idx, tokens, budget, pinned_tokens)
        # With anything selected there is no overflow: the selection fits the
        # effective target, at most target_tokens less the pinned tokens.
        if place is u_shaped_order and at.size:
            return _u_shaped_large(pinned, scoreable, at, chosen_scores)
        chosen = _gathered(scoreable, at.tolist())
    merged = pinned + chosen
    merged_scores = [1.0] * len(pinned) + chosen_scores
    merged_tokens = pinned_tokens + chosen_tokens
    if merged_tokens > budget.target_tokens:
        merged, merged_scores = _overflow(pipeline.overflow_strategy, budget, merged,
                                          merged_scores, merged_tokens)
    return place(merged, merged_scores)


def _u_shaped_large(pinned: list[ContextItem], scoreable: list[ContextItem],
                    at: npt.NDArray[np.intp], chosen_scores: list[float]) -> list[ContextItem]:
    """``u_shaped_order(pinned + chosen, [1.0] * len(pinned) + chosen_scores)``, where
    ``chosen`` is ``scoreable`` at ``at``, with each selected item read once.

    Why: the merged list and the placer's order are two gathers of the selected items
    in orders unrelated to where they lie in memory; at a million candidates (about
    560,000 selected) each cost 0.3-0.5 s, most of it cache misses. Here the placer's
    positions over the merged scores (the same function) are mapped to the
    candidates they stand for, and the items are gathered once, in the final order."""
    positions = np.asarray(u_shaped_positions([1.0] * len(pinned) + chosen_scores),
                           dtype=np.intp)
    count = len(pinned)
    # A merged position past the pinned ones is the selected item at[position - count];
    # the pinned ones are read from ``scoreable`` at 0 and replaced after.
    window = _gathered(scoreable, at[np.maximum(positions - count, 0)].tolist())
    for where in np.flatnonzero(positions < count).tolist():
        window[where] = pinned[int(positions[where])]
    return window


def _gathered(items: list[ContextItem], positions: list[int]) -> list[ContextItem]:
    """``[items[p] for p in positions]``, gathered by one ``itemgetter`` call.

    Why: a large run's window is gathered in an order unrelated to where its items
    lie in memory, so each item read is a cache miss; a C loop keeps several of them
    in flight where the comprehension's interpreted loop waits on each. Measured on
    560,000 of a million items in random order, 3 rounds: 0.29-0.31 s against
    0.42-0.50 s, though the tuple it returns is copied into a list after."""
    if len(positions) < 2:  # itemgetter of one position returns the item, of none fails
        return [items[p] for p in positions]
    return list(itemgetter(*positions)(items))


#: What Classify leaves: the pinned items, the scoreable ones, their candidate
#: indices and, past LARGE_RUN candidates, their token counts as an array.
_Classified = tuple[list[ContextItem], list[ContextItem], Sequence[int],
                    "npt.NDArray[np.int64] | None"]


def _classified(candidates: Sequence[ContextItem]) -> _Classified | None:
    """Classify's fast case (``Run.classify``): the candidates split, or None when
    they are not all plain ContextItems with non-negative token counts (the stage
    path then runs them; nothing has run yet).

    Past LARGE_RUN candidates the scoreable items' tokens are read once, into the
    array Slice uses, and checked there; the pinned ones are split off with
    ``compress`` and the scoreable indices are left to :class:`_LaterPositions`.
    Why: at a million candidates each pass over them costs 0.03-0.1 s of a run of
    about 2.4 s, and a list of a million indices would hold a million int objects
    (about 36 MiB of the run's peak memory). Measured on 1,000,000 candidates with
    one pinned, 7 rounds in turns: this split 0.45 s against 0.55 s for the checks,
    split and index array made before it (per round 0.81x)."""
    if not candidates:
        return [], [], range(0), None
    if not set(map(type, candidates)) <= _ITEM_TYPES:
        return None
    large = len(candidates) > LARGE_RUN
    if not large and min(map(_TOKENS, candidates)) < 0:
        return None
    pinned: list[ContextItem] = []
    scoreable_idx: Sequence[int] = range(len(candidates))
    if any(map(_PINNED, candidates)):
        if large:
            pinned, scoreable, pinned_at = _split_large(candidates)
            scoreable_idx = _LaterPositions(len(candidates), pinned_at)
        else:
            flags = list(map(_PINNED, candidates))
            others = list(map(not_, flags))
            pinned = list(compress(candidates, flags))
            scoreable = list(compress(candidates, others))
            scoreable_idx = [k for k, other in enumerate(others) if other]
    else:
        scoreable = list(candidates)
    if not large:
        return pinned, scoreable, scoreable_idx, None
    tokens = np.fromiter(map(_TOKENS, scoreable), dtype=np.int64, count=len(scoreable))
    if (tokens.size and tokens.min() < 0) or (pinned and min(map(_TOKENS, pinned)) < 0):
        return None
    return pinned, scoreable, scoreable_idx, tokens


#: Up to this many pinned items, a large run's scoreable list is the candidates' list
#: with the pinned ones deleted (a memmove of the list each) rather than a new list
#: made by ``compress``.
_FEW_PINNED = 16


def _split_large(candidates: Sequence[ContextItem]
                 ) -> tuple[list[ContextItem], list[ContextItem], list[int]]:
    """A large run's pinned items, its scoreable ones (both in candidate order) and the
    pinned items' candidate indices.

    Why: the pinned flags as a numpy array, and the scoreable list copied whole with the
    few pinned items deleted, cost a third of the lists of flags and their negations
    and the two ``compress`` passes it replaced (measured on 1,000,000 candidates, one
    pinned, 7 rounds in turns: 104 against 301 ms; the whole untraced run 2.21 against
    2.37 s, 0.92x per round)."""
    flags = np.fromiter(map(_PINNED, candidates), dtype=bool, count=len(candidates))
    pinned_at: list[int] = np.flatnonzero(flags).tolist()
    pinned = [candidates[k] for k in pinned_at]
    if len(pinned_at) <= _FEW_PINNED:
        scoreable = list(candidates)
        for k in reversed(pinned_at):
            del scoreable[k]
    else:
        scoreable = list(compress(candidates, (~flags).tolist()))
    return pinned, scoreable, pinned_at


class _LaterPositions(Sequence[int]):
    """The scoreable items' candidate indices (every index of ``count`` but the
    ``pinned`` ones), worked out when first read: only a ScorerError reads them, to
    name a candidate, and at a million candidates they cost 0.08 s to make (and
    8 MiB to hold through the run)."""

    __slots__ = ("_count", "_pinned", "_positions")

    def __init__(self, count: int, pinned: list[int]) -> None:
        self._count = count
        self._pinned = pinned
        self._positions: npt.NDArray[np.intp] | None = None

    def _all(self) -> npt.NDArray[np.intp]:
        if self._positions is None:
            self._positions = np.delete(np.arange(self._count, dtype=np.intp), self._pinned)
        return self._positions

    def __len__(self) -> int:
        return int(self._all().size)

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...
    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        if isinstance(index, slice):
            positions: list[int] = self._all()[index].tolist()
            return positions
        return int(self._all()[index])


#: What Score, Deduplicate, Sort and Slice leave of the scoreable items: the items
#: GreedySlice selects, in score order, their scores and their tokens' sum.
_Selected = tuple[list[ContextItem], list[float], int]


def _selected(pipeline: Configured, scoreable: list[ContextItem], scoreable_idx: Sequence[int],
              budget: ContextBudget, pinned_tokens: int) -> _Selected:
    """Score, Deduplicate, Sort and Slice over plain lists (up to LARGE_RUN items).
    A ScorerError names a candidate index exactly as in the stage path
    (``checked_scores`` maps a position through ``scoreable_idx``, the scoreable
    items' candidate indices)."""
    if not scoreable:
        return [], [], 0
    scores = checked_scores(pipeline.scorer, scoreable, scoreable_idx)
    survivors, count = _survivors(pipeline, scoreable, scores)
    order, ranked_scores = score_order(scores, survivors, count)
    target = effective_limits(budget, pinned_tokens)[1]  # budget.effective()'s target
    if not order or target <= 0:
        return [], [], 0
    tokens = [scoreable[p].tokens for p in order]
    chosen = checked_greedy_select(tokens, ranked_scores, target)
    chosen.sort()  # back to score order, as the stage path's merge takes them
    return ([scoreable[order[k]] for k in chosen], [ranked_scores[k] for k in chosen],
            sum([tokens[k] for k in chosen]))


#: What ``_selected_large`` leaves: the positions in ``scoreable`` of the items
#: GreedySlice selects, in score order, their scores and their tokens' sum.
_SelectedAt = tuple["npt.NDArray[np.intp]", list[float], int]


def _selected_large(pipeline: Configured, scoreable: list[ContextItem],
                    scoreable_idx: Sequence[int], tokens: npt.NDArray[np.int64],
                    budget: ContextBudget, pinned_tokens: int) -> _SelectedAt:
    """:func:`_selected` with the columns kept as arrays from Sort to Slice.

    Why: at a million items, lists of positions, scores and tokens in score order
    cost more than the work they carry (building one list touches a million items
    in random order), and GreedySlice's loop is half a second of Python. Here the
    tokens are read once, in candidate order (``_classified``), every reordering is an
    array index, and the selection is returned as positions (the caller gathers only
    the selected items, once). The same functions decide
    (``score_order_array``, ``greedy_density_array``, ``greedy_take_array``, which
    equal their list forms)."""
    scores = checked_scores(pipeline.scorer, scoreable, scoreable_idx)
    survivors, _count = _survivors(pipeline, scoreable, scores)
    order, ranked_scores = score_order_array(scores, survivors)
    target = effective_limits(budget, pinned_tokens)[1]
    if not order.size or target <= 0:
        return np.zeros(0, dtype=np.intp), [], 0
    ranked_tokens = tokens[order]
    chosen = greedy_take_array(greedy_density_array(ranked_tokens, ranked_scores),
                               ranked_tokens, target)
    chosen.sort()  # back to score order, as the stage path's merge takes them
    # The sum of what GreedySlice took is at most the target: no int64 overflow.
    return order[chosen], ranked_scores[chosen].tolist(), int(ranked_tokens[chosen].sum())


def _survivors(pipeline: Configured, scoreable: list[ContextItem],
               scores: list[float] | npt.NDArray[np.float64]) -> tuple[list[int] | None, int]:
    """Deduplicate: the positions that keep their content (None: all of them) and
    how many there are."""
    if pipeline.deduplication:
        best = best_of_each_content(scoreable, scores)
        if best is not None:
            survivors = [p for p, item in enumerate(scoreable) if best[item.content] == p]
            return survivors, len(survivors)
    return None, len(scoreable)


def _overflow(strategy: OverflowStrategy, budget: ContextBudget, merged: list[ContextItem],
              scores: list[float], tokens: int) -> tuple[list[ContextItem], list[float]]:
    """The merged items over ``target_tokens``, as ``Run.overflow`` treats them
    untraced: Throw raises, Proceed keeps all, Truncate keeps pinned items and the
    others while they fit, in merged order."""
    if strategy is OverflowStrategy.THROW:
        raise BudgetOverflowError(tokens, budget.target_tokens)
    if strategy is OverflowStrategy.PROCEED:
        return merged, scores
    kept = truncate(merged, budget.target_tokens)[0]
    return [merged[k] for k in kept], [scores[k] for k in kept]
