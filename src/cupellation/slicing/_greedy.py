"""GreedySlice (``spec/src/slicers/greedy.md``)."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import isfinite
from typing import Any, ClassVar, Self

import numpy as np

from .._model import ContextBudget, ContextItem, ScoredItem
from ..exceptions import InvalidValueError
from ._common import check_budget, unpack
from ._protocol import SLICERS

__all__ = ["GreedySlice", "greedy_density_order", "greedy_take"]

_MAX_FLOAT = sys.float_info.max
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


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


def greedy_density_order(tokens: list[int], scores: list[float]) -> list[int]:
    """GREEDY-SLICE's visiting order: density (score per token) descending, ties by
    index ascending, zero-token items first. It does not depend on the budget, so
    budget simulation computes it once for many :func:`greedy_take` calls."""
    if len(tokens) <= SMALL_GREEDY:
        small = _small_density_order(tokens, scores)
        if small is not None:
            return small
    token_array = np.array(tokens, dtype=np.float64)
    score_array = np.array(scores, dtype=np.float64)
    zero = token_array == 0.0
    # IEEE division exactly as score / tokens in the spec; the zero-token
    # entries are overwritten with MAX_FLOAT (their division result is unused).
    with np.errstate(divide="ignore", invalid="ignore"):
        density = score_array / token_array
    density[zero] = _MAX_FLOAT
    # A stable sort of the negated density is "density descending, then index
    # ascending": the spec's tie-break contract (-0.0 and 0.0 compare equal).
    order: list[int] = np.argsort(-density, kind="stable").tolist()
    return order


#: Up to this many items the visiting order is sorted in plain Python: numpy's fixed
#: cost per call (two arrays, a division, an argsort, tolist) outweighs the sort below
#: about a hundred items.
SMALL_GREEDY = 64


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
