"""Scored items as the stages pass them on, and the count-quota shortfall the
report carries (``spec/src/data-model``, ``spec/src/slicers/count-quota.md``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, overload

from ..exceptions import InvalidTypeError, InvalidValueError
from .item import ContextItem
from .jsondata import check_finite
from .names import ContextKind, listed

__all__ = ["CountRequirementShortfall", "ScoredItem", "ScoredItems", "items_tokens"]


class ScoredItem(NamedTuple):
    """A context item with its relevance score (an immutable pair).

    A named tuple rather than a dataclass: the pipeline builds one per
    candidate, and tuple construction is several times cheaper.

    .. versionchanged:: 0.4
       Imported from ``cupellation``; no longer from ``cupellation.placing`` or
       ``cupellation.slicing``.
    """

    item: ContextItem
    score: float


class ScoredItems(Sequence[ScoredItem]):
    """An immutable sequence of :class:`ScoredItem` backed by two parallel lists.

    The pipeline hands stages this instead of a list of pairs: ``items`` and
    ``scores`` can be read directly (no pair is built per item), while code
    that iterates or indexes still sees ordinary ``ScoredItem`` values. The
    constructor checks that both lists have the same length, that every item
    is a :class:`ContextItem` and that every score is a finite number.
    """

    __slots__ = ("_items", "_scores", "_tokens")
    _items: list[ContextItem]
    _scores: list[float]
    _tokens: list[int] | None

    def __init__(self, items: Iterable[ContextItem], scores: Iterable[float]) -> None:
        item_list = listed("items", items, "an iterable of ContextItem")
        score_list = [check_finite(f"scores[{k}]", s)
                      for k, s in enumerate(listed("scores", scores, "an iterable of scores"))]
        if len(item_list) != len(score_list):
            raise InvalidValueError(
                "scores", len(score_list), f"must have one score per item ({len(item_list)})"
            )
        for k, item in enumerate(item_list):
            if not isinstance(item, ContextItem):
                raise InvalidTypeError(f"items[{k}]", item, "a ContextItem")
        self._items = item_list
        self._scores = score_list
        self._tokens = None

    @classmethod
    def _trusted(cls, items: list[ContextItem], scores: list[float],
                 tokens: list[int] | None = None) -> ScoredItems:
        """Wrap lists the pipeline has already validated, without copying them.

        ``tokens``, when given, must be the items' token counts: the pipeline
        keeps them in order so that slicers need not visit every item again.
        """
        self = cls.__new__(cls)
        self._items = items
        self._scores = scores
        self._tokens = tokens
        return self

    @property
    def tokens(self) -> Sequence[int]:
        """The items' token counts, in order (read-only view)."""
        if self._tokens is None:
            self._tokens = [item.tokens for item in self._items]
        return self._tokens

    @property
    def items(self) -> Sequence[ContextItem]:
        """The items, in order (read-only view)."""
        return self._items

    @property
    def scores(self) -> Sequence[float]:
        """The scores, in order (read-only view)."""
        return self._scores

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> ScoredItem: ...

    @overload
    def __getitem__(self, index: slice) -> ScoredItems: ...

    def __getitem__(self, index: int | slice) -> ScoredItem | ScoredItems:
        if isinstance(index, slice):
            tokens = None if self._tokens is None else self._tokens[index]
            return ScoredItems._trusted(self._items[index], self._scores[index], tokens)
        return ScoredItem(self._items[index], self._scores[index])

    def __iter__(self) -> Iterator[ScoredItem]:
        return map(ScoredItem, self._items, self._scores)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ScoredItems):
            return self._items == other._items and self._scores == other._scores
        if isinstance(other, Sequence) and not isinstance(other, str):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ScoredItems({len(self)} items)"


def items_tokens(items: Sequence[ContextItem]) -> int:
    """Sum of ``tokens`` over ``items``."""
    return sum(item.tokens for item in items)


@dataclass(frozen=True, slots=True)
class CountRequirementShortfall:
    """A kind whose candidate pool could not meet its ``require_count``
    (the specification's ``CountRequirementShortfall``).

    It lives with the data model, so that the SelectionReport, which carries
    shortfalls, does not depend on the slicers that find them; it is imported
    from ``cupellation.slicing``.
    """

    kind: ContextKind
    required_count: int
    satisfied_count: int
