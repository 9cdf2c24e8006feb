"""CountQuotaSlice (``spec/src/slicers/count-quota.md``) and
CountConstrainedKnapsackSlice (``spec/src/slicers/count-constrained-knapsack.md``).

Both run the same three phases: commit the top ``require_count`` candidates
of each constrained kind (Count-Satisfy), let a slicer fill the rest of the
budget with the remaining candidates, then drop the returned items whose kind
has reached ``cap_count`` (Cap Enforcement, counting the committed items).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from .._model import ContextBudget, ContextItem, ContextKind, ScoredItem, ScoredItems
from .._tables import array_value, built, check_keys, child, index, table, text_value
from ..exceptions import ConfigurationError, CountRequirementError, InvalidTypeError
from ._common import check_budget, check_count, check_inner, unpack
from ._knapsack import KnapsackSlice, knapsack_select
from ._protocol import (
    SLICERS,
    CapExclusion,
    CountRequirementShortfall,
    ScarcityBehavior,
    SliceOutcome,
    Slicer,
    build_slicer,
    slice_with_details,
)

__all__ = ["CountConstrainedKnapsackSlice", "CountQuotaEntry", "CountQuotaSlice"]

@dataclass(frozen=True, slots=True, init=False)
class CountQuotaEntry:
    """Item-count constraints for one kind.

    ``require_count`` items of the kind (the best-scored) are committed before
    anything else; at most ``cap_count`` items of the kind end up selected.
    ``0 <= require_count <= cap_count``; ``cap_count`` is keyword-only:
    ``CountQuotaEntry("ToolOutput", 2, cap_count=5)``. ``kind`` may be given
    as a string.
    """

    kind: ContextKind
    require_count: int
    cap_count: int

    def __init__(
        self, kind: ContextKind | str, require_count: int = 0, *, cap_count: int
    ) -> None:
        context_kind = kind if type(kind) is ContextKind else ContextKind(kind)
        require = check_count("require_count", require_count)
        cap = check_count("cap_count", cap_count)
        if cap == 0 and require > 0:
            raise ConfigurationError(
                "cap_count", cap,
                f"a cap of 0 can never satisfy require_count {require} "
                f"for kind {context_kind.value!r}",
            )
        if require > cap:
            raise ConfigurationError(
                "require_count", require,
                f"must be <= cap_count ({cap}) for kind {context_kind.value!r}",
            )
        object.__setattr__(self, "kind", context_kind)
        object.__setattr__(self, "require_count", require)
        object.__setattr__(self, "cap_count", cap)

    def to_dict(self) -> dict[str, Any]:
        """``{"kind": ..., "require_count": ..., "cap_count": ...}``."""
        return {"kind": self.kind.value, "require_count": self.require_count,
                "cap_count": self.cap_count}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "entries[0]") -> Self:
        """The entry a table describes (``require_count`` defaults to 0)."""
        entry = table(data, path)
        check_keys(entry, path, ("kind", "require_count", "cap_count"), ("kind", "cap_count"))
        kind = text_value(entry["kind"], child(path, "kind"))
        return built(path, lambda: cls(kind, entry.get("require_count", 0),
                                       cap_count=entry["cap_count"]))


def _entries_from(value: Any, path: str) -> list[CountQuotaEntry]:
    """The entries of a count-quota table's ``entries`` array."""
    return [CountQuotaEntry.from_dict(raw, path=index(path, position))
            for position, raw in enumerate(array_value(value, path))]


def _check_entries(entries: object) -> tuple[CountQuotaEntry, ...]:
    if isinstance(entries, str | bytes) or not isinstance(entries, Sequence):
        raise InvalidTypeError("entries", entries, "a sequence of CountQuotaEntry")
    result = tuple(entries)
    seen: set[ContextKind] = set()
    for entry in result:
        if not isinstance(entry, CountQuotaEntry):
            raise InvalidTypeError("entries", entry, "a CountQuotaEntry")
        if entry.kind in seen:
            raise ConfigurationError("entries", entry.kind.value, "names a kind twice")
        seen.add(entry.kind)
    return result


