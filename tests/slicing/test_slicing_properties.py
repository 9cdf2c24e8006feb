"""Properties every built-in slicer keeps, checked with hypothesis.

Budget allowances, as the chapters define them:

- GreedySlice, KnapsackSlice: selected tokens <= target_tokens, with no
  exception (zero-token items cost nothing; the knapsack's ceil/floor
  discretisation can only under-fill).
- QuotaSlice (greedy or knapsack inner): the kind budgets sum to at most
  target_tokens (floor truncation), so selected tokens <= target_tokens.
  Percentages are drawn as whole numbers so that the float products are exact.
- CountQuotaSlice, CountConstrainedKnapsackSlice: phase 1 commits the required
  items whatever they cost, so selected tokens <= max(target_tokens,
  committed tokens), where "committed" is the top ``require_count`` items of
  each constrained kind by score.

The inputs (``scored_lists``) include negative token counts, scores outside
[0, 1] and the same item object in several entries; a selection may then
repeat an object, but never more often than the input does.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Sequence

import pytest
from _slicing_support import budgets, same_shape_copies, scored_lists
from hypothesis import given, settings
from hypothesis import strategies as st

from cupellation import ContextBudget, ContextItem, ContextKind, ScoredItem
from cupellation.exceptions import InvalidValueError
from cupellation.slicing import (
    CountConstrainedKnapsackSlice,
    CountQuotaEntry,
    CountQuotaSlice,
    GreedySlice,
    KnapsackSlice,
    QuotaEntry,
    QuotaSlice,
    Slicer,
    slice_with_details,
)

_KIND_NAMES = ("Message", "ToolOutput", "Document", "Memory")


@st.composite
def quota_lists(draw: st.DrawFn) -> list[QuotaEntry]:
    """Valid quota sets with whole-number percentages (requires sum to <= 100)."""
    kinds = draw(st.lists(st.sampled_from(_KIND_NAMES), unique=True, max_size=4))
    left = 100
    quotas = []
    for kind in kinds:
        require = draw(st.integers(min_value=0, max_value=left))
        left -= require
        cap = draw(st.integers(min_value=require, max_value=100))
        quotas.append(QuotaEntry(kind.upper(), float(require), float(cap)))
    return quotas


@st.composite
def count_entry_lists(draw: st.DrawFn) -> list[CountQuotaEntry]:
    """Valid count-quota entries over a few kinds."""
    kinds = draw(st.lists(st.sampled_from(_KIND_NAMES), unique=True, max_size=4))
    entries = []
    for kind in kinds:
        require = draw(st.integers(min_value=0, max_value=3))
        cap = draw(st.integers(min_value=max(require, 0), max_value=4))
        if require > 0:
            cap = max(cap, 1)
        entries.append(CountQuotaEntry(kind.lower(), require, cap_count=cap))
    return entries


_simple_slicers = st.one_of(
    st.just(GreedySlice()),
    st.integers(min_value=1, max_value=120).map(KnapsackSlice),
)
_quota_slicers = st.builds(QuotaSlice, _simple_slicers, quota_lists())
_count_slicers = st.one_of(
    st.builds(CountQuotaSlice, st.just(GreedySlice()), count_entry_lists()),
    st.builds(CountConstrainedKnapsackSlice, count_entry_lists(),
              st.integers(min_value=1, max_value=120)),
)
_all_slicers = st.one_of(_simple_slicers, _quota_slicers, _count_slicers)


def _tokens(items: Sequence[ContextItem]) -> int:
    return sum(item.tokens for item in items)


def _committed(
    entries: Sequence[CountQuotaEntry], scored: Sequence[ScoredItem]
) -> list[ContextItem]:
    """The items phase 1 commits: the top require_count of each constrained kind."""
    committed: list[ContextItem] = []
    for entry in entries:
        pool = [pair for pair in scored if pair.item.kind == entry.kind and pair.item.tokens >= 0]
        top = heapq.nlargest(entry.require_count, pool, key=lambda pair: pair.score)
        committed.extend(pair.item for pair in top)
    return committed


@settings(max_examples=100, deadline=None)
@given(_all_slicers, scored_lists(), budgets())
def test_returns_a_sub_multiset_of_the_same_objects(
    slicer: Slicer, scored: list[ScoredItem], budget: ContextBudget
) -> None:
    """Every slicer returns input objects only (by identity), each at most as often as
    the input lists it, never one with negative tokens, and slice() equals
    slice_with_details().selected."""
    selected = slicer.slice(scored, budget)
    ids = [id(item) for item in selected]
    assert not Counter(ids) - Counter(id(pair.item) for pair in scored)
    assert all(item.tokens >= 0 for item in selected)
    assert [id(item) for item in slice_with_details(slicer, scored, budget).selected] == ids


@settings(max_examples=100, deadline=None)
@given(_all_slicers, scored_lists(), budgets())
def test_is_deterministic(slicer: Slicer, scored: list[ScoredItem], budget: ContextBudget) -> None:
    """The same input gives the same items in the same order, also for equal copies
    (repeated objects stay repeated in the copy)."""
    first = slicer.slice(scored, budget)
    assert slicer.slice(scored, budget) == first
    assert [id(item) for item in slicer.slice(scored, budget)] == [id(item) for item in first]
    copies = same_shape_copies(
        scored, lambda item: ContextItem(item.content, item.tokens, kind=item.kind))
    assert [item.content for item in slicer.slice(copies, budget)] == [
        item.content for item in first]


@settings(max_examples=100, deadline=None)
@given(st.one_of(_simple_slicers, _quota_slicers), scored_lists(), budgets())
def test_greedy_knapsack_and_quota_never_exceed_the_target(
    slicer: Slicer, scored: list[ScoredItem], budget: ContextBudget
) -> None:
    """Greedy, knapsack and quota selections fit target_tokens (no allowance needed)."""
    assert _tokens(slicer.slice(scored, budget)) <= budget.target_tokens


@settings(max_examples=100, deadline=None)
@given(_simple_slicers, scored_lists(), budgets())
def test_zero_token_items_are_always_selected_when_target_is_positive(
    slicer: Slicer, scored: list[ScoredItem], budget: ContextBudget
) -> None:
    """Greedy and knapsack include every zero-token item whenever target_tokens > 0,
    and return nothing at all when it is 0."""
    selected = {id(item) for item in slicer.slice(scored, budget)}
    zero = {id(pair.item) for pair in scored if pair.item.tokens == 0}
    if budget.target_tokens > 0:
        assert zero <= selected
    else:
        assert not selected


@settings(max_examples=100, deadline=None)
@given(_count_slicers, scored_lists(), budgets())
def test_count_quota_budget_counts_and_shortfalls(
    slicer: CountQuotaSlice | CountConstrainedKnapsackSlice,
    scored: list[ScoredItem],
    budget: ContextBudget,
) -> None:
    """Count slicers: tokens <= max(target, committed tokens); each constrained kind has
    between min(require, available) and cap items; shortfalls are exactly the kinds with
    fewer candidates than required; cap exclusions are input items not selected."""
    outcome = slice_with_details(slicer, scored, budget)
    if not scored or budget.target_tokens <= 0:
        assert outcome.selected == ()
        return
    committed = _committed(slicer.entries, scored)
    assert _tokens(outcome.selected) <= max(budget.target_tokens, _tokens(committed))
    assert {id(item) for item in committed} <= {id(item) for item in outcome.selected}
    counts = Counter(item.kind for item in outcome.selected)
    available = Counter(pair.item.kind for pair in scored if pair.item.tokens >= 0)
    for entry in slicer.entries:
        assert min(entry.require_count, available[entry.kind]) <= counts[entry.kind]
        assert counts[entry.kind] <= entry.cap_count
    expected_shortfalls = [
        (entry.kind, entry.require_count, available[entry.kind])
        for entry in slicer.entries if available[entry.kind] < entry.require_count
    ]
    assert [(s.kind, s.required_count, s.satisfied_count)
            for s in outcome.shortfalls] == expected_shortfalls
    # An excluded object may still be selected through another entry of the same
    # object, but then the input lists it more often than the result does.
    selected_ids = Counter(id(item) for item in outcome.selected)
    input_ids = Counter(id(pair.item) for pair in scored)
    for exclusion in outcome.cap_exclusions:
        assert selected_ids[id(exclusion.item)] < input_ids[id(exclusion.item)]
        assert exclusion.kind == exclusion.item.kind
        assert exclusion.count == exclusion.cap


@settings(max_examples=100, deadline=None)
@given(scored_lists(), budgets())
def test_kind_spelling_does_not_change_a_quota_result(
    scored: list[ScoredItem], budget: ContextBudget
) -> None:
    """Re-spelling every item's kind in upper case selects the same items (P4)."""
    quotas = [QuotaEntry("message", 20.0, 60.0), QuotaEntry("TOOLOUTPUT", 10.0, 50.0)]
    slicer = QuotaSlice(GreedySlice(), quotas)
    shouted = same_shape_copies(scored, lambda item: ContextItem(
        item.content, item.tokens, kind=ContextKind(item.kind.value.upper())))
    assert sorted(i.content for i in slicer.slice(scored, budget)) == sorted(
        i.content for i in slicer.slice(shouted, budget))


@pytest.mark.parametrize("slicer", [
    GreedySlice(), KnapsackSlice(1), QuotaSlice(GreedySlice()),
    CountQuotaSlice(GreedySlice(), []), CountConstrainedKnapsackSlice([], 1),
], ids=lambda slicer: type(slicer).__name__)
def test_an_int_score_beyond_the_float_range_is_an_invalid_value(slicer: Slicer) -> None:
    """A score of 10**400 (a Python int no double can hold) is an InvalidValueError naming
    the entry, from every slicer, never a bare OverflowError."""
    entries = [ScoredItem(ContextItem("a", 1), 0.5), ScoredItem(ContextItem("b", 1), 10**400)]
    with pytest.raises(InvalidValueError) as caught:
        slicer.slice(entries, ContextBudget(100, 100))
    assert caught.value.field == f"{type(slicer).__name__} scored[1].score"
    assert caught.value.value == 10**400
