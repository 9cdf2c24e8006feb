"""UShapedPlacer (``spec/src/placers/u-shaped.md``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from .._model import ContextItem, ScoredItem
from ._common import checked_items_and_scores
from ._protocol import PLACERS

__all__ = ["UShapedPlacer", "u_shaped_order", "u_shaped_positions"]


@PLACERS.register
@dataclass(frozen=True, slots=True)
class UShapedPlacer:
    """Puts the highest-scored items at both edges and the lowest in the middle.

    Items are ranked by score descending (ties: lower input index first). Even
    ranks fill the window from the start, odd ranks from the end, so rank 0 is
    first, rank 1 last, rank 2 second, rank 3 second to last, and so on.
    Scores must be finite numbers.
    """

    type_name: ClassVar[str] = "u_shaped"
    settings: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "u_shaped"}``."""
        return {"type": self.type_name}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "placer") -> Self:
        """This placer (its table has no settings)."""
        PLACERS.read(cls, data, path)
        return cls()

    def place(self, items: Sequence[ScoredItem], /) -> list[ContextItem]:
        """Return the items of ``items`` in U-shaped order (see the class doc)."""
        return u_shaped_order(*checked_items_and_scores(items, "UShapedPlacer"))


def u_shaped_order(items: list[ContextItem], scores: list[float]) -> list[ContextItem]:
    """UShapedPlacer's order of ``items`` (checked) by their finite ``scores``, as a
    new list: the placer and the pipeline's fused path both place through it."""
    return [items[i] for i in u_shaped_positions(scores)]


def u_shaped_positions(scores: list[float]) -> list[int]:
    """Where each item of UShapedPlacer's order comes from, by its finite ``scores``:
    the order is ``[items[i] for i in u_shaped_positions(scores)]`` (a traced run's
    Place stage reads its inclusions' positions from it)."""
    # reverse=True keeps the sort stable, so equal scores stay in ascending
    # index order: the spec's "score descending, then index ascending".
    ranked = sorted(range(len(scores)), key=scores.__getitem__, reverse=True)
    # Even ranks fill left to right; odd ranks fill right to left, so they
    # appear reversed after the even ones.
    odd = ranked[1::2]
    odd.reverse()
    positions = ranked[0::2]
    positions.extend(odd)
    return positions
