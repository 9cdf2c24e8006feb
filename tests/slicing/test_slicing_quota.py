"""QuotaSlice: the quota chapter's DISTRIBUTE-BUDGET, edge-case table, conformance
notes and construction validation."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import pytest
from _slicing_support import budget, contents, scored

from cupellation import ContextBudget, ContextItem, ContextKind, ScoredItem
from cupellation.exceptions import ConfigurationError, InvalidTypeError
from cupellation.slicing import (
    CapExclusion,
    CountQuotaEntry,
    CountQuotaSlice,
    GreedySlice,
    KnapsackSlice,
    QuotaEntry,
    QuotaSlice,
    Slicer,
    slice_with_details,
)


class RecordingSlicer:
    """An inner slicer that records each call's kinds and budget and selects everything."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], ContextBudget]] = []

    def slice(self, scored: Sequence[ScoredItem], budget: ContextBudget, /) -> list[ContextItem]:
        """Record the call and return every item."""
        self.calls.append(([entry.item.kind.value for entry in scored], budget))
        return [entry.item for entry in scored]


def _budgets(quotas: Sequence[QuotaEntry], items: list[ScoredItem], target: int) -> dict[str, int]:
    """kind -> targetTokens the inner slicer received (kinds with budget 0 are absent)."""
    recorder = RecordingSlicer()
    QuotaSlice(recorder, quotas).slice(items, budget(target))
    return {kinds[0]: sub.target_tokens for kinds, sub in recorder.calls}


def test_repr_equality_and_immutability() -> None:
    """QuotaSlice stores its quotas as a tuple, compares by value and cannot be changed."""
    slicer = QuotaSlice(GreedySlice(), [QuotaEntry("Tool", 10, 20)])
    assert slicer.quotas == (QuotaEntry(ContextKind("tool"), 10.0, 20.0),)
    assert repr(slicer) == (
        "QuotaSlice(inner=GreedySlice(), quotas=(QuotaEntry(kind=ContextKind('Tool'), "
        "require=10.0, cap=20.0),))"
    )
    assert isinstance(slicer, Slicer)
    with pytest.raises(dataclasses.FrozenInstanceError):
        slicer.inner = GreedySlice()  # type: ignore[misc]


def test_quota_vector_distribution() -> None:
    """The quota-basic walk-through: SystemPrompt 533 clamped to 500, Message 350, Document 116."""
    items = scored(("sys-a", 200, 0.9, "SystemPrompt"), ("msg-a", 300, 0.8, "Message"),
                   ("doc-a", 200, 0.7, "Document"), ("sys-b", 200, 0.5, "SystemPrompt"),
                   ("msg-b", 300, 0.3, "Message"))
    quotas = [QuotaEntry("SystemPrompt", 30.0, 50.0), QuotaEntry("Message", 0.0, 40.0)]
    assert _budgets(quotas, items, 1000) == {"SystemPrompt": 500, "Message": 350, "Document": 116}
    selected = QuotaSlice(GreedySlice(), quotas).slice(items, budget(1000))
    # Partition order (first appearance), each kind's greedy selection in turn.
    assert contents(selected) == ["sys-a", "sys-b", "msg-a"]


def test_inner_budget_is_cap_as_max_and_kind_budget_as_target() -> None:
    """The inner slicer gets ContextBudget(max=cap tokens, target=kind budget), nothing else."""
    recorder = RecordingSlicer()
    items = scored(("a", 100, 0.9, "Tool"), ("b", 100, 0.5, "Message"))
    QuotaSlice(recorder, [QuotaEntry("tool", 10.0, 30.0)]).slice(items, budget(1000, 5000))
    assert recorder.calls == [
        (["Tool"], ContextBudget(max_tokens=300, target_tokens=300)),
        (["Message"], ContextBudget(max_tokens=1000, target_tokens=450)),
    ]


# -- the edge-case table ------------------------------------------------------

def test_empty_input_and_zero_target_give_empty_lists() -> None:
    """Edge cases: empty scoredItems, and targetTokens <= 0, -> empty list."""
    slicer = QuotaSlice(GreedySlice(), [QuotaEntry("Message", 50.0)])
    assert slicer.slice([], budget(100)) == []
    assert slicer.slice(scored(("z", 0, 0.5)), budget(0, 10)) == []


def test_no_quotas_distributes_by_token_mass() -> None:
    """Edge case: no quotas -> every kind gets floor(target * mass / total mass)."""
    items = scored(("a", 300, 0.9, "Tool"), ("b", 100, 0.8, "Message"), ("c", 200, 0.1, "Tool"))
    assert _budgets([], items, 1000) == {"Tool": 833, "Message": 166}


