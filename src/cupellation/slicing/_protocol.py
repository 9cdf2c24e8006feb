"""The slicer interface and the detailed outcome some slicers report
(``spec/src/slicers.md``, ``spec/src/slicers/count-quota.md``)."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .._model import (
    ContextBudget,
    ContextItem,
    ContextKind,
    CountRequirementShortfall,
    ScoredItem,
    ascii_fold,
)
from .._tables import StrategyTable
from ..exceptions import ConfigurationError, InvalidTypeError, PipelineError

__all__ = [
    "SLICERS",
    "CapExclusion",
    "CountRequirementShortfall",
    "DetailedSlicer",
    "ScarcityBehavior",
    "SliceOutcome",
    "Slicer",
    "SlicerType",
    "build_slicer",
    "slice_with_details",
]


@runtime_checkable
class Slicer(Protocol):
    """Selects the subset of scored items that fits the budget (the Slice stage).

    ``scored`` is sorted by score descending; ``budget`` is the effective
    budget (only ``max_tokens`` and ``target_tokens`` are meaningful). The
    result is a subset of the input's :class:`ContextItem` objects (the same
    objects, none created, changed or duplicated). It must be deterministic.
    """

    def slice(self, scored: Sequence[ScoredItem], budget: ContextBudget, /) -> list[ContextItem]:
        """Return the selected items of ``scored`` (see the class doc)."""
        ...


class SlicerType(Protocol):
    """What a built-in slicer class offers the registry (the class object itself)."""

    type_name: str
    settings: tuple[str, ...]

    def from_dict(self, data: Mapping[str, Any], /, *, path: str = ...) -> Slicer:
        """The slicer a table describes."""
        ...


#: The built-in slicers by ``type_name``; each registers itself in its own module.
SLICERS: StrategyTable[SlicerType] = StrategyTable("slicer", suffixes=("slicer", "slice"))


def build_slicer(data: Mapping[str, Any], *, path: str = "slicer") -> Slicer:
    """The built-in slicer a table describes, by its ``type`` (see :data:`SLICERS`)."""
    return SLICERS.lookup(data, path).from_dict(data, path=path)


@runtime_checkable
class DetailedSlicer(Slicer, Protocol):
    """A slicer that can also say what it excluded by count cap and which
    count requirements it could not meet."""

    def slice_with_details(
        self, scored: Sequence[ScoredItem], budget: ContextBudget, /
    ) -> SliceOutcome:
        """Slice as :meth:`slice` does and report cap exclusions and shortfalls."""
        ...


class ScarcityBehavior(enum.Enum):
    """What a count-quota slicer does when a kind has fewer candidates than its
    ``require_count`` (``spec/src/slicers/count-quota.md``, "ScarcityBehavior")."""

    #: Commit every available candidate and record a shortfall (the default).
    DEGRADE = "Degrade"
    #: Raise :class:`~cupellation.exceptions.InvalidValueError` at once.
    THROW = "Throw"

    @classmethod
    def parse(cls, value: ScarcityBehavior | str) -> ScarcityBehavior:
        """Accept a member or its name in any ASCII case (``"degrade"``)."""
        if isinstance(value, ScarcityBehavior):
            return value
        if isinstance(value, str):
            for member in cls:
                if ascii_fold(member.value) == ascii_fold(value):
                    return member
        raise ConfigurationError("scarcity", value, "must be one of 'Degrade', 'Throw'")


@dataclass(frozen=True, slots=True)
class CapExclusion:
    """An item the slicer dropped because its kind had reached ``cap_count``.

    ``kind`` is the configured kind (the entry's spelling); ``count`` is how
    many items of that kind were already selected when this one was excluded.
    """

    item: ContextItem
    kind: ContextKind
    cap: int
    count: int


@dataclass(frozen=True, slots=True)
class SliceOutcome:
    """What one slicer call selected, plus the cap exclusions and count
    shortfalls it recorded (empty for slicers without count constraints)."""

    selected: tuple[ContextItem, ...]
    cap_exclusions: tuple[CapExclusion, ...] = ()
    shortfalls: tuple[CountRequirementShortfall, ...] = ()
    #: Every count cap the slicer applied, as (kind, cap_count) pairs, so that the
    #: pipeline can explain an item its kind's cap kept out even when the slicer
    #: never weighed that item against the cap (an inner slicer dropped it first).
    count_caps: tuple[tuple[ContextKind, int], ...] = ()


def slice_with_details(
    slicer: Slicer, scored: Sequence[ScoredItem], budget: ContextBudget
) -> SliceOutcome:
    """Run ``slicer`` and return its :class:`SliceOutcome`.

    Uses the slicer's own ``slice_with_details`` when it has one; otherwise
    wraps ``slicer.slice(...)`` with no exclusions and no shortfalls. A slicer
    that returns ``None`` (or anything but an iterable of items, or a
    ``SliceOutcome`` from ``slice_with_details``) raises
    :class:`~cupellation.exceptions.PipelineError` naming it.
    """
    if not callable(getattr(slicer, "slice", None)):
        raise InvalidTypeError("slicer", slicer, "a Slicer (an object with slice())")
    method = getattr(slicer, "slice_with_details", None)
    if callable(method):
        outcome = method(scored, budget)
        if not isinstance(outcome, SliceOutcome):
            raise PipelineError(f"slicer {type(slicer).__name__}.slice_with_details() "
                                f"returned {type(outcome).__name__}, not a SliceOutcome")
        return outcome
    selected = slicer.slice(scored, budget)
    if selected is None or isinstance(selected, str | bytes | Mapping) or not isinstance(
            selected, Iterable):
        raise PipelineError(f"slicer {type(slicer).__name__} returned "
                            f"{type(selected).__name__}, not a list of the ContextItems it "
                            "selected")
    return SliceOutcome(tuple(selected))