#: Phase 2 for a given residual pool: (items, scores, their indices in the
#: caller's input, the reduced budget) -> what the slicer selected, in its
#: output order.
_Phase2 = Callable[[list[ContextItem], list[float], list[int], ContextBudget], SliceOutcome]


def _count_quota_slice(
    name: str,
    scored: Sequence[ScoredItem],
    budget: ContextBudget,
    *,
    entries: tuple[CountQuotaEntry, ...],
    scarcity: ScarcityBehavior,
    run_inner: _Phase2,
) -> SliceOutcome:
    """The shared three phases (``run_inner`` is phase 2)."""
    budget = check_budget(budget, name)
    items, tokens, scores = unpack(scored, name)
    caps = tuple((entry.kind, entry.cap_count) for entry in entries)
    if not items or budget.target_tokens <= 0:
        return SliceOutcome((), count_caps=caps)

    # --- Phase 1: Count-Satisfy ---
    required = [entry for entry in entries if entry.require_count > 0]
    partitions: dict[ContextKind, list[int]] = {entry.kind: [] for entry in required}
    if partitions:
        for index, item in enumerate(items):
            # Negative token counts are invalid (the pipeline drops them at
            # Classify); like every other slicer, never select them.
            if tokens[index] >= 0:
                bucket = partitions.get(item.kind)
                if bucket is not None:
                    bucket.append(index)

    committed: list[ContextItem] = []
    committed_ids: set[int] = set()
    selected_count: dict[ContextKind, int] = {}
    pre_allocated = 0
    shortfalls: list[CountRequirementShortfall] = []
    for entry in required:
        # nlargest is documented as sorted(..., reverse=True)[:n]: a stable
        # score-descending sort, so equal scores keep their input order.
        top = heapq.nlargest(entry.require_count, partitions[entry.kind],
                             key=scores.__getitem__)
        for index in top:
            item = items[index]
            committed.append(item)
            committed_ids.add(id(item))
            pre_allocated += tokens[index]
        satisfied = len(top)
        selected_count[entry.kind] = satisfied
        if satisfied < entry.require_count:
            if scarcity is ScarcityBehavior.THROW:
                raise CountRequirementError(
                    f"{name}: candidate pool for kind '{entry.kind.value}' has "
                    f"{satisfied} items but RequireCount is {entry.require_count}.",
                    kind=entry.kind.value,
                    required_count=entry.require_count,
                    satisfied_count=satisfied,
                )
            shortfalls.append(
                CountRequirementShortfall(entry.kind, entry.require_count, satisfied)
            )

    # --- Phase 2: delegate the residual pool with the reduced budget ---
    # The committed set is by reference: every entry of a committed object
    # leaves the pool, as in the specification.
    if committed_ids:
        positions = [i for i, item in enumerate(items) if id(item) not in committed_ids]
    else:
        positions = list(range(len(items)))
    residual_target = max(0, budget.target_tokens - pre_allocated)
    residual_budget = ContextBudget(
        max_tokens=budget.max_tokens,
        target_tokens=min(residual_target, budget.max_tokens),
    )
    inner = run_inner([items[i] for i in positions], [scores[i] for i in positions],
                      positions, residual_budget)

    # --- Phase 3: Cap Enforcement (counts seeded from Phase 1, D181) ---
    policy = {entry.kind: entry for entry in entries}
    result = committed
    exclusions = list(inner.cap_exclusions)
    for item in inner.selected:
        kind = item.kind
        constraint = policy.get(kind)
        if constraint is None:
            result.append(item)
            continue
        count = selected_count.get(kind, 0)
        if count >= constraint.cap_count:
            exclusions.append(CapExclusion(item, constraint.kind, constraint.cap_count, count))
        else:
            result.append(item)
            selected_count[kind] = count + 1
    return SliceOutcome(tuple(result), tuple(exclusions), (*shortfalls, *inner.shortfalls),
                        (*caps, *inner.count_caps))


