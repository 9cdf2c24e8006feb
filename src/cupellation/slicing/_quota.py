"""QuotaSlice (``spec/src/slicers/quota.md``): per-kind percentage budgets."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._model import ContextBudget, ContextItem, ContextKind, ScoredItem
from ..exceptions import ConfigurationError, InvalidTypeError
from ._common import check_budget, unpack
from ._protocol import (
    CapExclusion,
    CountRequirementShortfall,
    SliceOutcome,
    Slicer,
    slice_with_details,
)

__all__ = ["QuotaEntry", "QuotaSlice"]

#: Tolerance on "the requires sum to at most 100%": decimal percentages such
#: as 33.3 + 33.3 + 33.4 do not add up to exactly 100.0 in binary.
_SUM_EPSILON = 1e-9


def _percent(field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidTypeError(field, value, "a percentage (float) in [0.0, 100.0]")
    result = float(value)
    if not math.isfinite(result):
        raise ConfigurationError(field, value, "must be finite")
    if not 0.0 <= result <= 100.0:
        raise ConfigurationError(field, value, "must be within [0.0, 100.0] (a percentage)")
    return result


@dataclass(frozen=True, slots=True, init=False)
class QuotaEntry:
    """Budget share of one kind, in percent of ``target_tokens``.

    ``require`` is the guaranteed minimum share, ``cap`` the maximum; both in
    [0.0, 100.0] with ``require <= cap``. Kinds without an entry behave as
    ``require=0.0, cap=100.0``. ``kind`` may be given as a string.
    """

    kind: ContextKind
    require: float
    cap: float

    def __init__(
        self, kind: ContextKind | str, require: float = 0.0, cap: float = 100.0
    ) -> None:
        context_kind = kind if type(kind) is ContextKind else ContextKind(kind)
        require_value = _percent("require", require)
        cap_value = _percent("cap", cap)
        if require_value > cap_value:
            raise ConfigurationError(
                "require", require,
                f"must be <= cap ({cap_value}) for kind {context_kind.value!r}",
            )
        object.__setattr__(self, "kind", context_kind)
        object.__setattr__(self, "require", require_value)
        object.__setattr__(self, "cap", cap_value)


@dataclass(frozen=True, slots=True, init=False)
class QuotaSlice:
    """Splits the budget across kinds by percentage quotas and lets ``inner``
    select within each kind's share.

    Items are partitioned by kind (first-appearance order); each kind gets its
    ``require`` share plus a share of the unassigned budget proportional to its
    candidates' token mass, clamped to its ``cap`` (all conversions floor).
    The result is each kind's selection, concatenated in partition order.
    """

    inner: Slicer
    quotas: tuple[QuotaEntry, ...]

    def __init__(self, inner: Slicer, quotas: Sequence[QuotaEntry] = ()) -> None:
        if not isinstance(inner, Slicer):
            raise InvalidTypeError("inner", inner, "a Slicer (an object with slice())")
        if isinstance(quotas, str | bytes) or not isinstance(quotas, Sequence):
            raise InvalidTypeError("quotas", quotas, "a sequence of QuotaEntry")
        quotas = tuple(quotas)
        seen: set[ContextKind] = set()
        for entry in quotas:
            if not isinstance(entry, QuotaEntry):
                raise InvalidTypeError("quotas", entry, "a QuotaEntry")
            if entry.kind in seen:
                raise ConfigurationError("quotas", entry.kind.value, "names a kind twice")
            seen.add(entry.kind)
        total = math.fsum(entry.require for entry in quotas)
        if total > 100.0 + _SUM_EPSILON:
            raise ConfigurationError(
                "quotas", total, "require percentages must sum to at most 100.0"
            )
        object.__setattr__(self, "inner", inner)
        object.__setattr__(self, "quotas", quotas)

    def slice(self, scored: Sequence[ScoredItem], budget: ContextBudget, /) -> list[ContextItem]:
        """Return each kind's selection within its budget share (see the class doc)."""
        return list(self.slice_with_details(scored, budget).selected)

    def slice_with_details(
        self, scored: Sequence[ScoredItem], budget: ContextBudget, /
    ) -> SliceOutcome:
        """Slice as :meth:`slice` does, passing on what inner slicers report.

        QuotaSlice records nothing of its own; cap exclusions and shortfalls
        come only from an inner slicer that reports them, kind by kind.
        """
        budget = check_budget(budget, "QuotaSlice")
        items, tokens, _ = unpack(scored, "QuotaSlice")
        target = budget.target_tokens
        if not items or target <= 0:
            return SliceOutcome(())

        partitions: dict[ContextKind, list[ScoredItem]] = {}
        mass: dict[ContextKind, int] = {}
        for entry, item, cost in zip(scored, items, tokens, strict=True):
            kind = item.kind
            bucket = partitions.get(kind)
            if bucket is None:
                partitions[kind] = bucket = []
                mass[kind] = 0
            bucket.append(entry)
            mass[kind] += cost

        kind_budgets, caps = self._distribute(partitions, mass, target)

        selected: list[ContextItem] = []
        exclusions: list[CapExclusion] = []
        shortfalls: list[CountRequirementShortfall] = []
        for kind, members in partitions.items():
            kind_budget = kind_budgets[kind]
            if kind_budget <= 0:
                continue
            sub_budget = ContextBudget(max_tokens=caps[kind], target_tokens=kind_budget)
            outcome = slice_with_details(self.inner, members, sub_budget)
            selected.extend(outcome.selected)
            exclusions.extend(outcome.cap_exclusions)
            shortfalls.extend(outcome.shortfalls)
        return SliceOutcome(tuple(selected), tuple(exclusions), tuple(shortfalls))

    def _distribute(
        self,
        partitions: dict[ContextKind, list[ScoredItem]],
        mass: dict[ContextKind, int],
        target: int,
    ) -> tuple[dict[ContextKind, int], dict[ContextKind, int]]:
        """DISTRIBUTE-BUDGET: each present kind's budget, and its cap in tokens."""
        require_tokens: dict[ContextKind, int] = {}
        cap_tokens: dict[ContextKind, int] = {}
        for quota in self.quotas:
            # The spec's order of operations: percent / 100.0 * target, floored.
            require_tokens[quota.kind] = math.floor(quota.require / 100.0 * target)
            cap_tokens[quota.kind] = math.floor(quota.cap / 100.0 * target)
        unassigned = max(0, target - sum(require_tokens.values()))

        total_mass = 0
        for kind in partitions:
            if cap_tokens.get(kind, target) > require_tokens.get(kind, 0):
                total_mass += mass[kind]

        budgets: dict[ContextKind, int] = {}
        caps: dict[ContextKind, int] = {}
        for kind in partitions:
            require = require_tokens.get(kind, 0)
            cap = cap_tokens.get(kind, target)
            proportional = 0
            if total_mass > 0 and cap > require:
                proportional = unassigned * mass[kind] // total_mass
            budgets[kind] = min(require + proportional, cap)
            caps[kind] = cap
        return budgets, caps
