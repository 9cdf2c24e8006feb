"""ContextBudget and OverflowStrategy (``spec/src/data-model``)."""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..exceptions import DecodeError, InvalidTypeError, InvalidValueError
from .jsondata import check_int, check_nonneg_int, dumps_json, loads_json
from .names import ContextKind, ascii_fold, check_text
from .wire import BUDGET_FIELDS, from_seed, to_seed

__all__ = ["ContextBudget", "OverflowStrategy", "effective_limits"]


@dataclass(frozen=True, slots=True, init=False)
class ContextBudget:
    """Token budget constraints, validated at construction (all seven rules).

    ``reserved_slots`` keys may be given as strings; they are stored as
    :class:`ContextKind`, so lookups are case-insensitive. The sum of its
    values (:attr:`reserved_tokens`) is taken off the slicer's budget as
    tokens, and the safety margin then scales what is left: see
    :meth:`effective`.
    """

    max_tokens: int
    target_tokens: int
    output_reserve: int
    reserved_slots: Mapping[ContextKind, int] = field(hash=False)
    estimation_safety_margin_percent: float

    def __init__(
        self,
        max_tokens: int,
        target_tokens: int,
        output_reserve: int = 0,
        reserved_slots: Mapping[ContextKind, int] | Mapping[str, int] | None = None,
        estimation_safety_margin_percent: float = 0.0,
    ) -> None:
        set_ = object.__setattr__
        check_nonneg_int("max_tokens", max_tokens)
        check_nonneg_int("target_tokens", target_tokens)
        if target_tokens > max_tokens:
            raise InvalidValueError(
                "target_tokens", target_tokens, f"must be <= max_tokens ({max_tokens})"
            )
        check_nonneg_int("output_reserve", output_reserve)
        if output_reserve > max_tokens:
            raise InvalidValueError(
                "output_reserve", output_reserve, f"must be <= max_tokens ({max_tokens})"
            )
        margin = estimation_safety_margin_percent
        if isinstance(margin, bool) or not isinstance(margin, int | float):
            raise InvalidTypeError("estimation_safety_margin_percent", margin, "a float")
        if not (0.0 <= margin <= 100.0):  # also rejects NaN
            raise InvalidValueError(
                "estimation_safety_margin_percent", margin, "must be within [0.0, 100.0]"
            )
        normalised = _reserved_slots({} if reserved_slots is None else reserved_slots)
        set_(self, "max_tokens", max_tokens)
        set_(self, "target_tokens", target_tokens)
        set_(self, "output_reserve", output_reserve)
        set_(self, "reserved_slots", MappingProxyType(normalised))
        set_(self, "estimation_safety_margin_percent", float(margin))

    def __hash__(self) -> int:
        return hash((self.max_tokens, self.target_tokens, self.output_reserve,
                     tuple(sorted((k.folded, v) for k, v in self.reserved_slots.items())),
                     self.estimation_safety_margin_percent))

    def __reduce__(self) -> tuple[type[ContextBudget], tuple[Any, ...]]:
        # The read-only slots view cannot be pickled; rebuild from a plain copy.
        return (type(self), (self.max_tokens, self.target_tokens, self.output_reserve,
                             dict(self.reserved_slots), self.estimation_safety_margin_percent))

    def reserved_for(self, kind: ContextKind | str) -> int:
        """Reserved slots for ``kind`` (case-insensitive), 0 when none."""
        return self.reserved_slots.get(ContextKind(kind), 0)

    @property
    def reserved_tokens(self) -> int:
        """The sum of ``reserved_slots``'s values: the ``reservedTokens`` that
        ``COMPUTE-EFFECTIVE-BUDGET`` subtracts from the slicer's budget."""
        return sum(self.reserved_slots.values())

    def effective(self, pinned_tokens: int) -> ContextBudget:
        """The slicer's budget, exactly as ``COMPUTE-EFFECTIVE-BUDGET``
        (``spec/src/pipeline/slice.md`` and ``data-model/context-budget.md`` of
        the specification snapshot)::

            reservedTokens  <- sum(reservedSlots.values)
            effectiveMax    <- max(0, maxTokens - outputReserve - pinnedTokens - reservedTokens)
            effectiveTarget <- max(0, targetTokens - pinnedTokens - reservedTokens)
            effectiveTarget <- min(effectiveTarget, effectiveMax)
            if estimationSafetyMarginPercent > 0:
                multiplier      <- 1.0 - estimationSafetyMarginPercent / 100.0
                effectiveMax    <- floor(effectiveMax * multiplier)
                effectiveTarget <- floor(effectiveTarget * multiplier)
                effectiveTarget <- min(effectiveTarget, effectiveMax)

        For example ``ContextBudget(1000, 800, reserved_slots={"Message": 100},
        estimation_safety_margin_percent=10).effective(0)`` is ``(810, 630)``:
        900 and 700 after the reserved tokens, then 90% of each.

        The result is a fresh budget with only ``max_tokens`` and
        ``target_tokens`` set: as the chapter's conformance notes say, the
        effects of ``output_reserve``, ``reserved_slots`` and
        ``estimation_safety_margin_percent`` are in those two numbers, and the
        original fields are not forwarded. The product is a float64, as in the
        chapter; where its rounding would lift a value above the one it was
        taken from (only possible near 2**53 tokens), the value is kept.
        """
        return _checked_already(*effective_limits(self, pinned_tokens))

    def to_dict(self) -> dict[str, Any]:
        """camelCase JSON as a plain mapping, as the specification names the
        fields; defaults are left out."""
        return to_seed(BUDGET_FIELDS, self)

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text."""
        return dumps_json(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContextBudget:
        """Inverse of :meth:`to_dict`.

        Raises :class:`~cupellation.exceptions.DecodeError` naming the field
        for a missing, mistyped or invalid value, and for an unknown key
        (with the closest known one as a suggestion).
        """
        if not isinstance(data, Mapping):
            raise DecodeError("budget", data, "must be a JSON object")
        arguments = from_seed("ContextBudget", BUDGET_FIELDS, data)
        try:
            return cls(**arguments)
        except (InvalidValueError, InvalidTypeError) as exc:
            raise DecodeError(exc.field, exc.value, exc.problem) from exc

    @classmethod
    def from_json(cls, text: str | bytes) -> ContextBudget:
        """Build a budget from JSON text; see :meth:`from_dict`."""
        return cls.from_dict(loads_json(text, "ContextBudget"))


def effective_limits(budget: ContextBudget, pinned_tokens: int) -> tuple[int, int]:
    """``budget.effective(pinned_tokens)``'s ``(max_tokens, target_tokens)``, without
    building the budget: the pipeline's fused path needs only the two numbers."""
    reserved = budget.reserved_tokens
    effective_max = max(0, budget.max_tokens - budget.output_reserve - pinned_tokens - reserved)
    effective_target = min(max(0, budget.target_tokens - pinned_tokens - reserved),
                           effective_max)
    margin = budget.estimation_safety_margin_percent
    if margin > 0:
        multiplier = 1.0 - margin / 100.0
        effective_max = min(math.floor(effective_max * multiplier), effective_max)
        effective_target = min(math.floor(effective_target * multiplier),
                               effective_target, effective_max)
    return effective_max, effective_target


