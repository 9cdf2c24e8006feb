"""TagScorer (``spec/src/scorers/tag.md``): the share of the configured tag
weight that an item's tags match."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Self

from .._model import ContextItem, ascii_fold
from .._tables import bool_value, built, child, table
from ..exceptions import ConfigurationError, InvalidTypeError
from ._base import SCORERS, BuiltinScorer, Clock, check_weight

__all__ = ["TagScorer"]


@SCORERS.register
class TagScorer(BuiltinScorer):
    """``min(sum of the weights of the item's matching tags / total weight, 1.0)``.

    ``tag_weights`` maps tags to non-negative finite weights; the total is the
    sum of all of them. Each occurrence of a configured tag on an item adds its
    weight (duplicates count twice, hence the clamp to 1.0). An item without
    tags, or a scorer whose weights are all zero, scores 0.0.

    Tags compare case-insensitively with ASCII folding by default, as the
    data model requires of every tag comparison; ``case_sensitive=True``
    selects exact (ordinal) matching, the TagScorer chapter's default
    comparer. Absolute: other items do not matter.

    Raises :class:`~cupellation.exceptions.ConfigurationError` for a negative
    or non-finite weight, or (case-insensitive) two tags that differ only in
    case.

    Table: ``{"type": "tag", "tag_weights": {tag: weight}, "case_sensitive": false}``
    (``tag_weights`` required).
    """

    absolute = True
    __slots__ = ("_lookup", "case_sensitive", "tag_weights", "total_weight")
    type_name = "tag"
    settings = ("tag_weights", "case_sensitive")
    tag_weights: Mapping[str, float]
    case_sensitive: bool
    total_weight: float
    _lookup: Mapping[str, float]

    def __init__(self, tag_weights: Mapping[str, float], case_sensitive: bool = False) -> None:
        if not isinstance(tag_weights, Mapping):
            raise InvalidTypeError("tag_weights", tag_weights, "a mapping of tag to weight")
        if not isinstance(case_sensitive, bool):
            raise InvalidTypeError("case_sensitive", case_sensitive, "a bool")
        weights: dict[str, float] = {}
        lookup: dict[str, float] = {}
        total = 0.0
        for tag, raw_weight in tag_weights.items():
            if not isinstance(tag, str):
                raise InvalidTypeError("tag_weights key", tag, "a string")
            weight = check_weight(f"tag_weights[{tag!r}]", raw_weight)
            key = tag if case_sensitive else ascii_fold(tag)
            if key in lookup:
                raise ConfigurationError(
                    "tag_weights", tag, "duplicates another tag (tags compare ignoring case)"
                )
            weights[tag] = weight
            lookup[key] = weight
            # Summed in configuration order, as CONSTRUCT-TAG-SCORER does.
            total += weight
        if total == float("inf"):
            raise ConfigurationError("tag_weights", dict(tag_weights), "weights sum to infinity")
        object.__setattr__(self, "tag_weights", MappingProxyType(weights))
        object.__setattr__(self, "case_sensitive", case_sensitive)
        object.__setattr__(self, "total_weight", total)
        object.__setattr__(self, "_lookup", MappingProxyType(lookup))

    def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
        """Every item's tag score, in O(total number of tags)."""
        total = self.total_weight
        if total == 0.0:
            return [0.0] * len(items)
        get = self._lookup.get
        fold_cache: dict[str, str] = {}
        case_sensitive = self.case_sensitive
        scores: list[float] = []
        append = scores.append
        for item in items:
            tags = item.tags
            if not tags:
                append(0.0)
                continue
            matched = 0.0
            for tag in tags:
                key = tag
                if not case_sensitive:
                    key = fold_cache.get(tag) or ""
                    if not key:
                        key = fold_cache[tag] = ascii_fold(tag)
                weight = get(key)
                if weight is not None:
                    matched += weight  # in the item's tag order, as the spec sums
            append(min(matched / total, 1.0))
        return scores

    def to_dict(self) -> dict[str, Any]:
        """``type``, ``tag_weights`` and ``case_sensitive``."""
        return {"type": self.type_name, "tag_weights": dict(self.tag_weights),
                "case_sensitive": self.case_sensitive}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "scorer",
                  clock: Clock | None = None) -> Self:
        """The tag scorer a table describes."""
        data = SCORERS.read(cls, data, path, required=("tag_weights",))
        tag_weights = table(data["tag_weights"], child(path, "tag_weights"))
        case_sensitive = bool_value(data.get("case_sensitive", False),
                                    child(path, "case_sensitive"))
        return built(path, lambda: cls(tag_weights, case_sensitive=case_sensitive))

    def _value(self) -> tuple[Any, ...]:
        return (frozenset(self.tag_weights.items()), self.case_sensitive)

    def __reduce__(self) -> tuple[type[TagScorer], tuple[dict[str, float], bool]]:
        # MappingProxyType cannot be pickled; rebuild from the weights instead.
        return (TagScorer, (dict(self.tag_weights), self.case_sensitive))

    def __repr__(self) -> str:
        shown = ", ".join(f"{tag!r}: {weight!r}" for tag, weight in self.tag_weights.items())
        suffix = ", case_sensitive=True" if self.case_sensitive else ""
        return f"TagScorer(tag_weights={{{shown}}}{suffix})"
