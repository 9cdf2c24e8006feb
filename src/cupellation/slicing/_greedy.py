"""GreedySlice (``spec/src/slicers/greedy.md``)."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import isfinite
from typing import Any, ClassVar, Self

import numpy as np
import numpy.typing as npt

from .._model import ContextBudget, ContextItem, ScoredItem
from .._order import descending_order
from ..exceptions import InvalidValueError
from ._common import check_budget, unpack
from ._protocol import SLICERS

__all__ = ["TAKE_ROUNDS", "GreedySlice", "checked_greedy_select", "greedy_density_array",
           "greedy_density_order", "greedy_take", "greedy_take_array"]

_MAX_FLOAT = sys.float_info.max
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_EXACT_INT = {int}


@SLICERS.register
@dataclass(frozen=True, slots=True)
class GreedySlice:
    """Fills the budget by value density (score per token), highest first.

    Zero-token items have density ``MAX_FLOAT`` and are always selected; an
    item that does not fit the remaining budget is skipped, never deferred.
    Equal densities keep input order. The result is in density order.
    Items with negative token counts (which the pipeline drops at Classify)
    are never selected. O(N log N). Table: ``{"type": "greedy"}``.
    """

    type_name: ClassVar[str] = "greedy"
    settings: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "greedy"}``."""
        return {"type": self.type_name}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "slicer") -> Self:
        """The greedy slicer (its table has no settings)."""
        SLICERS.read(cls, data, path)
        return cls()

    def slice(self, scored: Sequence[ScoredItem], budget: ContextBudget, /) -> list[ContextItem]:
        """Return the greedy selection of ``scored`` within ``budget.target_tokens``."""
        budget = check_budget(budget, "GreedySlice")
        items, tokens, scores = unpack(scored, "GreedySlice")
        target = budget.target_tokens
        if not items or target <= 0:
            return []
        try:
            order = greedy_order_select(tokens, scores, target)
        except OverflowError:
            # Only a token count beyond the float range gets here (ContextItem
            # bounds tokens to 64 bits, but a slicer can be handed anything).
            index = next(
                (i for i, t in enumerate(tokens) if not _INT64_MIN <= t <= _INT64_MAX), 0
            )
            raise InvalidValueError(
                f"GreedySlice scored[{index}].item.tokens", tokens[index],
                "must fit in a signed 64-bit integer",
            ) from None
        return [items[i] for i in order]


def greedy_order_select(tokens: list[int], scores: list[float], target: int) -> list[int]:
    """Indices of the items GREEDY-SLICE selects, in selection (density) order.

    ``target`` must be positive.
    """
    return greedy_take(greedy_density_order(tokens, scores), tokens, target)


def checked_greedy_select(tokens: list[int], scores: list[float], target: int) -> list[int]:
    """:func:`greedy_order_select` for the pipeline's own columns, whose values are
    already checked: ``tokens`` ints within int64 (a ContextItem's), none negative
    (Classify dropped those), ``scores`` finite floats (``checked_scores``').

    Why: up to SMALL_GREEDY items the plain order then needs none of
    :func:`_small_density_order`'s per-item checks, which were half its time
    (measured at 5 items: 1.8 against 4.6 µs; at 100: 18 against 37). Only tokens
    that are exactly ``int`` are trusted so: a ContextItem accepts an int subclass,
    whose ``__bool__`` or ``__float__`` may say otherwise than its value, and a
    ContextItem subclass may compute its tokens; those take GreedySlice's own
    checking order, as before."""
    if len(tokens) <= SMALL_GREEDY and set(map(type, tokens)) <= _EXACT_INT:
        # float / int divides by float(int), rounded as numpy's float64 division.
        densities = [score / token if token else _MAX_FLOAT
                     for token, score in zip(tokens, scores, strict=True)]
        order = sorted(range(len(densities)), key=densities.__getitem__, reverse=True)
        return greedy_take(order, tokens, target)
    return greedy_order_select(tokens, scores, target)


def greedy_density_order(tokens: list[int], scores: list[float]) -> list[int]:
    """GREEDY-SLICE's visiting order: density (score per token) descending, ties by
    index ascending, zero-token items first. It does not depend on the budget, so
    budget simulation computes it once for many :func:`greedy_take` calls."""
    if len(tokens) <= SMALL_GREEDY:
        small = _small_density_order(tokens, scores)
        if small is not None:
            return small
    order: list[int] = greedy_density_array(np.array(tokens, dtype=np.float64),
                                            np.array(scores, dtype=np.float64)).tolist()
    return order


