"""Input checks and small helpers shared by the built-in slicers."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

from .._model import ContextBudget, ContextItem, ScoredItem, ScoredItems
from ..exceptions import ConfigurationError, InvalidTypeError, InvalidValueError
from ._protocol import Slicer

__all__ = ["check_budget", "check_count", "check_inner", "unpack"]


def check_budget(budget: object, slicer: str) -> ContextBudget:
    """``budget`` itself, after checking it is a :class:`ContextBudget`."""
    if not isinstance(budget, ContextBudget):
        raise InvalidTypeError(f"{slicer} budget", budget, "a ContextBudget")
    return budget


def unpack(
    scored: Sequence[ScoredItem], slicer: str
) -> tuple[list[ContextItem], list[int], list[float]]:
    """The items, token counts and scores of ``scored``, in input order.

    Every entry must be a ``ScoredItem`` (or an ``(item, score)`` pair) with a
    finite score: a NaN or an infinity has no place in a density or a scaled
    integer value, so it is refused rather than selected arbitrarily.
    """
    if type(scored) is ScoredItems:
        # Validated when it was built (the pipeline's own, or ScoredItems(...)).
        return list(scored.items), list(scored.tokens), list(scored.scores)
    if isinstance(scored, str | bytes) or not isinstance(scored, Sequence):
        raise InvalidTypeError(f"{slicer} scored", scored, "a sequence of ScoredItem")
    items: list[ContextItem] = []
    tokens: list[int] = []
    scores: list[float] = []
    add_item = items.append
    add_tokens = tokens.append
    add_score = scores.append
    isfinite = math.isfinite
    for index, entry in enumerate(scored):
        if not (isinstance(entry, tuple) and len(entry) == 2
                and isinstance(entry[0], ContextItem)):
            raise InvalidTypeError(
                f"{slicer} scored[{index}]", entry,
                "a ScoredItem(item: ContextItem, score: float)",
            )
        item, score = entry
        if type(score) is not float:
            if isinstance(score, bool) or not isinstance(score, numbers.Real):
                raise InvalidTypeError(f"{slicer} scored[{index}].score", score, "a finite number")
            try:
                score = float(score)
            except OverflowError:  # an int beyond the float range (10**400)
                raise InvalidValueError(
                    f"{slicer} scored[{index}].score", score, "must be finite"
                ) from None
        if not isfinite(score):
            raise InvalidValueError(f"{slicer} scored[{index}].score", score, "must be finite")
        add_item(item)
        add_tokens(item.tokens)
        add_score(score)
    return items, tokens, scores


def check_count(field: str, value: Any, *, positive: bool = False) -> int:
    """``value`` as an int, refusing bools and non-integers (InvalidTypeError)
    and negative values, or non-positive ones when ``positive`` (ConfigurationError)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(field, value, "an integer")
    if positive and value <= 0:
        raise ConfigurationError(field, value, "must be a positive integer (> 0)")
    if value < 0:
        raise ConfigurationError(field, value, "must be >= 0")
    return int(value)


def check_inner(field: str, value: object, owner: str) -> Slicer:
    """``value`` itself, after checking it is a slicer *instance*.

    A slicer class also has a ``slice`` attribute, so the protocol check alone
    would accept ``QuotaSlice(GreedySlice)`` and fail only when slicing.
    """
    if isinstance(value, type):
        raise ConfigurationError(
            field, value,
            f"{owner} needs a slicer instance, not a class; "
            f"pass an instance: {value.__name__}()",
        )
    if not isinstance(value, Slicer):
        raise InvalidTypeError(field, value, "a Slicer (an object with slice())")
    return value