def _checked_already(max_tokens: int, target_tokens: int) -> ContextBudget:
    """``ContextBudget(max_tokens, target_tokens)`` for two values ``effective`` has
    made valid (ints, ``0 <= target <= max``), without the constructor's checks: every
    run makes one, and the checks were a tenth of a small run's fixed cost."""
    budget = ContextBudget.__new__(ContextBudget)
    set_ = object.__setattr__
    set_(budget, "max_tokens", max_tokens)
    set_(budget, "target_tokens", target_tokens)
    set_(budget, "output_reserve", 0)
    set_(budget, "reserved_slots", _NO_SLOTS)
    set_(budget, "estimation_safety_margin_percent", 0.0)
    return budget


#: The read-only, empty ``reserved_slots`` of the budgets ``effective`` makes (shared:
#: nothing can change it).
_NO_SLOTS: Mapping[ContextKind, int] = MappingProxyType({})


class OverflowStrategy(enum.Enum):
    """What the Place stage does when the merged selection exceeds ``targetTokens``."""

    THROW = "Throw"
    TRUNCATE = "Truncate"
    PROCEED = "Proceed"

    @classmethod
    def parse(cls, value: OverflowStrategy | str) -> OverflowStrategy:
        """Accept a member or its name in any ASCII case (``"truncate"``)."""
        if isinstance(value, OverflowStrategy):
            return value
        if isinstance(value, str):
            for member in cls:
                if member.value.lower() == ascii_fold(value):
                    return member
        raise InvalidValueError(
            "overflow_strategy", value, "must be one of 'Throw', 'Truncate', 'Proceed'"
        )


def _reserved_slots(slots: object) -> dict[ContextKind, int]:
    """``reserved_slots`` checked (a mapping of distinct kinds, case ignored, to counts
    >= 0) and keyed by :class:`ContextKind`; a named error otherwise."""
    if not isinstance(slots, Mapping):
        raise InvalidTypeError("reserved_slots", slots, "a mapping of kind to int")
    normalised: dict[ContextKind, int] = {}
    for key, count in slots.items():
        if not isinstance(key, str | ContextKind):
            raise InvalidTypeError("reserved_slots key", key, "a kind name")
        if isinstance(key, str):
            check_text("reserved_slots key", key)
        kind = ContextKind(key)
        if kind in normalised:
            raise InvalidValueError("reserved_slots key", key,
                                    f"repeats kind {kind.value!r} (kinds ignore case)")
        check_int(f"reserved_slots[{kind.value!r}]", count)
        if count < 0:
            raise InvalidValueError(f"reserved_slots[{kind.value!r}]", count, "must be >= 0")
        normalised[kind] = count
    return normalised