@SLICERS.register
@dataclass(frozen=True, slots=True, init=False)
class CountQuotaSlice:
    """Guarantees per-kind item counts around an ``inner`` slicer.

    Phase 1 commits each entry's ``require_count`` best-scored items of its
    kind (even past the budget: they are guaranteed); ``inner`` then selects
    from the other candidates within ``target_tokens`` minus the committed
    tokens; finally items of a kind that already has ``cap_count`` selected
    are dropped; the inner slicer's output is capped in its own order.
    Candidates with negative token counts are never committed. With
    ``ScarcityBehavior.THROW`` a kind with too few candidates raises
    :class:`~cupellation.exceptions.CountRequirementError`;
    with ``DEGRADE`` (the default) it is reported as a shortfall by
    :meth:`slice_with_details`. ``inner`` must not be a :class:`KnapsackSlice`
    (use :class:`CountConstrainedKnapsackSlice`).

    Table: ``{"type": "count_quota", "inner": {...}, "entries": [{"kind",
    "require_count", "cap_count"}, ...], "scarcity": "Degrade"}`` (``entries``
    required; ``inner`` defaults to greedy).
    """

    type_name: ClassVar[str] = "count_quota"
    settings: ClassVar[tuple[str, ...]] = ("inner", "entries", "scarcity")
    inner: Slicer
    entries: tuple[CountQuotaEntry, ...]
    scarcity: ScarcityBehavior

    def __init__(
        self,
        inner: Slicer,
        entries: Sequence[CountQuotaEntry],
        scarcity: ScarcityBehavior | str = ScarcityBehavior.DEGRADE,
    ) -> None:
        check_inner("inner", inner, "CountQuotaSlice")
        if isinstance(inner, KnapsackSlice):
            raise ConfigurationError(
                "inner", inner,
                "CountQuotaSlice does not support KnapsackSlice as the inner slicer; "
                "use GreedySlice, or CountConstrainedKnapsackSlice for knapsack selection",
            )
        object.__setattr__(self, "inner", inner)
        object.__setattr__(self, "entries", _check_entries(entries))
        object.__setattr__(self, "scarcity", ScarcityBehavior.parse(scarcity))

    def to_dict(self) -> dict[str, Any]:
        """``type``, the ``inner`` slicer's table, ``entries`` and ``scarcity``."""
        return {"type": self.type_name, "inner": SLICERS.describe(self.inner),
                "entries": [entry.to_dict() for entry in self.entries],
                "scarcity": self.scarcity.value}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "slicer") -> Self:
        """The count-quota slicer a table describes."""
        data = SLICERS.read(cls, data, path, required=("entries",))
        inner = build_slicer(data.get("inner", {"type": "greedy"}), path=child(path, "inner"))
        entries = _entries_from(data["entries"], child(path, "entries"))
        scarcity = data.get("scarcity", ScarcityBehavior.DEGRADE.value)
        return built(path, lambda: cls(inner, entries, scarcity))

    def slice(self, scored: Sequence[ScoredItem], budget: ContextBudget, /) -> list[ContextItem]:
        """Return the count-constrained selection (see the class doc)."""
        return list(self.slice_with_details(scored, budget).selected)

    def slice_with_details(
        self, scored: Sequence[ScoredItem], budget: ContextBudget, /
    ) -> SliceOutcome:
        """Slice as :meth:`slice` does and report cap exclusions and shortfalls
        (including any the inner slicer reports)."""
        inner = self.inner

        def run_inner(
            items: list[ContextItem], scores: list[float], _positions: list[int],
            sub_budget: ContextBudget,
        ) -> SliceOutcome:
            # Phase 3 caps in the inner slicer's own output order: the
            # CountQuotaSlice chapter has no re-sort (unlike D180's knapsack).
            return slice_with_details(inner, ScoredItems._trusted(items, scores), sub_budget)

        return _count_quota_slice(
            "CountQuotaSlice", scored, budget, entries=self.entries,
            scarcity=self.scarcity, run_inner=run_inner,
        )


