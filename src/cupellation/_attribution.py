"""Why each candidate was left out or kept: the run apart from its explanation.

The pipeline (``_pipeline``) runs the six stages and decides; the functions here
only explain. Each is pure: it reads small values describing what a stage saw
and decided (:class:`Pinned`, :class:`Ranked`, :class:`Sliced`,
:class:`Merged`) and returns :class:`Decisions`, the columns of one stage's
item events. Nothing here changes which items a run selects.

The reasons follow the specification's diagnostics chapter and its vectors:
``NegativeTokens`` (Classify), ``Deduplicated`` (Deduplicate), and at Slice
``BudgetExceeded``, ``CountCapExceeded`` (the kind is at its cap and the item
would otherwise fit) or ``PinnedOverride`` (the item is over the effective
target, and would not be with nothing pinned: the displacer is the pinned item
whose tokens first pushed the target below it). Truncation at Place gives
``BudgetExceeded`` or ``PinnedOverride`` against the final state.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import accumulate, compress
from operator import attrgetter
from typing import NamedTuple

import numpy as np

from ._model import ContextBudget, ContextItem, ContextKind
from .reasons import (
    BudgetExceeded,
    CountCapExceeded,
    Deduplicated,
    ExclusionReason,
    InclusionReason,
    NegativeTokens,
    PinnedOverride,
)
from .slicing import SliceOutcome

__all__ = [
    "Decisions",
    "Merged",
    "Pinned",
    "Ranked",
    "Sliced",
    "deduplicated",
    "inclusions",
    "negative_tokens",
    "slice_exclusions",
    "truncation_exclusions",
]

_TOKENS = attrgetter("tokens")

# The values below are NamedTuples rather than frozen dataclasses: they are
# immutable and carry no __dict__ all the same, and every run builds several of
# them, which at 100 candidates is a measurable share of an untraced run (the
# pipeline builds them positionally, in the declared field order, for the same
# reason: a keyword call costs twice as much).


class Decisions(NamedTuple):
    """One stage's item decisions, column by column (what an item-event batch
    carries). ``positions`` is set for inclusions only."""

    indices: Iterable[int]
    items: Iterable[ContextItem]
    scores: Iterable[float]
    reasons: Iterable[ExclusionReason] | Iterable[InclusionReason]
    positions: Iterable[int] | None = None


class Pinned(NamedTuple):
    """The run's pinned items (candidate order), their candidate indices and
    tokens, and the run's own budget (PinnedOverride is judged against it)."""

    items: list[ContextItem]
    indices: list[int]
    tokens: int
    budget: ContextBudget


class Ranked(NamedTuple):
    """The Sort stage's output: the scoreable survivors in score order.

    ``order[k]`` is the position among the scoreable items of the ``k``-th
    ranked one, and ``scoreable_idx[p]`` the candidate index of scoreable ``p``.
    """

    items: list[ContextItem]
    scores: list[float]
    tokens: list[int]
    order: list[int]
    scoreable_idx: list[int]


class Sliced(NamedTuple):
    """What the Slice stage chose: ``chosen`` are ranked positions, ascending;
    ``tokens`` their sum; ``effective`` the budget the slicer was given;
    ``outcome`` the slicer's cap exclusions, shortfalls and count caps (its
    ``selected`` is not read: ``chosen`` is the selection)."""

    outcome: SliceOutcome
    chosen: list[int]
    tokens: int
    effective: ContextBudget


class Merged(NamedTuple):
    """The Place stage's input: pinned items (score 1.0) then the sliced ones.

    ``indices`` holds candidate indices, or is empty when nothing will ask
    for them (an untraced run that did not overflow).
    """

    items: list[ContextItem]
    scores: list[float]
    indices: list[int]
    tokens: int


def negative_tokens(candidates: Sequence[ContextItem], negative: list[int]) -> Decisions:
    """Classify: every candidate with a negative token count, by candidate index."""
    items = [candidates[k] for k in negative]
    return Decisions(negative, items, [0.0] * len(items),
                     [NegativeTokens(tokens=item.tokens) for item in items])


