"""RecencyScorer and PriorityScorer (``spec/src/scorers/recency.md``,
``spec/src/scorers/priority.md``): the rank of an item's key among all
non-null keys, divided by the count of non-null keys minus one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._model import ContextItem
from ._base import ScorerBase, _Immutable

__all__ = ["PriorityScorer", "RecencyScorer"]


def rank_scores(keys: Sequence[Any]) -> list[float]:
    """The specification's rank score for every key, in O(N log N).

    For a non-null key ``k`` the rank is the number of non-null keys strictly
    less than ``k`` (equal keys share the rank of the first of them in sorted
    order); the score is ``rank / (count - 1)``, or ``1.0`` when only one key
    is non-null. A ``None`` key scores ``0.0``.
    """
    present = [key for key in keys if key is not None]
    count = len(present)
    if count <= 1:
        return [0.0 if key is None else 1.0 for key in keys]
    # The first position of each distinct key in sorted order is exactly the
    # count of keys strictly below it, which is the quadratic loop's rank.
    first_position: dict[Any, int] = {}
    setdefault = first_position.setdefault
    for position, key in enumerate(sorted(present)):
        setdefault(key, position)
    denominator = count - 1
    # int / int true division is correctly rounded, as is the spec's
    # float64(rank) / float64(count - 1) for counts below 2**53.
    return [0.0 if key is None else first_position[key] / denominator for key in keys]


class RecencyScorer(_Immutable, ScorerBase):
    """More recent items score higher: the rank of an item's ``timestamp`` among
    all timestamped items, scaled to ``[0.0, 1.0]``.

    An item without a timestamp scores 0.0; a lone timestamped item scores 1.0;
    equal timestamps share a rank (all-equal timestamps all score 0.0).
    Relative: an item's score depends on the other items.
    """

    __slots__ = ()

    def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
        """Every item's recency score, in O(N log N)."""
        return rank_scores([item.timestamp for item in items])

    def __repr__(self) -> str:
        return "RecencyScorer()"


class PriorityScorer(_Immutable, ScorerBase):
    """Higher ``priority`` values score higher: the rank of an item's priority
    among all prioritised items, scaled to ``[0.0, 1.0]``.

    An item without a priority scores 0.0; a lone prioritised item scores 1.0;
    equal priorities share a rank (all-equal priorities all score 0.0).
    Relative: an item's score depends on the other items.
    """

    __slots__ = ()

    def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
        """Every item's priority score, in O(N log N)."""
        return rank_scores([item.priority for item in items])

    def __repr__(self) -> str:
        return "PriorityScorer()"
