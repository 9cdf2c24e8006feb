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
  ``effective_limits`` (``budget.effective``'s numbers), ``greedy_density_order`` /
  ``greedy_take`` (GreedySlice's own), ``truncate``, and the placers' own orders
  (``chronological_order``, ``u_shaped_order``, what their ``place`` runs). What is
  written out here is only the plumbing between them.
- ``tests/pipeline/test_fused.py`` runs the conformance vectors and a Hypothesis
  property (items, budgets, configurations, error cases) through both paths and
  compares results and exceptions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import attrgetter

from ._model import ContextBudget, ContextItem, OverflowStrategy, effective_limits
from ._run import Configured, best_of_each_content, checked_scores, score_order, truncate
from .exceptions import BudgetOverflowError, PinnedBudgetError
from .placing import ChronologicalPlacer, UShapedPlacer
from .placing._chronological import chronological_order
from .placing._u_shaped import u_shaped_order
from .slicing import GreedySlice
from .slicing._greedy import greedy_density_order, greedy_take

__all__ = ["fused_run"]

_TOKENS = attrgetter("tokens")
_PINNED = attrgetter("pinned")
#: The built-in placers' orders over plain lists (what their ``place`` runs after
#: checking its input): each returns a fresh list that is a permutation of its input,
#: so the stage path's checks of a placer's answer cannot fail for them.
_PLACE_ORDERS: dict[type, Callable[[list[ContextItem], list[float]], list[ContextItem]]] = {
    ChronologicalPlacer: chronological_order, UShapedPlacer: u_shaped_order}
_ITEM_TYPES = {ContextItem}


def fused_run(pipeline: Configured, candidates: Sequence[ContextItem],
              budget: ContextBudget) -> list[ContextItem] | None:
    """The window an untraced run returns, or None when this run is not one the
    fused path takes (the caller then runs the stages): a slicer other than
    GreedySlice, a placer other than the built-in ones, or candidates that are not
    all plain ContextItems with non-negative token counts."""
    place = _PLACE_ORDERS.get(type(pipeline.placer))
    if place is None or type(pipeline.slicer) is not GreedySlice:
        return None
    # Classify's fast case (``Run.classify``): only real items, none negative.
    if candidates and (not set(map(type, candidates)) <= _ITEM_TYPES
                       or min(map(_TOKENS, candidates)) < 0):
        return None
    pinned: list[ContextItem] = []
    pinned_tokens = 0
    scoreable_idx: Sequence[int] = range(len(candidates))
    if any(map(_PINNED, candidates)):
        pinned = [item for item in candidates if item.pinned]
        scoreable_idx = [k for k, item in enumerate(candidates) if not item.pinned]
        pinned_tokens = sum(map(_TOKENS, pinned))
        scoreable = [candidates[k] for k in scoreable_idx]
    else:
        scoreable = list(candidates)
    # As the stage path: pinned tokens against maxTokens - outputReserve only.
    available = budget.max_tokens - budget.output_reserve
    if pinned_tokens > available:
        raise PinnedBudgetError(pinned_tokens, available)
    items, scores, tokens = _ranked(pipeline, scoreable, scoreable_idx)
    target = effective_limits(budget, pinned_tokens)[1]  # budget.effective()'s target
    chosen: list[int] = []
    if items and target > 0:
        chosen = greedy_take(greedy_density_order(tokens, scores), tokens, target)
        chosen.sort()  # back to score order, as the stage path's merge takes them
    merged = pinned + [items[k] for k in chosen]
    merged_scores = [1.0] * len(pinned) + [scores[k] for k in chosen]
    merged_tokens = pinned_tokens + sum([tokens[k] for k in chosen])
    if merged_tokens > budget.target_tokens:
        merged, merged_scores = _overflow(pipeline.overflow_strategy, budget, merged,
                                          merged_scores, merged_tokens)
    return place(merged, merged_scores)


def _ranked(pipeline: Configured, scoreable: list[ContextItem], scoreable_idx: Sequence[int]
            ) -> tuple[list[ContextItem], list[float], list[int]]:
    """Score, Deduplicate and Sort: the surviving scoreable items in score order,
    with their scores and token counts. A ScorerError names a candidate index
    exactly as in the stage path (``checked_scores`` maps a position through
    ``scoreable_idx``, the scoreable items' candidate indices)."""
    count = len(scoreable)
    if not count:
        return [], [], []
    scores = checked_scores(pipeline.scorer, scoreable, scoreable_idx)
    survivors = None
    if pipeline.deduplication:
        best = best_of_each_content(scoreable, scores)
        if best is not None:
            survivors = [p for p, item in enumerate(scoreable) if best[item.content] == p]
            count = len(survivors)
    order, ranked_scores = score_order(scores, survivors, count)
    return ([scoreable[p] for p in order], ranked_scores,
            [scoreable[p].tokens for p in order])


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
