"""ReflexiveScorer (``spec/src/scorers/reflexive.md``): the item's
``future_relevance_hint``, clamped to ``[0.0, 1.0]``."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .._model import ContextItem
from ._base import SCORERS, BuiltinScorer

__all__ = ["ReflexiveScorer"]


def clamp_unit(value: float) -> float:
    """``value`` clamped to ``[0.0, 1.0]`` (``value`` must be finite)."""
    if value < 0.0:
        return 0.0
    if value > 1.0:
        return 1.0
    return value


@SCORERS.register
class ReflexiveScorer(BuiltinScorer):
    """The caller's ``future_relevance_hint``, clamped to ``[0.0, 1.0]``.

    A missing or non-finite hint (NaN, ±infinity) scores 0.0; it is never
    clamped to a boundary. Absolute: other items do not matter. Table:
    ``{"type": "reflexive"}``.
    """

    absolute = True
    __slots__ = ()
    type_name = "reflexive"
    settings = ()

    def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
        """Every item's clamped hint."""
        isfinite = math.isfinite
        scores: list[float] = []
        append = scores.append
        for item in items:
            hint = item.future_relevance_hint
            # Order matters: null, then finiteness, then clamp.
            if hint is None or not isfinite(hint):
                append(0.0)
            else:
                append(clamp_unit(hint))
        return scores

    def __repr__(self) -> str:
        return "ReflexiveScorer()"