def deduplicated(scoreable: list[ContextItem], scoreable_idx: list[int],
                 scores: list[float], best: dict[str, int]) -> Decisions:
    """Deduplicate: every scoreable item whose content a better-scored (or, on a tie,
    earlier) item holds; ``best`` maps a content to its surviving position."""
    dropped = [p for p, item in enumerate(scoreable) if best[item.content] != p]
    return Decisions([scoreable_idx[p] for p in dropped], [scoreable[p] for p in dropped],
                     [scores[p] for p in dropped],
                     [Deduplicated(deduplicated_against=scoreable_idx[best[scoreable[p].content]])
                      for p in dropped])


def slice_exclusions(ranked: Ranked, sliced: Sliced, pinned: Pinned) -> Decisions:
    """Slice: every ranked item the slicer left out, with its reason.

    Most are ``BudgetExceeded(tokens, available)`` with the same ``available``
    for the whole stage; the few that a count cap or the pinned items explain
    are found by C-level passes and replaced afterwards, since this runs over
    every left-out candidate of every traced run.
    """
    size = len(ranked.items)
    left_flags = bytearray(b"\x01") * size
    for k in sliced.chosen:
        left_flags[k] = 0
    unchosen = list(compress(range(size), left_flags))
    left_out = list(map(ranked.items.__getitem__, unchosen))
    tokens = list(map(ranked.tokens.__getitem__, unchosen))
    available = max(0, sliced.effective.target_tokens - sliced.tokens)
    reasons: list[ExclusionReason] = list(map(_BudgetExceededByTokens(available).__getitem__,
                                              tokens))
    _explain_special(reasons, left_out, tokens, ranked, sliced, pinned)
    indices = map(ranked.scoreable_idx.__getitem__, map(ranked.order.__getitem__, unchosen))
    return Decisions(indices, left_out, map(ranked.scores.__getitem__, unchosen), reasons)


def _explain_special(reasons: list[ExclusionReason], left_out: list[ContextItem],
                     tokens: list[int], ranked: Ranked, sliced: Sliced,
                     pinned: Pinned) -> None:
    """Replace, in ``reasons``, the BudgetExceeded of the left-out items that a
    count cap (CountCapExceeded) or the pinned items (PinnedOverride) explain."""
    outcome = sliced.outcome
    target = sliced.effective.target_tokens
    # PinnedOverride (pipeline/diag-pinned-override.toml): the item is over the
    # effective target, and not over the effective target with nothing pinned.
    unpinned_target = pinned.budget.effective(0).target_tokens
    caps = {**dict(outcome.count_caps), **{c.kind: c.cap for c in outcome.cap_exclusions}}
    special: set[int] = set()
    selected_by_kind: Counter[ContextKind] = Counter()
    if caps:
        items = ranked.items
        selected_by_kind.update(items[k].kind for k in sliced.chosen)
        special.update(j for j, item in enumerate(left_out) if item.kind in caps)
    if pinned.items and tokens:
        window = np.asarray(tokens, dtype=np.int64)
        special.update(np.flatnonzero(
            (window > target) & (window <= unpinned_target)).tolist())
    pinned_prefix = list(accumulate(map(_TOKENS, pinned.items)))
    for j in sorted(special):
        item, item_tokens = left_out[j], tokens[j]
        cap = caps.get(item.kind)
        if cap is not None and selected_by_kind[item.kind] >= cap and item_tokens <= target:
            # Both reference implementations' rule: the kind is at its cap and the
            # item would otherwise fit.
            reasons[j] = CountCapExceeded(kind=item.kind.value, cap=cap,
                                          count=selected_by_kind[item.kind])
        elif pinned.items and target < item_tokens <= unpinned_target:
            reasons[j] = PinnedOverride(displaced_by=pinned.indices[_displacer(
                pinned_prefix, item_tokens, pinned.budget)])