def test_require_100_percent_gives_that_kind_everything() -> None:
    """Edge case: require = 100% -> that kind gets the whole budget, the others nothing."""
    items = scored(("a", 300, 0.9, "Tool"), ("b", 100, 0.8, "Message"))
    assert _budgets([QuotaEntry("Tool", 100.0, 100.0)], items, 1000) == {"Tool": 1000}
    selected = QuotaSlice(GreedySlice(), [QuotaEntry("Tool", 100.0)]).slice(items, budget(1000))
    assert contents(selected) == ["a"]


def test_cap_zero_excludes_the_kind() -> None:
    """Edge case: cap = 0% -> budget 0, none of that kind's items is selected."""
    items = scored(("a", 10, 0.9, "Tool"), ("z", 0, 0.9, "Tool"), ("b", 10, 0.5, "Message"))
    selected = QuotaSlice(GreedySlice(), [QuotaEntry("Tool", 0.0, 0.0)]).slice(items, budget(100))
    assert contents(selected) == ["b"]


def test_zero_mass_kind_gets_only_its_require() -> None:
    """Edge case: a kind with candidates but zero token mass gets its require, no proportion;
    with no require its budget is 0 and even its zero-token items are not selected."""
    items = scored(("z", 0, 0.9, "Memory"), ("b", 100, 0.5, "Message"))
    assert _budgets([QuotaEntry("Memory", 10.0)], items, 1000) == {"Memory": 100, "Message": 900}
    assert _budgets([], items, 1000) == {"Message": 1000}
    assert contents(QuotaSlice(GreedySlice(), []).slice(items, budget(1000))) == ["b"]


def test_kind_without_candidates_leaves_its_require_unused() -> None:
    """Edge case: a configured kind with no candidates is not partitioned; its require
    is not redistributed to the others."""
    items = scored(("b", 1000, 0.5, "Message"))
    assert _budgets([QuotaEntry("Tool", 40.0)], items, 1000) == {"Message": 600}
    assert QuotaSlice(GreedySlice(), [QuotaEntry("Tool", 40.0)]).slice(items, budget(1000)) == []


def test_floor_truncation_leaves_tokens_unallocated() -> None:
    """P6: all conversions floor, so two 33% requires allocate 330 each and the sum stays
    below target."""
    items = scored(("a", 50, 0.9, "A"), ("b", 50, 0.8, "B"), ("c", 50, 0.7, "C"))
    quotas = [QuotaEntry("A", 33.0), QuotaEntry("B", 33.0)]
    budgets = _budgets(quotas, items, 1000)
    assert budgets == {"A": 330 + 113, "B": 330 + 113, "C": 113}
    assert sum(budgets.values()) < 1000


def test_kinds_are_matched_case_insensitively() -> None:
    """P4: 'tool' and 'TOOL' items share one partition and the 'Tool' quota applies."""
    recorder = RecordingSlicer()
    items = scored(("a", 100, 0.9, "tool"), ("b", 100, 0.5, "TOOL"), ("c", 100, 0.1, "Message"))
    QuotaSlice(recorder, [QuotaEntry("Tool", 0.0, 10.0)]).slice(items, budget(1000))
    assert recorder.calls[0] == (["tool", "TOOL"], ContextBudget(100, 100))


def test_knapsack_inner_is_allowed() -> None:
    """QuotaSlice, unlike CountQuotaSlice, accepts a KnapsackSlice inner."""
    items = scored(("big", 250, 0.7), ("small-a", 150, 0.5), ("small-b", 150, 0.45))
    assert contents(QuotaSlice(KnapsackSlice(), []).slice(items, budget(300))) == ["big"]


def test_details_of_count_quota_inners_are_passed_on() -> None:
    """slice_with_details on a QuotaSlice reports what a detailed inner slicer recorded."""
    inner = CountQuotaSlice(GreedySlice(), [CountQuotaEntry("Tool", 0, cap_count=1)])
    items = scored(("a", 10, 0.9, "Tool"), ("b", 10, 0.8, "Tool"))
    outcome = slice_with_details(QuotaSlice(inner, []), items, budget(100))
    assert contents(outcome.selected) == ["a"]
    assert outcome.cap_exclusions == (CapExclusion(items[1].item, ContextKind("Tool"), 1, 1),)


# -- construction validation --------------------------------------------------

@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"require": 60.0, "cap": 50.0}, r"require: must be <= cap \(50.0\).*\(got 60.0\)"),
        ({"require": -1.0}, r"require: .*\[0.0, 100.0\].*\(got -1.0\)"),
        ({"cap": 100.5}, r"cap: .*\[0.0, 100.0\].*\(got 100.5\)"),
        ({"require": float("nan")}, r"require: must be finite \(got nan\)"),
        ({"cap": float("inf")}, r"cap: must be finite \(got inf\)"),
    ],
)
def test_bad_percentages_are_configuration_errors(kwargs: dict[str, float], pattern: str) -> None:
    """require > cap, out-of-range and non-finite percentages name the field and value."""
    with pytest.raises(ConfigurationError, match=pattern):
        QuotaEntry("Tool", **kwargs)