@SLICERS.register
@dataclass(frozen=True, slots=True, init=False)
class CountConstrainedKnapsackSlice:
    """CountQuotaSlice's three phases with a :class:`KnapsackSlice` of
    ``bucket_size`` as the phase-2 slicer.

    The knapsack's selection is re-sorted by score descending before cap
    enforcement, so the cap keeps the best items; the sort is stable, so
    equal scores keep the knapsack's output order (reconstruction order:
    the later input item first).

    Table: ``{"type": "count_constrained_knapsack", "entries": [...],
    "bucket_size": 100, "scarcity": "Degrade"}`` (``entries`` required).
    """

    type_name: ClassVar[str] = "count_constrained_knapsack"
    settings: ClassVar[tuple[str, ...]] = ("entries", "bucket_size", "scarcity")
    entries: tuple[CountQuotaEntry, ...]
    bucket_size: int
    scarcity: ScarcityBehavior

    def __init__(
        self,
        entries: Sequence[CountQuotaEntry],
        bucket_size: int = 100,
        scarcity: ScarcityBehavior | str = ScarcityBehavior.DEGRADE,
    ) -> None:
        object.__setattr__(self, "entries", _check_entries(entries))
        object.__setattr__(self, "bucket_size", check_count("bucket_size", bucket_size,
                                                            positive=True))
        object.__setattr__(self, "scarcity", ScarcityBehavior.parse(scarcity))

    def to_dict(self) -> dict[str, Any]:
        """``type``, ``entries``, ``bucket_size`` and ``scarcity``."""
        return {"type": self.type_name, "entries": [entry.to_dict() for entry in self.entries],
                "bucket_size": self.bucket_size, "scarcity": self.scarcity.value}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "slicer") -> Self:
        """The count-constrained knapsack a table describes."""
        data = SLICERS.read(cls, data, path, required=("entries",))
        entries = _entries_from(data["entries"], child(path, "entries"))
        scarcity = data.get("scarcity", ScarcityBehavior.DEGRADE.value)
        return built(path, lambda: cls(entries, data.get("bucket_size", 100), scarcity))

    @property
    def knapsack(self) -> KnapsackSlice:
        """The phase-2 knapsack slicer."""
        return KnapsackSlice(self.bucket_size)

    def slice(self, scored: Sequence[ScoredItem], budget: ContextBudget, /) -> list[ContextItem]:
        """Return the count-constrained knapsack selection (see the class doc)."""
        return list(self.slice_with_details(scored, budget).selected)

    def slice_with_details(
        self, scored: Sequence[ScoredItem], budget: ContextBudget, /
    ) -> SliceOutcome:
        """Slice as :meth:`slice` does and report cap exclusions and shortfalls."""
        bucket_size = self.bucket_size

        def run_inner(
            items: list[ContextItem], scores: list[float], positions: list[int],
            sub_budget: ContextBudget,
        ) -> SliceOutcome:
            if not items or sub_budget.target_tokens <= 0:
                return SliceOutcome(())
            picked = knapsack_select(
                [item.tokens for item in items], scores, sub_budget.target_tokens, bucket_size,
                label="CountConstrainedKnapsackSlice", positions=positions,
            )
            # D180: re-sort the knapsack's output by score descending. The
            # sort is stable (changelog P1), so equal scores keep the order
            # the knapsack returned them in.
            picked.sort(key=lambda index: -scores[index])
            return SliceOutcome(tuple(items[index] for index in picked))

        return _count_quota_slice(
            "CountConstrainedKnapsackSlice", scored, budget, entries=self.entries,
            scarcity=self.scarcity, run_inner=run_inner,
        )
