"""ChronologicalPlacer (``spec/src/placers/chronological.md``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from .._model import ContextItem, ScoredItem
from ._common import checked_items
from ._protocol import PLACERS

__all__ = ["ChronologicalPlacer", "chronological_order"]


def _timestamp_key(item: ContextItem) -> int:
    # Only called on items whose timestamp was checked to be present. Whole
    # microseconds since the epoch order exactly as the UTC datetimes do and
    # compare several times faster.
    key = item._timestamp_us
    assert key is not None
    return key


@PLACERS.register
@dataclass(frozen=True, slots=True)
class ChronologicalPlacer:
    """Orders items oldest first by ``timestamp``; scores are ignored.

    Timestamped items come first, ascending by instant; items without a
    timestamp follow in their input order. Equal timestamps keep input order.
    """

    type_name: ClassVar[str] = "chronological"
    settings: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "chronological"}``."""
        return {"type": self.type_name}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "placer") -> Self:
        """This placer (its table has no settings)."""
        PLACERS.read(cls, data, path)
        return cls()

    def place(self, items: Sequence[ScoredItem], /) -> list[ContextItem]:
        """Return the items of ``items`` in chronological order (see the class doc)."""
        return chronological_order(checked_items(items, "ChronologicalPlacer"))


def chronological_order(items: Sequence[ContextItem], _scores: object = None
                        ) -> list[ContextItem]:
    """ChronologicalPlacer's order of ``items`` (checked), as a new list: the placer
    and the pipeline's fused path both place through it (scores are ignored)."""
    # Partitioning then stable-sorting the timestamped part is the spec's
    # comparator exactly: timestamped before null, ascending instant, index
    # tie-break (Python's sort is stable), null items in input order.
    timed = [item for item in items if item.timestamp is not None]
    if len(timed) == len(items):
        timed.sort(key=_timestamp_key)
        return timed
    untimed = [item for item in items if item.timestamp is None]
    timed.sort(key=_timestamp_key)
    timed.extend(untimed)
    return timed
