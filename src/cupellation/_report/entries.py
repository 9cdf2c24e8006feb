"""The entries of a SelectionReport: TraceEvent, IncludedItem, ExcludedItem and
OverflowReport, with their wire-format JSON objects.

An entry folded from a log record may be *deferred*: it holds the record and
builds its ContextItem (and its reason) the first time they are read, so a
report rebuilt from a million log lines costs no ContextItem per line until
someone looks. A deferred entry is an instance of its entry class in every
respect that shows: ``isinstance``, equality, hashing, ``repr``, pickling and
copying behave as for an entry built from the values.
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec

from .._model import ContextBudget, ContextItem, CountRequirementShortfall
from ..events import PipelineStage, StageName
from ..reasons import ExclusionReason, InclusionReason, reason_to_dict

__all__ = [
    "DeferredExcluded",
    "DeferredIncluded",
    "ExcludedItem",
    "IncludedItem",
    "OverflowReport",
    "RecordSource",
    "TraceEvent",
    "deferred_excluded",
    "deferred_included",
    "shortfall_to_dict",
]


class TraceEvent(msgspec.Struct, frozen=True, gc=False):
    """The specification's TraceEvent: one per stage in a report's ``events``."""

    stage: StageName
    duration_ms: float
    item_count: int
    message: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The wire format's JSON object (``message`` only when set)."""
        stage = self.stage.value if isinstance(self.stage, PipelineStage) else self.stage
        out: dict[str, Any] = {"stage": stage, "duration_ms": self.duration_ms,
                               "item_count": self.item_count}
        if self.message is not None:
            out["message"] = self.message
        return out


class RecordSource(Protocol):
    """What a deferred entry builds its item and reason from (a log record)."""

    @property
    def score(self) -> float: ...

    def build_item(self) -> ContextItem: ...

    def build_reason(self) -> Any: ...


class IncludedItem(msgspec.Struct, frozen=True, gc=False, eq=False):
    """A selected item with its score at inclusion and why it was included."""

    item: ContextItem
    score: float
    reason: InclusionReason

    def to_dict(self) -> dict[str, Any]:
        """The wire format's JSON object."""
        return {"item": self.item.to_dict(), "score": self.score,
                "reason": reason_to_dict(self.reason)}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IncludedItem):
            return NotImplemented
        return (self.item, self.score, self.reason) == (other.item, other.score, other.reason)

    def __ne__(self, other: object) -> bool:
        # msgspec's Struct brings its own __ne__ (identity when eq=False), which would
        # not follow the __eq__ above: a == b and a != b were both true.
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash((self.item, self.score, self.reason))

    def __repr__(self) -> str:
        return f"IncludedItem(item={self.item!r}, score={self.score!r}, reason={self.reason!r})"

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (IncludedItem, (self.item, self.score, self.reason))


class ExcludedItem(msgspec.Struct, frozen=True, gc=False, eq=False):
    """A candidate left out, with its score when excluded and the reason.

    A reason that points at another candidate holds that candidate's content
    here (the wire format's wire form), not its index.
    """

    item: ContextItem
    score: float
    reason: ExclusionReason

    def to_dict(self) -> dict[str, Any]:
        """The wire format's JSON object."""
        return {"item": self.item.to_dict(), "score": self.score,
                "reason": reason_to_dict(self.reason)}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ExcludedItem):
            return NotImplemented
        return (self.item, self.score, self.reason) == (other.item, other.score, other.reason)

    def __ne__(self, other: object) -> bool:
        # msgspec's Struct brings its own __ne__ (identity when eq=False), which would
        # not follow the __eq__ above: a == b and a != b were both true.
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash((self.item, self.score, self.reason))

    def __repr__(self) -> str:
        return f"ExcludedItem(item={self.item!r}, score={self.score!r}, reason={self.reason!r})"

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (ExcludedItem, (self.item, self.score, self.reason))


# The raw storage of the entries' fields: a deferred entry keeps its record there
# until the item (or reason) is read, then stores what it built.
_INCLUDED_ITEM = IncludedItem.__dict__["item"]
_INCLUDED_REASON = IncludedItem.__dict__["reason"]
_EXCLUDED_ITEM = ExcludedItem.__dict__["item"]
_EXCLUDED_REASON = ExcludedItem.__dict__["reason"]


class DeferredIncluded(IncludedItem, frozen=True, gc=False, eq=False):
    """An IncludedItem whose item and reason are built from a record when first read."""

    @property  # type: ignore[misc]
    def item(self) -> ContextItem:
        value = _INCLUDED_ITEM.__get__(self, IncludedItem)
        if type(value) is not ContextItem:
            value = value.build_item()
            _INCLUDED_ITEM.__set__(self, value)
        return value  # type: ignore[no-any-return]

    @property  # type: ignore[misc]
    def reason(self) -> InclusionReason:
        value = _INCLUDED_REASON.__get__(self, IncludedItem)
        if type(value) is not InclusionReason:
            value = value.build_reason()
            _INCLUDED_REASON.__set__(self, value)
        return value  # type: ignore[no-any-return]


class DeferredExcluded(ExcludedItem, frozen=True, gc=False, eq=False):
    """An ExcludedItem whose item (and reason, unless given) is built from a record
    when first read."""

    @property  # type: ignore[misc]
    def item(self) -> ContextItem:
        value = _EXCLUDED_ITEM.__get__(self, ExcludedItem)
        if type(value) is not ContextItem:
            value = value.build_item()
            _EXCLUDED_ITEM.__set__(self, value)
        return value  # type: ignore[no-any-return]

    @property  # type: ignore[misc]
    def reason(self) -> ExclusionReason:
        value = _EXCLUDED_REASON.__get__(self, ExcludedItem)
        if hasattr(type(value), "build_reason"):  # still the record
            value = value.build_reason()
            _EXCLUDED_REASON.__set__(self, value)
        return value  # type: ignore[no-any-return]


def deferred_included(record: RecordSource) -> IncludedItem:
    """An IncludedItem built from ``record`` when read (see the module's note)."""
    return DeferredIncluded(record, record.score, record)  # type: ignore[arg-type]


def deferred_excluded(record: RecordSource, reason: ExclusionReason | None = None
                      ) -> ExcludedItem:
    """An ExcludedItem built from ``record`` when read; ``reason``, when given, is the
    entry's reason (a reference resolved to content) instead of the record's."""
    stored: Any = record if reason is None else reason
    return DeferredExcluded(record, record.score, stored)  # type: ignore[arg-type]


class OverflowReport(msgspec.Struct, frozen=True, gc=False):
    """The specification's OverflowEvent, as a report carries it (Proceed only)."""

    tokens_over_budget: int
    overflowing_items: tuple[ContextItem, ...]
    budget: ContextBudget

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the report's ``overflow`` member."""
        return {"tokens_over_budget": self.tokens_over_budget,
                "overflowing_items": [i.to_dict() for i in self.overflowing_items],
                "budget": self.budget.to_dict()}


def shortfall_to_dict(shortfall: CountRequirementShortfall) -> dict[str, Any]:
    """A count-requirement shortfall as the report's JSON object."""
    return {"kind": shortfall.kind.value, "required_count": shortfall.required_count,
            "satisfied_count": shortfall.satisfied_count}