@pytest.mark.parametrize("bad", ["10", True, None])
def test_non_numeric_percentages_are_type_errors(bad: object) -> None:
    """A percentage that is not a number (bools included) raises InvalidTypeError."""
    with pytest.raises(InvalidTypeError, match="require"):
        QuotaEntry("Tool", bad)  # type: ignore[arg-type]


def test_requires_summing_past_100_percent_are_refused() -> None:
    """The sum of require percentages MUST NOT exceed 100%, compared as the decimals
    written: 33.3 + 33.3 + 33.4 is exactly 100 (though not in binary) and accepted, while
    a sum just above 100 (which a float tolerance would let through) is refused."""
    with pytest.raises(ConfigurationError, match=r"quotas: .*at most 100.0 \(got 100.5\)"):
        QuotaSlice(GreedySlice(), [QuotaEntry("A", 60.0), QuotaEntry("B", 40.5)])
    with pytest.raises(ConfigurationError,
                       match=r"quotas: .*at most 100.0 \(got 100.0000000009\)"):
        QuotaSlice(GreedySlice(), [QuotaEntry("A", 50.00000000045),
                                   QuotaEntry("B", 50.00000000045)])
    with pytest.raises(ConfigurationError, match="quotas"):
        QuotaSlice(GreedySlice(), [QuotaEntry("A", 60.0), QuotaEntry("B", 40.0000000009)])
    QuotaSlice(GreedySlice(), [QuotaEntry("A", 33.3), QuotaEntry("B", 33.3),
                               QuotaEntry("C", 33.4)])
    QuotaSlice(GreedySlice(), [QuotaEntry("A", 0.1), QuotaEntry("B", 0.2),
                               QuotaEntry("C", 99.7)])


def test_required_tokens_never_exceed_the_target() -> None:
    """Requires summing to exactly 100% can still floor to more than target_tokens when
    the float products round up (here by 264 tokens at this target): the required
    tokens are clamped so the kind budgets, and the selection, stay within the target."""
    target = 7461358922965555064
    quotas = [QuotaEntry("A", 4.2), QuotaEntry("B", 80.0), QuotaEntry("C", 15.8)]
    naive = sum(math.floor(q.require / 100.0 * target) for q in quotas)
    assert naive == target + 264  # what the unclamped arithmetic would hand out
    share = {"A": 4.2, "B": 80.0, "C": 15.8}
    items = [ScoredItem(ContextItem(kind, math.floor(share[kind] / 100.0 * target), kind=kind),
                        0.9) for kind in ("A", "B", "C")]
    assert sum(_budgets(quotas, items, target).values()) <= target
    selected = QuotaSlice(GreedySlice(), quotas).slice(items, budget(target))
    assert sum(item.tokens for item in selected) <= target


def test_negative_token_items_do_not_skew_the_distribution() -> None:
    """Items with negative token counts are left out of the partitions and the token
    mass: a negative mass would hand the other kinds more than the whole budget."""
    items = scored(("a", 600, 0.9, "A"), ("b", 600, 0.8, "B"), ("c", 10, 0.7, "C"),
                   ("neg", -1110, 0.6, "C"), ("a2", 100, 0.5, "A"))
    # Masses 700, 600, 10 (not -1100 for C, which would give A and B 1000 each).
    assert _budgets([], items, 1000) == {"A": 534, "B": 458, "C": 7}
    selected = QuotaSlice(GreedySlice(), []).slice(items, budget(1000))
    assert contents(selected) == ["a2"]


@pytest.mark.parametrize("inner", [GreedySlice, KnapsackSlice, QuotaSlice])
def test_a_slicer_class_as_inner_is_refused_at_construction(inner: type) -> None:
    """QuotaSlice(GreedySlice) (the class, not an instance) is a ConfigurationError naming
    ``inner`` and showing how to pass an instance."""
    with pytest.raises(ConfigurationError) as caught:
        QuotaSlice(inner, [])  # type: ignore[arg-type]
    assert caught.value.field == "inner"
    assert caught.value.value is inner
    assert f"pass an instance: {inner.__name__}()" in str(caught.value)


def test_duplicate_kinds_and_bad_members_are_refused() -> None:
    """A kind configured twice (in any case), a non-QuotaEntry, or a non-slicer inner is refused."""
    with pytest.raises(ConfigurationError, match=r"quotas: names a kind twice .*'TOOL'"):
        QuotaSlice(GreedySlice(), [QuotaEntry("tool", 1.0), QuotaEntry("TOOL", 2.0)])
    with pytest.raises(InvalidTypeError, match="quotas"):
        QuotaSlice(GreedySlice(), [("Tool", 1.0, 2.0)])  # type: ignore[list-item]
    with pytest.raises(InvalidTypeError, match="inner"):
        QuotaSlice("greedy", [])  # type: ignore[arg-type]