def truncation_exclusions(merged: Merged, removed: list[int], kept_tokens: int,
                          pinned_kept: int, pinned: Pinned) -> Decisions:
    """Place, under the Truncate overflow strategy: the merged items removed.

    Decided against the final state (``kept_tokens`` in all, ``pinned_kept`` of
    them pinned), so each reason reads the same numbers as the report's totals:
    PinnedOverride when the item would fit beside the kept sliced items but for
    the pinned ones, else BudgetExceeded.
    """
    target = pinned.budget.target_tokens
    sliced_kept = kept_tokens - pinned_kept
    pinned_prefix = list(accumulate(map(_TOKENS, pinned.items)))
    reasons: list[ExclusionReason] = []
    for position in removed:
        tokens = merged.items[position].tokens
        if pinned_kept > 0 and sliced_kept + tokens <= target:
            reasons.append(PinnedOverride(displaced_by=pinned.indices[_room_displacer(
                pinned_prefix, target - sliced_kept - tokens)]))
        else:
            reasons.append(BudgetExceeded(item_tokens=tokens,
                                          available_tokens=max(0, target - kept_tokens)))
    return Decisions([merged.indices[p] for p in removed], [merged.items[p] for p in removed],
                     [merged.scores[p] for p in removed], reasons)


def inclusions(placed: Sequence[ContextItem], where: list[int], merged: Merged,
               pinned_count: int) -> Decisions:
    """Place: every placed item in its final position, with its inclusion reason.

    ``where[j]`` is the merged position of placed item ``j``. Most are Scored:
    start from that and patch the few that are not (the pinned ones sit first
    in the merged list; zero-token items are ZeroToken, reported with 0.0).
    """
    reasons: list[InclusionReason] = [InclusionReason.SCORED] * len(placed)
    scores = list(map(merged.scores.__getitem__, where))
    if pinned_count:
        placed_at = dict(zip(where, range(len(where)), strict=True))
        for k in range(pinned_count):
            reasons[placed_at[k]] = InclusionReason.PINNED
    if 0 in map(_TOKENS, placed):
        for j, item in enumerate(placed):
            if item.tokens == 0 and not item.pinned:
                reasons[j] = InclusionReason.ZERO_TOKEN
                scores[j] = 0.0  # the wire format: zero-token items are reported with 0.0
    return Decisions(map(merged.indices.__getitem__, where), placed, scores, reasons,
                     range(len(placed)))


class _BudgetExceededByTokens(dict[int, ExclusionReason]):
    """``BudgetExceeded(tokens, available)`` for a fixed ``available``, made once per
    token count and reused (reasons are immutable values)."""

    __slots__ = ("available",)

    def __init__(self, available: int) -> None:
        super().__init__()
        self.available = available

    def __missing__(self, tokens: int) -> ExclusionReason:
        reason = self[tokens] = BudgetExceeded(item_tokens=tokens,
                                               available_tokens=self.available)
        return reason


def _room_displacer(prefix: list[int], room: int) -> int:
    """Position (among the pinned items) of the one whose tokens, added in order,
    first left less than the item needed; ``room`` is what the item could spare."""
    return min(bisect_right(prefix, room), len(prefix) - 1)


def _displacer(prefix: list[int], item_tokens: int, budget: ContextBudget) -> int:
    """Position (among the pinned items) of the one whose tokens, added in order,
    first brought the effective target below ``item_tokens``.

    ``prefix`` holds the pinned items' running token sums. The effective target
    falls as pinned tokens grow (by the reserved tokens and the safety margin's
    floors as well, so it is computed, not subtracted), which makes the first
    such prefix a binary search.
    """
    def pushed_out(pinned_tokens: int) -> bool:
        return budget.effective(pinned_tokens).target_tokens < item_tokens

    return min(bisect_left(prefix, True, key=pushed_out), len(prefix) - 1)
