"""The placer interface (``spec/src/placers.md``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from .._model import ContextItem, ScoredItem
from .._tables import StrategyTable

__all__ = ["PLACERS", "Placer", "PlacerType", "build_placer"]


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


class PlacerType(Protocol):
    """What a built-in placer class offers the registry (the class object itself)."""

    type_name: str
    settings: tuple[str, ...]

    def from_dict(self, data: Mapping[str, Any], /, *, path: str = ...) -> Placer:
        """The placer a table describes."""
        ...


#: The built-in placers by ``type_name``; each registers itself in its own module.
PLACERS: StrategyTable[PlacerType] = StrategyTable("placer", suffixes=("placer",))


def build_placer(data: Mapping[str, Any], *, path: str = "placer") -> Placer:
    """The built-in placer a table describes, by its ``type`` (see :data:`PLACERS`)."""
    return PLACERS.lookup(data, path).from_dict(data, path=path)