def greedy_density_array(tokens: npt.NDArray[np.int64] | npt.NDArray[np.float64],
                         scores: npt.NDArray[np.float64]) -> npt.NDArray[np.intp]:
    """:func:`greedy_density_order` over arrays, as an array (the pipeline's fused path
    keeps a large run's columns as arrays from Sort to Slice)."""
    token_array = np.asarray(tokens, dtype=np.float64)
    zero = token_array == 0.0
    # IEEE division exactly as score / tokens in the spec; the zero-token
    # entries are overwritten with MAX_FLOAT (their division result is unused).
    # (int64 to float64 rounds to nearest, as Python's float(int) does.)
    with np.errstate(divide="ignore", invalid="ignore"):
        density = scores / token_array
    density[zero] = _MAX_FLOAT
    # "Density descending, then index ascending": the spec's tie-break contract
    # (-0.0 and 0.0 compare equal), descending_order's own.
    return descending_order(density)


#: Up to this many items the visiting order is sorted in plain Python: numpy's fixed
#: cost per call (two arrays, a division, an argsort, tolist) outweighs the sort below
#: about 150 items.
#: 128 by a joint measurement in whole untraced runs (all four SMALL_ thresholds
#: moved together, 2026-11-28): plain Python took 0.79x numpy's time at 65 items,
#: 0.92x at 100, the same at 150 and 1.2x at 200.
SMALL_GREEDY = 128


def _small_density_order(tokens: list[int], scores: list[float]) -> list[int] | None:
    """``greedy_density_order`` in plain Python for ints and finite floats (the
    pipeline's case), or None for anything else, which numpy's path then orders.

    The same order: each density is ``float(score) / float(tokens)`` rounded as
    numpy's float64 division rounds it, zero tokens give MAX_FLOAT, and Python's
    sort is stable, so equal densities (-0.0 and 0.0 among them) keep index order.
    """
    densities: list[float] = []
    for token, score in zip(tokens, scores, strict=True):
        if type(token) is not int or type(score) is not float or not (
                _INT64_MIN <= token <= _INT64_MAX) or not isfinite(score):
            return None
        # float(token) first, as np.array(tokens, dtype=float64) converts it.
        densities.append(_MAX_FLOAT if token == 0 else score / float(token))
    # reverse=True keeps equal keys in their original order (the sort stays stable).
    return sorted(range(len(densities)), key=densities.__getitem__, reverse=True)


def greedy_take(order: list[int], tokens: list[int], target: int) -> list[int]:
    """The indices GREEDY-SLICE selects within ``target`` (positive), visiting
    ``order`` (:func:`greedy_density_order`)."""
    remaining = target
    selected: list[int] = []
    take = selected.append
    for index in order:
        cost = tokens[index]
        if cost == 0:
            take(index)
        elif 0 < cost <= remaining:
            take(index)
            remaining -= cost
    return selected


#: How many rounds :func:`greedy_take_array` runs in numpy before the plain loop
#: finishes the take (each round is a pass over the items still in play).
TAKE_ROUNDS = 32


def greedy_take_array(order: npt.NDArray[np.intp], tokens: npt.NDArray[np.int64],
                      target: int) -> npt.NDArray[np.intp]:
    """:func:`greedy_take` over arrays: the same indices, in visiting order.

    Why: at a million items the plain loop is half a second of Python (one
    comparison per item); this takes the same items in a few passes of numpy.
    Each round takes the longest run of the items still in play whose running
    sum fits (every one of them fits when visited), skips the first that does
    not, and drops every later item costing more than what remains: the
    remainder only falls, so the loop would skip those too. An item costing more
    than ``target`` (or less than zero) is never taken, so costs are capped at
    ``target + 1``, which keeps each running sum within int64. After
    :data:`TAKE_ROUNDS` rounds (costs that alternate badly) the plain loop
    finishes from where the rounds stopped."""
    costs = tokens[order]
    count = int(costs.size)
    if not count or (target + 1) * count > _INT64_MAX:
        return np.asarray(greedy_take(order.tolist(), tokens.tolist(), target), dtype=np.intp)
    capped = np.minimum(costs, target + 1)
    capped[costs < 0] = target + 1
    taken: list[npt.NDArray[np.intp]] = []
    in_play: npt.NDArray[np.intp] = np.arange(count, dtype=np.intp)
    remaining = target
    for _ in range(TAKE_ROUNDS):
        sums = np.cumsum(capped[in_play])
        fits = int(np.searchsorted(sums, remaining, side="right"))
        taken.append(in_play[:fits])
        if fits:
            remaining -= int(sums[fits - 1])
        later = in_play[fits + 1:]
        in_play = later[capped[later] <= remaining]
        if not in_play.size:
            break
    else:
        rest = greedy_take(in_play.tolist(), capped.tolist(), remaining)
        taken.append(np.asarray(rest, dtype=np.intp))
    positions = np.concatenate(taken)
    chosen: npt.NDArray[np.intp] = order[positions]
    return chosen
