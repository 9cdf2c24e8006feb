"""The placer interface (``spec/src/placers.md``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .._model import ContextItem, ScoredItem

__all__ = ["Placer"]


@runtime_checkable
class Placer(Protocol):
    """Orders the final selection of the Place stage.

    ``place`` receives the merged scored items (pinned items first, with score
    1.0, then the sliced items) and returns the same :class:`ContextItem`
    objects in presentation order: a permutation of the input, never adding,
    dropping, changing or duplicating an item, and deterministic for a given
    input.
    """

    def place(self, items: Sequence[ScoredItem], /) -> list[ContextItem]:
        """Return the items of ``items`` in their final order."""
        ...
