"""Input checks shared by the built-in placers."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

from .._model import ContextItem, ScoredItem, ScoredItems
from ..exceptions import InvalidTypeError, InvalidValueError

__all__ = ["checked_items", "checked_items_and_scores"]


def _check_sequence(items: object, placer: str) -> None:
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise InvalidTypeError(f"{placer} items", items, "a sequence of ScoredItem")


def _bad_entry(placer: str, index: int, entry: object) -> InvalidTypeError:
    return InvalidTypeError(
        f"{placer} items[{index}]", entry, "a ScoredItem(item: ContextItem, score: float)"
    )


def checked_items(items: Sequence[ScoredItem], placer: str) -> list[ContextItem]:
    """The context items of ``items``, in input order, after checking their types."""
    if type(items) is ScoredItems:
        return list(items.items)  # validated when it was built
    _check_sequence(items, placer)
    result: list[ContextItem] = []
    append = result.append
    for index, entry in enumerate(items):
        if not (isinstance(entry, tuple) and len(entry) == 2
                and isinstance(entry[0], ContextItem)):
            raise _bad_entry(placer, index, entry)
        append(entry[0])
    return result


def checked_items_and_scores(
    items: Sequence[ScoredItem], placer: str
) -> tuple[list[ContextItem], list[float]]:
    """The context items and scores of ``items``, in input order.

    Scores must be finite numbers: a NaN would make the score order
    meaningless, so it is refused rather than placed somewhere arbitrary.
    """
    if type(items) is ScoredItems:
        return list(items.items), list(items.scores)  # validated when it was built
    _check_sequence(items, placer)
    result: list[ContextItem] = []
    scores: list[float] = []
    append_item = result.append
    append_score = scores.append
    isfinite = math.isfinite
    for index, entry in enumerate(items):
        if not (isinstance(entry, tuple) and len(entry) == 2
                and isinstance(entry[0], ContextItem)):
            raise _bad_entry(placer, index, entry)
        score = entry[1]
        if type(score) is not float:
            if isinstance(score, bool) or not isinstance(score, numbers.Real):
                raise InvalidTypeError(f"{placer} items[{index}].score", score, "a finite number")
            score = float(score)
        if not isfinite(score):
            raise InvalidValueError(f"{placer} items[{index}].score", score, "must be finite")
        append_item(entry[0])
        append_score(score)
    return result, scores
