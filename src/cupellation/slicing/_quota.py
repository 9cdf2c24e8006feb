"""QuotaSlice (``spec/src/slicers/quota.md``): per-kind percentage budgets."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, Self

from .._model import ContextBudget, ContextItem, ContextKind, ScoredItem, ScoredItems
from .._tables import array_value, built, check_keys, child, index, table, text_value
from ..exceptions import ConfigurationError, InvalidTypeError
from ._common import check_budget, check_inner, unpack
from ._protocol import (
    SLICERS,
    CapExclusion,
    CountRequirementShortfall,
    SliceOutcome,
    Slicer,
    build_slicer,
    slice_with_details,
)

__all__ = ["QuotaEntry", "QuotaSlice"]


def _decimal(percent: float) -> Fraction:
    """The decimal a percentage was written as: ``33.3`` is exactly 333/10.

    Summing these exactly accepts 33.3 + 33.3 + 33.4 (whose binary doubles do
    not add up to 100.0) and refuses 50.00000000045 twice (which a float
    tolerance would let through).
    """
    return Fraction(repr(percent))


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

    def to_dict(self) -> dict[str, Any]:
        """``{"kind": ..., "require": ..., "cap": ...}``."""
        return {"kind": self.kind.value, "require": self.require, "cap": self.cap}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "quotas[0]") -> Self:
        """The entry a table describes (``require`` defaults to 0, ``cap`` to 100)."""
        entry = table(data, path)
        check_keys(entry, path, ("kind", "require", "cap"), ("kind",))
        kind = text_value(entry["kind"], child(path, "kind"))
        return built(path, lambda: cls(kind, entry.get("require", 0.0),
                                       entry.get("cap", 100.0)))


@SLICERS.register
@dataclass(frozen=True, slots=True, init=False)
class QuotaSlice:
    """Splits the budget across kinds by percentage quotas and lets ``inner``
    select within each kind's share.

    Items are partitioned by kind (first-appearance order); each kind gets its
    ``require`` share plus a share of the unassigned budget proportional to its
    candidates' token mass, clamped to its ``cap`` (all conversions floor).
    The result is each kind's selection, concatenated in partition order.

    The ``require`` percentages must sum to at most 100, compared exactly as
    the decimals written (33.3 + 33.3 + 33.4 is accepted); the required tokens
    are clamped so that together they never exceed ``target_tokens``. Items
    with negative token counts are left out of the partitions and the mass.

    Table: ``{"type": "quota", "inner": {...}, "quotas": [{"kind", "require",
    "cap"}, ...]}`` (``inner`` defaults to greedy, ``quotas`` to none).
    """

    type_name: ClassVar[str] = "quota"
    settings: ClassVar[tuple[str, ...]] = ("inner", "quotas")
    #: With no quotas it is only its inner slicer: a CLI flag does not offer it.
    needs_settings: ClassVar[bool] = True
    inner: Slicer
    quotas: tuple[QuotaEntry, ...]

    def __init__(self, inner: Slicer, quotas: Sequence[QuotaEntry] = ()) -> None:
        check_inner("inner", inner, "QuotaSlice")
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
        total = sum((_decimal(entry.require) for entry in quotas), Fraction(0))
        if total > 100:
            raise ConfigurationError(
                "quotas", float(total), "require percentages must sum to at most 100.0"
            )
        object.__setattr__(self, "inner", inner)
        object.__setattr__(self, "quotas", quotas)

    def to_dict(self) -> dict[str, Any]:
        """``type``, the ``inner`` slicer's table and the ``quotas``."""
        return {"type": self.type_name, "inner": SLICERS.describe(self.inner),
                "quotas": [entry.to_dict() for entry in self.quotas]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "slicer") -> Self:
        """The quota slicer a table describes."""
        data = SLICERS.read(cls, data, path)
        inner = build_slicer(data.get("inner", {"type": "greedy"}), path=child(path, "inner"))
        quotas_path = child(path, "quotas")
        quotas = [QuotaEntry.from_dict(raw, path=index(quotas_path, position))
                  for position, raw in enumerate(array_value(data.get("quotas", []),
                                                             quotas_path))]
        return built(path, lambda: cls(inner, quotas))

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
        items, tokens, scores = unpack(scored, "QuotaSlice")
        target = budget.target_tokens
        if not items or target <= 0:
            return SliceOutcome(())

        partitions: dict[ContextKind, tuple[list[ContextItem], list[float]]] = {}
        mass: dict[ContextKind, int] = {}
        for item, cost, score in zip(items, tokens, scores, strict=True):
            if cost < 0:
                # Invalid (the pipeline drops them at Classify), never selected
                # by the built-in slicers, and a negative token mass would skew
                # the proportional shares past target_tokens.
                continue
            kind = item.kind
            bucket = partitions.get(kind)
            if bucket is None:
                partitions[kind] = bucket = ([], [])
                mass[kind] = 0
            bucket[0].append(item)
            bucket[1].append(score)
            mass[kind] += cost

        kind_budgets, caps = self._distribute(partitions, mass, target)

        selected: list[ContextItem] = []
        exclusions: list[CapExclusion] = []
        shortfalls: list[CountRequirementShortfall] = []
        count_caps: list[tuple[ContextKind, int]] = []
        for kind, (members, member_scores) in partitions.items():
            kind_budget = kind_budgets[kind]
            if kind_budget <= 0:
                continue
            sub_budget = ContextBudget(max_tokens=caps[kind], target_tokens=kind_budget)
            outcome = slice_with_details(
                self.inner, ScoredItems._trusted(members, member_scores), sub_budget
            )
            selected.extend(outcome.selected)
            exclusions.extend(outcome.cap_exclusions)
            shortfalls.extend(outcome.shortfalls)
            count_caps.extend(outcome.count_caps)
        return SliceOutcome(tuple(selected), tuple(exclusions), tuple(shortfalls),
                            tuple(count_caps))

    def _distribute(
        self,
        partitions: dict[ContextKind, tuple[list[ContextItem], list[float]]],
        mass: dict[ContextKind, int],
        target: int,
    ) -> tuple[dict[ContextKind, int], dict[ContextKind, int]]:
        """DISTRIBUTE-BUDGET: each present kind's budget, and its cap in tokens."""
        require_tokens: dict[ContextKind, int] = {}
        cap_tokens: dict[ContextKind, int] = {}
        total_required = 0
        for quota in self.quotas:
            # The spec's order of operations: percent / 100.0 * target, floored.
            require = math.floor(quota.require / 100.0 * target)
            # The requires sum to at most 100% as decimals, but each float
            # product may round up across an integer: clamp so the required
            # tokens together never exceed the target.
            require = min(require, target - total_required)
            total_required += require
            require_tokens[quota.kind] = require
            cap_tokens[quota.kind] = math.floor(quota.cap / 100.0 * target)
        unassigned = max(0, target - total_required)

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
